//! `troupe trace FILE... [--follow]`.

use std::io::IsTerminal;
use std::time::Duration;

use troupe_cli::trace_tree::{
    TraceFollower, build_forest, escape_control, render_files, render_forest, render_warnings,
};

use crate::cli::TraceArgs;

/// How often `--follow` looks for new lines.
const POLL: Duration = Duration::from_millis(500);

pub async fn run(args: TraceArgs) -> anyhow::Result<()> {
    if !args.follow {
        let files: Vec<&std::path::Path> = args.files.iter().map(|f| f.as_path()).collect();
        print!("{}", render_files(&files)?);
        return Ok(());
    }
    let [file] = args.files.as_slice() else {
        anyhow::bail!("--follow reads one file; give it one trace file");
    };
    // On a terminal the tree is redrawn as spans close; into a pipe, each redraw is appended.
    let redraw = std::io::stdout().is_terminal();
    let mut follower = TraceFollower::new(file);
    let shown = file.display().to_string();
    let header = format!("following {} (Ctrl-C to stop)", escape_control(&shown));
    println!("{header}");
    let mut bad_lines = 0;
    loop {
        let added = follower.poll()?;
        // A bad line is news too: said (with the count) as the tree is drawn again.
        if added > 0 || follower.read().bad_lines > bad_lines {
            bad_lines = follower.read().bad_lines;
            let text = render_warnings(file, follower.read())
                + &render_forest(&build_forest(follower.lines()));
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
