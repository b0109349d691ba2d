//! The team's view in the browser: `troupe ui --trace FILE` / `--session LOG` (a finished run,
//! read-only), `troupe chat --ui` and `troupe node --ui` (the team, live).

use anyhow::Context as _;
use troupe::Team;
use troupe_ui::{UiConfig, UiServer};

use crate::cli::UiArgs;

/// Serve a finished run's trace file or session log until Ctrl-C.
pub async fn run(args: UiArgs) -> anyhow::Result<()> {
    let config = UiConfig {
        bind: args.listen,
        ..UiConfig::default()
    };
    let view = match (&args.trace, &args.session) {
        (Some(trace), _) => troupe_ui::serve_trace(trace, config).await?,
        (None, Some(session)) => troupe_ui::serve_session(session, config).await?,
        (None, None) => anyhow::bail!("give --trace FILE or --session LOG"),
    };
    println!("{} (read-only)", view.url());
    println!("Ctrl-C stops it.");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    view.shutdown().await;
    Ok(())
}

/// The live view of the chat's or the node's team, when asked for (`--ui`); its URL is printed.
pub async fn live(team: &Team, wanted: bool) -> anyhow::Result<Option<UiServer>> {
    if !wanted {
        return Ok(None);
    }
    let view = troupe_ui::serve(team, UiConfig::default()).await?;
    println!("live view: {}", view.url());
    Ok(Some(view))
}
