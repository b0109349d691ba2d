//! The last few KiB a server wrote to stderr, kept to explain why it failed. The explanation
//! goes into error messages and tool results, and so to the model's provider: it is redacted
//! first, since a failing server's stderr can quote its own credentials (a key in an error
//! line, a dumped environment).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::ChildStderr;
use tokio::task::JoinHandle;
use troupe_protocol::sync::lock;
use troupe_runtime::redact::redact_value;

/// How much of a server's stderr is kept.
const KEEP_BYTES: usize = 4096;

/// How long a failure report waits for a dying server's last stderr lines.
const SETTLE: Duration = Duration::from_millis(500);

/// A capped tail of a child's stderr, filled by a background task.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    kept: Arc<Mutex<Vec<u8>>>,
    reader: Mutex<Option<JoinHandle<()>>>,
}

impl StderrTail {
    /// Drain `stderr` into the tail until the child closes it.
    pub(crate) fn follow(stderr: Option<ChildStderr>) -> Self {
        let tail = StderrTail::default();
        let Some(mut stderr) = stderr else {
            return tail;
        };
        let kept = tail.kept.clone();
        let reader = tokio::spawn(async move {
            let mut chunk = [0u8; 1024];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let mut kept = lock(&kept);
                kept.extend_from_slice(&chunk[..n]);
                let excess = kept.len().saturating_sub(KEEP_BYTES);
                kept.drain(..excess);
            }
        });
        *lock(&tail.reader) = Some(reader);
        tail
    }

    /// [`StderrTail::describe`] once the server has closed stderr (it is exiting), or after a
    /// short wait if it has not.
    pub(crate) async fn describe_after_exit(&self) -> String {
        let reader = lock(&self.reader).take();
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(SETTLE, reader).await;
        }
        self.describe()
    }

    /// `; its stderr: …` (trimmed, lossy UTF-8, redacted) when the server wrote anything, else
    /// empty.
    pub(crate) fn describe(&self) -> String {
        let kept = lock(&self.kept);
        let text = String::from_utf8_lossy(&kept);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("; its stderr: {}", redact_value(text))
        }
    }
}
