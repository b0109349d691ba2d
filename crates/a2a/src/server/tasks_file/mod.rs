//! Finished tasks on disk (`--tasks FILE`): one JSON line per task once it is over, read back
//! when a server starts on the same file, so a restarted server still answers `GetTask` and
//! `ListTasks` for them. The conversations behind them resume through the agents' own session
//! logs (`AgentSpec::session`); tasks still running when the server stops are not kept.
//!
//! The file holds every message of those tasks, so it is handled as the session logs are:
//! - private: created `0600` (its temporary files too);
//! - one writer: a second server on the file is refused, naming the first (`lock.rs`);
//! - only a regular file: a FIFO, device or directory is refused before anything is read (the
//!   opens are non-blocking, so not even a FIFO swapped in can hang the start), and a symbolic
//!   link is refused rather than followed or replaced (the file is rewritten in place of its
//!   name);
//! - a torn tail is no error: a last line without its newline (a write cut short, perhaps
//!   inside a character) is skipped with a warning, and so is a complete line that does not
//!   read (an edit), so one bad line never stops the server from starting;
//! - rewritten atomically through a temporary file of its own naming beside it (`tempfile`),
//!   so no file of the user's is ever written over but the tasks file itself;
//! - bounded: the store rewrites it with what it keeps ([`TasksFile::rewrite`]) at start and
//!   whenever the lines it no longer keeps grow past an eighth of what it does, so the file
//!   stays within 9/8 of the store's finished tasks (plus 1 MiB and 16 lines), each task
//!   written about nine times at most over its life.

mod lock;

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ServeError;
use crate::wire::Task;
use lock::TasksFileLock;

/// One line: a finished task, the agent it belongs to, and its caller.
#[derive(Serialize, Deserialize)]
pub(crate) struct TaskLine {
    pub(crate) agent: String,
    /// Who started it; a line of a troupe before callers had keys of their own has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) caller: Option<String>,
    pub(crate) task: Task,
}

impl TaskLine {
    /// The line as written (without its newline).
    pub(crate) fn text(&self) -> String {
        // A task is strings, numbers and JSON values: it always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The open tasks file: the file appended to, what it holds, and its lock.
pub(crate) struct TasksFile {
    path: PathBuf,
    file: File,
    /// Bytes and lines in the file.
    bytes: u64,
    lines: usize,
    _lock: TasksFileLock,
}

/// The additive slack of the bound: rewrites wait for this much dead weight at least.
const SLACK_BYTES: u64 = 1 << 20;
const SLACK_LINES: usize = 16;

impl TasksFile {
    /// Open the tasks file at `path` (absent: none yet): the lines it holds, oldest first, each
    /// with its size on disk. The caller rewrites it with what it keeps before appending.
    pub(crate) fn open(path: &Path) -> Result<(TasksFile, Vec<(TaskLine, u64)>), ServeError> {
        let error = io_error(path);
        if let Some(kind) = irregular(path).map_err(&error)? {
            return Err(error(std::io::Error::other(kind)));
        }
        let lock = TasksFileLock::acquire(path)?;
        let mut bytes = Vec::new();
        match open_regular(path, OpenOptions::new().read(true)) {
            Ok(mut file) => {
                file.read_to_end(&mut bytes).map_err(&error)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(error(e)),
        }
        let (lines, warnings) = read_lines(&bytes);
        for warning in warnings {
            tracing::warn!(path = %path.display(), "A2A tasks file: {warning}");
        }
        let file =
            open_regular(path, OpenOptions::new().append(true).create(true)).map_err(&error)?;
        Ok((
            TasksFile {
                path: path.to_path_buf(),
                file,
                bytes: bytes.len() as u64,
                lines: lines.len(),
                _lock: lock,
            },
            lines,
        ))
    }

    /// Append a finished task's line. A failed write is logged: the task is still served from
    /// memory.
    pub(crate) fn record(&mut self, line: &str) {
        let written = self
            .file
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| self.file.flush());
        match written {
            Ok(()) => {
                self.bytes += line.len() as u64 + 1;
                self.lines += 1;
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "an A2A task was not written to the tasks file: {e}");
            }
        }
    }

    /// Whether the file has grown past the bound for a store keeping `kept` lines of
    /// `kept_bytes` in all: time to [`TasksFile::rewrite`] it.
    pub(crate) fn outgrown(&self, kept: usize, kept_bytes: u64) -> bool {
        self.bytes > kept_bytes + kept_bytes / 8 + SLACK_BYTES
            || self.lines > kept + kept / 8 + SLACK_LINES
    }

    /// Replace the file's content with `lines` (the store's finished tasks, oldest first),
    /// atomically: written to a private temporary file beside it, synced, renamed over it.
    pub(crate) fn rewrite<'a>(&mut self, lines: impl IntoIterator<Item = &'a str>) {
        if let Err(e) = self.try_rewrite(lines) {
            tracing::warn!(path = %self.path.display(), "the A2A tasks file was not rewritten: {e}");
        }
    }

