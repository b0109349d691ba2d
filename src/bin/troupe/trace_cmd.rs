//! `troupe trace FILE [--follow]`.

use std::io::IsTerminal;
use std::time::Duration;

use troupe::trace_tree::{TraceFollower, build_forest, render_file, render_forest};

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
    println!("following {} (Ctrl-C to stop)", args.file.display());
    loop {
        if follower.poll()? > 0 {
            let text = render_forest(&build_forest(follower.lines()));
            if redraw {
                print!("\x1b[2J\x1b[H");
                println!("following {} (Ctrl-C to stop)", args.file.display());
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
