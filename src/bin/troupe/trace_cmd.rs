//! `troupe trace FILE [--follow]`.

use std::io::IsTerminal;
use std::time::Duration;

use troupe_cli::trace_tree::{
    TraceFollower, build_forest, escape_control, render_file, render_forest,
};

use crate::cli::TraceArgs;

/// How often `--follow` looks for new lines.
const POLL: Duration = Duration::from_millis(500);

pub async fn run(args: TraceArgs) -> anyhow::Result<()> {
    if !args.follow {
        print!("{}", render_file(&args.file)?);
        return Ok(());
    }
    // On a terminal the tree is redrawn as spans close; into a pipe, each redraw is appended.
    let redraw = std::io::stdout().is_terminal();
    let mut follower = TraceFollower::new(&args.file);
    let shown = args.file.display().to_string();
    let header = format!("following {} (Ctrl-C to stop)", escape_control(&shown));
    println!("{header}");
    loop {
        if follower.poll()? > 0 {
            let text = render_forest(&build_forest(follower.lines()));
            if redraw {
                print!("\x1b[2J\x1b[H");
                println!("{header}");
            }
            print!("{text}");
            if !redraw {
                println!("---");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}