    fn try_rewrite<'a>(&mut self, lines: impl IntoIterator<Item = &'a str>) -> std::io::Result<()> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // `tempfile` names it at random, creates it exclusively (never through a link) and
        // private (0600).
        let mut temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(dir)?;
        let (mut bytes, mut count) = (0u64, 0usize);
        {
            let mut out = std::io::BufWriter::new(temp.as_file_mut());
            for line in lines {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
                bytes += line.len() as u64 + 1;
                count += 1;
            }
            out.flush()?;
        }
        temp.as_file().sync_all()?;
        temp.persist(&self.path).map_err(|e| e.error)?;
        sync_dir(dir);
        self.file = open_regular(&self.path, OpenOptions::new().append(true))?;
        self.bytes = bytes;
        self.lines = count;
        Ok(())
    }
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> ServeError + '_ {
    move |source| ServeError::TasksFile {
        path: path.to_path_buf(),
        source,
    }
}

/// What `path` is when it is there and not a regular file (`a FIFO`, `a symbolic link`…).
fn irregular(path: &Path) -> std::io::Result<Option<String>> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let kind = kind_of(&metadata.file_type());
    Ok(kind.map(|kind| {
        if kind == "a symbolic link" {
            "is a symbolic link: not followed (the file is rewritten in place of its name); give the tasks file's own path".to_string()
        } else {
            format!("is {kind}, not a regular file")
        }
    }))
}

/// The kind of a file that is not a regular one, in words.
pub(super) fn kind_of(file_type: &std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_symlink() {
        return Some("a symbolic link");
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return Some("a FIFO");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return Some("a device");
        }
    }
    Some("not a regular file")
}

/// Open `path` with `options`, never through a symbolic link and without blocking (a FIFO
/// swapped in cannot hang the open), created `0600`; anything but a regular file is refused.
pub(super) fn open_regular(path: &Path, options: &mut OpenOptions) -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // The flags' bits fit an `i32` (small positive constants).
        options
            .custom_flags(
                (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
            )
            .mode(0o600);
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        let link = e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error());
        #[cfg(not(unix))]
        let link = false;
        // O_NOFOLLOW on a link: say what it is.
        if link {
            std::io::Error::other(format!(
                "{} is a symbolic link: not followed",
                path.display()
            ))
        } else {
            e
        }
    })?;
    if let Some(kind) = kind_of(&file.metadata()?.file_type()) {
        return Err(std::io::Error::other(format!(
            "{} is {kind}, not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// fsync a directory, so a rename in it survives a crash (best effort: some file systems
/// refuse it).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::debug!(dir = %dir.display(), "could not sync the tasks file's folder: {e}");
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// The lines of a tasks file's bytes, each with its size on disk, and what was skipped: a last
/// line without its newline (a torn write), a complete line that is not UTF-8 or not a line of
/// the tasks file (an edit).
pub(crate) fn read_lines(bytes: &[u8]) -> (Vec<(TaskLine, u64)>, Vec<String>) {
    let (mut lines, mut warnings) = (Vec::new(), Vec::new());
    let mut rest = bytes;
    let mut number = 0usize;
    while !rest.is_empty() {
        number += 1;
        let Some(end) = rest.iter().position(|b| *b == b'\n') else {
            warnings.push(format!(
                "line {number} skipped: an incomplete last line ({} bytes), a write cut short",
                rest.len()
            ));
            break;
        };
        let line = &rest[..end];
        rest = &rest[end + 1..];
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match std::str::from_utf8(line)
            .map_err(|e| format!("not UTF-8 ({e})"))
            .and_then(|text| serde_json::from_str::<TaskLine>(text).map_err(|e| e.to_string()))
        {
            Ok(entry) => lines.push((entry, end as u64 + 1)),
            Err(e) => warnings.push(format!("line {number} skipped: {e}")),
        }
    }
    (lines, warnings)
}

#[cfg(test)]
mod tests;
