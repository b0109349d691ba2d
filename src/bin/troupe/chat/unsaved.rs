//! What the session log is missing: the agent reports a log that its last writes could not
//! reach ([`SessionBehind`]); the chat names the requests and compactions concerned right after the
//! one whose write failed, says when a later write caught the log up, and sums up at exit.

use troupe::session::SessionBehind;

use super::terminal::safe;

/// The requests and compactions of this chat that the session log does not hold.
#[derive(Debug, Default)]
pub(super) struct Unsaved {
    /// What each unsaved commit was ("request 3 (“hello”)", "the compaction after request 3").
    items: Vec<String>,
    /// How many boundaries the agent counted as unsaved when last asked.
    counted: usize,
    /// The agent's last report.
    last: Option<SessionBehind>,
}

impl Unsaved {
    /// After a commit that added `what` (a request, a compaction; `None`: nothing): take
    /// the agent's report and say what changed.
    pub(super) fn after(&mut self, what: Option<String>, behind: Option<SessionBehind>) {
        match behind {
            Some(behind) => {
                if let Some(what) = what.filter(|_| behind.unsaved > self.counted) {
                    self.items.push(what);
                }
                self.counted = behind.unsaved;
                println!(
                    "error: the session log could not be written: {}\n  not saved: {} \
                     (written again at the next request if the log can be written then)",
                    safe(&behind.error),
                    self.list()
                );
                self.last = Some(behind);
            }
            None => {
                if !self.items.is_empty() {
                    println!("(the session log caught up: {} saved now)", self.list());
                }
                *self = Unsaved::default();
            }
        }
    }

    /// The log was cleared: what it missed is what the clear forgets.
    pub(super) fn forget(&mut self) {
        *self = Unsaved::default();
    }

    /// Whether anything is not saved.
    pub(super) fn any(&self) -> bool {
        self.last.is_some()
    }

    /// At exit: what was never saved, in one line, or `None` when everything was.
    pub(super) fn summary(&self) -> Option<String> {
        let behind = self.last.as_ref()?;
        Some(format!(
            "the session log {} is missing {}: {}",
            behind.path.display(),
            self.list(),
            behind.error
        ))
    }

    fn list(&self) -> String {
        match self.items.as_slice() {
            [] => "what changed since its last successful write".to_string(),
            [one] => one.clone(),
            [first @ .., last] => format!("{} and {last}", first.join(", ")),
        }
    }
}
