//! Whose session a log is: a log written by one agent is refused to another (its conversation,
//! tools and instructions were another agent's), before anything of it is loaded.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;

use troupe::session::SessionRecord;

/// How much of a log is read to find its first record.
const HEADER_LIMIT: u64 = 64 * 1024;

/// The agent named in the first record of the log at `path`, when it is a regular file that
/// starts with one (anything else is the session code's to report when it opens the log).
fn logged_agent(path: &Path) -> Option<String> {
    // Not a FIFO or a device: reading one could block or never end.
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let mut first = String::new();
    BufReader::new(file.take(HEADER_LIMIT))
        .read_line(&mut first)
        .ok()?;
    match serde_json::from_str::<SessionRecord>(first.trim_end()).ok()? {
        SessionRecord::Session { agent, .. } => agent,
        _ => None,
    }
}

/// Refuse the log at `path` when another agent than `agent` wrote it.
pub(super) fn check_agent(path: &Path, agent: &str) -> anyhow::Result<()> {
    match logged_agent(path) {
        Some(logged) if logged != agent => {
            let logged = super::terminal::safe(&logged);
            anyhow::bail!(
                "session {} was written by agent `{logged}`, not `{agent}`: chat with it using \
                 --agent {logged}, or choose another session",
                path.display()
            )
        }
        _ => Ok(()),
    }
}
