//! Finished tasks on disk: one JSON line per task once it is over, read back when a server
//! starts on the same file, so a restarted server still answers `GetTask` and `ListTasks` for
//! them. The conversations behind them resume through the agents' own session logs
//! (`AgentSpec::session`); tasks still running when the server stops are not kept.
//!
//! Bounded: loading keeps the newest [`MAX_TASKS`](super::tasks::MAX_TASKS) and rewrites the
//! file with them (atomically), so the file does not grow without end across restarts; a line
//! that does not read (a torn last write, an edit) is skipped with a warning.

use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use troupe_protocol::sync::lock;

use crate::error::ServeError;
use crate::server::tasks::MAX_TASKS;
use crate::wire::Task;

/// One line: a finished task and the agent it belongs to.
#[derive(Serialize, Deserialize)]
pub(crate) struct JournalLine {
    pub(crate) agent: String,
    pub(crate) task: Task,
}

/// The open file finished tasks are appended to.
pub(crate) struct TaskJournal {
    path: PathBuf,
    file: Mutex<File>,
}

impl TaskJournal {
    /// Open (or create) the journal at `path`: the tasks it holds, oldest first, and the
    /// journal to append to.
    pub(crate) fn open(path: &Path) -> Result<(TaskJournal, Vec<JournalLine>), ServeError> {
        let error = |source| ServeError::Journal {
            path: path.to_path_buf(),
            source,
        };
        let mut lines = Vec::new();
        match File::open(path) {
            Ok(file) => {
                if !file.metadata().map_err(error)?.is_file() {
                    return Err(error(std::io::Error::other("not a regular file")));
                }
                for (n, line) in BufReader::new(file).lines().enumerate() {
                    let line = line.map_err(error)?;
                    match serde_json::from_str::<JournalLine>(&line) {
                        Ok(entry) => lines.push(entry),
                        Err(e) if !line.trim().is_empty() => tracing::warn!(
                            path = %path.display(),
                            "A2A task journal line {} skipped: {e}",
                            n + 1
                        ),
                        Err(_) => {}
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(error(e)),
        }
        let keep_from = lines.len().saturating_sub(MAX_TASKS);
        lines.drain(..keep_from);
        // Rewritten with what is kept: the file holds at most MAX_TASKS lines after a start.
        let tmp = path.with_extension("tmp");
        {
            let mut out = File::create(&tmp).map_err(error)?;
            for line in &lines {
                let text = serde_json::to_string(line).map_err(|e| error(e.into()))?;
                writeln!(out, "{text}").map_err(error)?;
            }
            out.sync_all().map_err(error)?;
        }
        std::fs::rename(&tmp, path).map_err(error)?;
        let file = OpenOptions::new().append(true).open(path).map_err(error)?;
        Ok((
            TaskJournal {
                path: path.to_path_buf(),
                file: Mutex::new(file),
            },
            lines,
        ))
    }

    /// Append a finished task. A failed write is logged: the task is still served from memory.
    pub(crate) fn record(&self, agent: &str, task: &Task) {
        let line = JournalLine {
            agent: agent.to_string(),
            task: task.clone(),
        };
        let written = serde_json::to_string(&line)
            .map_err(std::io::Error::from)
            .and_then(|text| {
                let mut file = lock(&self.file);
                writeln!(file, "{text}")?;
                file.flush()
            });
        if let Err(e) = written {
            tracing::warn!(path = %self.path.display(), "an A2A task was not journaled: {e}");
        }
    }
}
