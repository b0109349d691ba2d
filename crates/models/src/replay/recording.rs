//! [`RecordingModel`]: any model, its calls appended to a cassette as they end.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use troupe_protocol::sync::lock;
use troupe_protocol::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, ModelDelta, ModelError, ModelInfo,
};

use super::ReplayError;
use super::format::{
    CASSETTE_VERSION, Header, Record, RecordedError, RecordedRequest, RecordedResponse,
};
use crate::observed_stream::{StreamObserver, observe};

/// Wraps a model and appends every call (request and response or error) to a JSONL cassette.
///
/// The inner model's stream is passed on as it comes; the call is recorded when it ends, as the
/// response its deltas add up to (or its error), under the agent that asked
/// ([`ChatRequest::agent`]) and that agent's count of calls. A call whose future or stream is
/// dropped before it ends is not recorded.
pub struct RecordingModel<M> {
    inner: M,
    cassette: Arc<Cassette>,
}

/// The file a [`RecordingModel`] appends to, shared with the streams it records.
struct Cassette {
    path: PathBuf,
    written: Mutex<Written>,
}

/// The file and each asker's count of recorded calls: one lock, so a line's `call` number and
/// its place in the file agree even when agents end calls at the same moment.
struct Written {
    file: File,
    calls: HashMap<Option<String>, usize>,
}

impl<M: ChatModel> RecordingModel<M> {
    /// Record `inner`'s calls to `path`, truncating it and writing the header (the format's
    /// version and `inner`'s [`ModelInfo`]).
    ///
    /// The cassette is troupe's own file and holds every prompt and answer: it is written
    /// `0o600`, never through a symbolic link or a hard link planted at its path (either would
    /// have troupe truncate the file it names), never waiting on a FIFO, and by one recorder at
    /// a time — an exclusive lock on it, held while it records, refuses a second (another run
    /// recording into the same directory) instead of interleaving the two.
    ///
    /// # Errors
    /// [`ReplayError::Io`] when the file cannot be created or written, is a link or not a
    /// regular file, or another recorder holds it.
    pub fn create(inner: M, path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref().to_path_buf();
        let io = |cause| ReplayError::Io {
            path: path.clone(),
            cause,
        };
        let mut file = open_own(&path).map_err(io)?;
        let header = Header {
            cassette: CASSETTE_VERSION,
            model: inner.info(),
        };
        let mut line = serde_json::to_string(&header).map_err(|e| ReplayError::Io {
            path: path.clone(),
            cause: std::io::Error::other(e),
        })?;
        line.push('\n');
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(io)?;
        Ok(RecordingModel {
            inner,
            cassette: Arc::new(Cassette {
                path,
                written: Mutex::new(Written {
                    file,
                    calls: HashMap::new(),
                }),
            }),
        })
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The cassette being written.
    pub fn path(&self) -> &Path {
        &self.cassette.path
    }
}

/// A refusal to record into what is at a cassette's path.
fn refused(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {what}, which troupe does not record into; remove it"),
    )
}

/// The cassette at `path`, open to be written afresh (see [`RecordingModel::create`]): locked,
/// emptied and private.
fn open_own(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true);
    #[cfg(unix)]
    {
        use rustix::fs::OFlags;
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
        // The flags' bits fit an `i32` (small positive constants).
        options.custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32);
    }
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refused("a symbolic link"));
    }
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            return refused("a symbolic link");
        }
        #[cfg(unix)]
        if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) {
            return refused("a FIFO or socket");
        }
        e
    })?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(refused("not a regular file"));
    }
    #[cfg(unix)]
    {
        use rustix::fs::{FlockOperation, flock};
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        if metadata.nlink() > 1 {
            return Err(refused("a hard link of another file"));
        }
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    "another recorder (another run recording into the same directory) holds \
                     it: one recorder per cassette",
                ));
            }
            Err(e) => return Err(e.into()),
        }
        // A cassette recorded again is troupe's to make private, as a new one is.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.set_len(0)?;
    Ok(file)
}

impl Cassette {
    fn append(&self, mut record: Record) -> Result<(), ModelError> {
        let mut written = lock(&self.written);
        let call = written.calls.get(&record.agent).copied().unwrap_or(0) + 1;
        record.call = Some(call);
        let mut line = serde_json::to_string(&record)
            .map_err(|e| ModelError::Unavailable(format!("cannot encode a recorded call: {e}")))?;
        line.push('\n');
        // One write per line, then flush: a crash leaves whole lines behind.
        let file = &mut written.file;
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| {
                ModelError::Unavailable(format!(
                    "cannot write cassette {}: {e}",
                    self.path.display()
                ))
            })?;
        // Counted once written: a line that failed to land must not leave a gap in the numbers.
        written.calls.insert(record.agent, call);
        Ok(())
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for RecordingModel<M> {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let mut record = Record {
            agent: request.agent.clone(),
            call: None,
            model: self.inner.info(),
            request: RecordedRequest::from(&request),
            response: None,
            error: None,
        };
        match self.inner.chat_stream(request).await {
            Ok(stream) => {
                let recorder = Recorder {
                    cassette: Arc::clone(&self.cassette),
                    record,
                    text_chunks: Vec::new(),
                };
                Ok(observe(stream, Box::new(recorder), tracing::Span::none()))
            }
            Err(e) => {
                record.error = Some(RecordedError::from(&e));
                self.cassette.append(record)?;
                Err(e)
            }
        }
    }
}

/// Writes one call's record when its stream ends.
struct Recorder {
    cassette: Arc<Cassette>,
    record: Record,
    /// The characters of each text delta so far.
    text_chunks: Vec<usize>,
}

impl StreamObserver for Recorder {
    fn delta(&mut self, delta: &ModelDelta) {
        if let ModelDelta::Text(text) = delta {
            self.text_chunks.push(text.chars().count());
        }
    }

    fn finished(self: Box<Self>, outcome: &Result<ChatResponse, ModelError>) {
        let Recorder {
            cassette,
            mut record,
            text_chunks,
        } = *self;
        match outcome {
            Ok(r) => {
                record.response = Some(RecordedResponse {
                    message: r.message.clone(),
                    usage: r.usage,
                    finish_reason: r.finish_reason.clone(),
                    text_chunks,
                });
            }
            Err(e) => record.error = Some(RecordedError::from(e)),
        }
        // The stream's consumer has its answer already; a cassette that cannot be written is
        // worth a loud warning, not a failed call.
        if let Err(e) = cassette.append(record) {
            tracing::warn!(error = %e, "the call was not recorded");
        }
    }
}
