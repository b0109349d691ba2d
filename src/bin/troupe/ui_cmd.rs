//! The team's view in the browser: `troupe ui --trace FILE` / `--session LOG` (a finished run,
//! read-only), `troupe chat --ui` and `troupe node --ui` (the team, live).

use anyhow::Context as _;
use troupe::Team;
use troupe::ui::{UiConfig, UiServer};
use troupe_cli::config::ServeSection;
use troupe_cli::trace_tree::escape_control;

use crate::cli::UiArgs;
use crate::store_arg::open_or_files;

/// Serve a finished run's trace file or session log until Ctrl-C.
pub async fn run(args: UiArgs) -> anyhow::Result<()> {
    let config = UiConfig {
        bind: args.listen,
        ..UiConfig::default()
    };
    let view = match (&args.trace, &args.session) {
        (Some(trace), _) => {
            let (view, warnings) = troupe::ui::serve_trace(trace, config).await?;
            for warning in warnings {
                eprintln!("warning: {}", escape_control(&warning));
            }
            view
        }
        (None, Some(session)) => {
            let (store, log) = open_or_files(args.store.as_ref(), session)?;
            troupe::ui::serve_session(&store, &log, config).await?
        }
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

/// The live view of the chat's or the node's team, when asked for (`--ui`), bounded as the
/// configuration's `[serve]` says; its URL is printed.
pub async fn live(
    team: &Team,
    wanted: bool,
    serve: &ServeSection,
) -> anyhow::Result<Option<UiServer>> {
    if !wanted {
        return Ok(None);
    }
    let config = UiConfig {
        limits: serve.limits(),
        ..UiConfig::default()
    };
    let view = troupe::ui::serve(team, config).await?;
    println!("live view: {}", view.url());
    Ok(Some(view))
}
