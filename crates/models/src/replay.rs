//! Record any model's calls to JSONL and serve them back, so tests can run real-model
//! transcripts deterministically and offline.
//!
//! One line per call: `{"model": ModelInfo, "request": {...}, "response": {...}}` or, for a
//! failed call, `{"model": …, "request": …, "error": {"kind": "context_length_exceeded", …}}`.
//! Messages are stored in their OpenAI wire shape, so a cassette is readable and diffable.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use troupe_protocol::sync::lock;
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, FinishReason, ModelError,
    ModelInfo, ToolChoice, ToolDefinition, Usage, stream_response,
};

use super::observed_stream::{StreamObserver, observe};

/// Characters per streamed text delta of a replayed answer (about a token).
pub const REPLAY_CHUNK_CHARS: usize = 4;

/// Errors reading or writing a cassette.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file could not be opened, read or written.
    #[error("cassette {path}: {cause}")]
    Io {
        /// The cassette file's path.
        path: PathBuf,
        /// The open, read or write error.
        cause: std::io::Error,
    },
    /// A line is not a recorded call.
    #[error("cassette {path}, line {line}: {message}")]
    Parse {
        /// The cassette file's path.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// A request as recorded (the wire-visible parts of [`ChatRequest`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RecordedRequest {
    messages: Vec<Arc<ChatMessage>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolDefinition>,
    #[serde(default)]
    tool_choice: ToolChoice,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

impl From<&ChatRequest> for RecordedRequest {
    fn from(r: &ChatRequest) -> Self {
        RecordedRequest {
            messages: r.messages.clone(),
            tools: r.tools.clone(),
            tool_choice: r.tool_choice.clone(),
            temperature: r.temperature,
            max_tokens: r.max_tokens,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RecordedResponse {
    message: ChatMessage,
    usage: Usage,
    finish_reason: FinishReason,
}

/// A [`ModelError`] in a stable, serialisable form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RecordedError {
    kind: String,
    #[serde(default)]
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
}

impl From<&ModelError> for RecordedError {
    fn from(e: &ModelError) -> Self {
        let (kind, message, status) = match e {
            ModelError::Auth(m) => ("auth", m.clone(), None),
            ModelError::UnknownModel(m) => ("unknown_model", m.clone(), None),
            ModelError::ContextLengthExceeded(m) => ("context_length_exceeded", m.clone(), None),
            ModelError::RateLimited(m) => ("rate_limited", m.clone(), None),
            ModelError::Server { status, message } => ("server", message.clone(), Some(*status)),
            ModelError::BadRequest { status, message } => {
                ("bad_request", message.clone(), Some(*status))
            }
            ModelError::Timeout(s) => ("timeout", s.to_string(), None),
            ModelError::InvalidResponse(m) => ("invalid_response", m.clone(), None),
            ModelError::Transport(m) => ("transport", m.clone(), None),
            ModelError::Cancelled => ("cancelled", String::new(), None),
            ModelError::Unavailable(m) => ("unavailable", m.clone(), None),
            other => ("other", other.to_string(), None),
        };
        RecordedError {
            kind: kind.to_string(),
            message,
            status,
        }
    }
}

impl From<RecordedError> for ModelError {
    fn from(e: RecordedError) -> Self {
        let status = e.status.unwrap_or(0);
        match e.kind.as_str() {
            "auth" => ModelError::Auth(e.message),
            "unknown_model" => ModelError::UnknownModel(e.message),
            "context_length_exceeded" => ModelError::ContextLengthExceeded(e.message),
            "rate_limited" => ModelError::RateLimited(e.message),
            "server" => ModelError::Server {
                status,
                message: e.message,
            },
            "bad_request" => ModelError::BadRequest {
                status,
                message: e.message,
            },
            "timeout" => ModelError::Timeout(e.message.parse().unwrap_or(0)),
            "invalid_response" => ModelError::InvalidResponse(e.message),
            "transport" => ModelError::Transport(e.message),
            "cancelled" => ModelError::Cancelled,
            _ => ModelError::Unavailable(e.message),
        }
    }
}

/// One line of a cassette.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    model: ModelInfo,
    request: RecordedRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<RecordedResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<RecordedError>,
}

/// Wraps a model and appends every call (request and response or error) to a JSONL file.
///
/// The inner model's stream is passed on as it comes; the call is recorded when it ends, as the
/// response its deltas add up to (or its error). A call whose future or stream is dropped
/// before it ends is not recorded.
pub struct RecordingModel<M> {
    inner: M,
    cassette: Arc<Cassette>,
}

/// The file a [`RecordingModel`] appends to, shared with the streams it records.
struct Cassette {
    path: PathBuf,
    file: Mutex<File>,
}

impl<M: ChatModel> RecordingModel<M> {
    /// Record `inner`'s calls to `path`, truncating it.
    ///
    /// # Errors
    /// [`ReplayError::Io`] when the file cannot be created.
    pub fn create(inner: M, path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|source| ReplayError::Io {
            path: path.clone(),
            cause: source,
        })?;
        Ok(RecordingModel {
            inner,
            cassette: Arc::new(Cassette {
                path,
                file: Mutex::new(file),
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

impl Cassette {
    fn append(&self, record: &Record) -> Result<(), ModelError> {
        let mut line = serde_json::to_string(record)
            .map_err(|e| ModelError::Unavailable(format!("cannot encode a recorded call: {e}")))?;
        line.push('\n');
        let mut file = lock(&self.file);
        // One write per line, then flush: a crash leaves whole lines behind.
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| {
                ModelError::Unavailable(format!(
                    "cannot write cassette {}: {e}",
                    self.path.display()
                ))
            })
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for RecordingModel<M> {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let mut record = Record {
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
                };
                Ok(observe(stream, Box::new(recorder), tracing::Span::none()))
            }
            Err(e) => {
                record.error = Some(RecordedError::from(&e));
                self.cassette.append(&record)?;
                Err(e)
            }
        }
    }
}

/// Writes one call's record when its stream ends.
struct Recorder {
    cassette: Arc<Cassette>,
    record: Record,
}

impl StreamObserver for Recorder {
    fn finished(self: Box<Self>, outcome: &Result<ChatResponse, ModelError>) {
        let mut record = self.record;
        match outcome {
            Ok(r) => {
                record.response = Some(RecordedResponse {
                    message: r.message.clone(),
                    usage: r.usage,
                    finish_reason: r.finish_reason.clone(),
                });
            }
            Err(e) => record.error = Some(RecordedError::from(e)),
        }
        // The stream's consumer has its answer already; a cassette that cannot be written is
        // worth a loud warning, not a failed call.
        if let Err(e) = self.cassette.append(&record) {
            tracing::warn!(error = %e, "the call was not recorded");
        }
    }
}

/// Serves recorded calls back in order, checking that each request is the one recorded.
///
/// A request that differs from the recording fails with [`ModelError::BadRequest`] (status 0:
/// no server was involved) naming the first difference, e.g. `replay call 2:
/// messages[3] content differs: expected "…", got "…"`. The mismatched record is not consumed.
///
/// A recorded answer streams as a live one would: text in deltas of [`REPLAY_CHUNK_CHARS`]
/// characters, then its tool calls, usage and finish (a recorded error fails the call before
/// any delta). Keys of the recorded message that troupe does not interpret (`refusal`, …) are
/// not deltas and are not replayed.
#[derive(Debug)]
pub struct ReplayModel {
    info: ModelInfo,
    records: Mutex<VecDeque<Record>>,
    served: Mutex<usize>,
}

impl ReplayModel {
    /// Load a cassette written by [`RecordingModel`].
    ///
    /// # Errors
    /// [`ReplayError`] when the file cannot be read or a line is not a recorded call.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|source| ReplayError::Io {
            path: path.clone(),
            cause: source,
        })?;
        let mut records = VecDeque::new();
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| ReplayError::Io {
                path: path.clone(),
                cause: source,
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let record: Record = serde_json::from_str(&line).map_err(|e| ReplayError::Parse {
                path: path.clone(),
                line: i + 1,
                message: e.to_string(),
            })?;
            if record.response.is_none() && record.error.is_none() {
                return Err(ReplayError::Parse {
                    path,
                    line: i + 1,
                    message: "a recorded call needs a `response` or an `error`".to_string(),
                });
            }
            records.push_back(record);
        }
        let info = records.front().map_or_else(
            || ModelInfo {
                name: "replay".to_string(),
                context_window: 8192,
                supports_tools: true,
            },
            |r| r.model.clone(),
        );
        Ok(ReplayModel {
            info,
            records: Mutex::new(records),
            served: Mutex::new(0),
        })
    }

    /// Calls not yet served.
    pub fn remaining(&self) -> usize {
        lock(&self.records).len()
    }
}

#[async_trait]
impl ChatModel for ReplayModel {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let got = RecordedRequest::from(&request);
        let mut records = lock(&self.records);
        let mut served = lock(&self.served);
        let call = *served + 1;
        let Some(record) = records.front() else {
            return Err(ModelError::InvalidRequest(format!(
                "replay call {call}: the cassette has no more recorded calls"
            )));
        };
        if let Some(difference) = first_difference(&record.request, &got) {
            return Err(ModelError::InvalidRequest(format!(
                "replay call {call}: {difference}"
            )));
        }
        let Some(record) = records.pop_front() else {
            return Err(ModelError::Unavailable(
                "replay: cassette emptied concurrently".into(),
            ));
        };
        *served += 1;
        match (record.response, record.error) {
            (Some(r), _) => Ok(stream_response(
                ChatResponse {
                    message: r.message,
                    usage: r.usage,
                    finish_reason: r.finish_reason,
                },
                REPLAY_CHUNK_CHARS,
            )),
            (None, Some(e)) => Err(e.into()),
            (None, None) => Err(ModelError::Unavailable("replay: empty record".into())),
        }
    }
}

/// The first way `got` differs from `expected`, in words; `None` when they match.
fn first_difference(expected: &RecordedRequest, got: &RecordedRequest) -> Option<String> {
    for (i, (e, g)) in expected.messages.iter().zip(&got.messages).enumerate() {
        if let Some(d) = message_difference(e, g) {
            return Some(format!("messages[{i}] ({}) {d}", e.role));
        }
    }
    if expected.messages.len() != got.messages.len() {
        return Some(format!(
            "expected {} messages, got {}",
            expected.messages.len(),
            got.messages.len()
        ));
    }
    let names = |tools: &[ToolDefinition]| tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    if names(&expected.tools) != names(&got.tools) {
        return Some(format!(
            "tools differ: expected {:?}, got {:?}",
            names(&expected.tools),
            names(&got.tools)
        ));
    }
    for (e, g) in expected.tools.iter().zip(&got.tools) {
        if e != g {
            return Some(format!("tool `{}` definition differs", e.name));
        }
    }
    if expected.tool_choice != got.tool_choice {
        return Some(format!(
            "tool_choice differs: expected {:?}, got {:?}",
            expected.tool_choice, got.tool_choice
        ));
    }
    if expected.temperature != got.temperature {
        return Some(format!(
            "temperature differs: expected {:?}, got {:?}",
            expected.temperature, got.temperature
        ));
    }
    if expected.max_tokens != got.max_tokens {
        return Some(format!(
            "max_tokens differs: expected {:?}, got {:?}",
            expected.max_tokens, got.max_tokens
        ));
    }
    None
}

fn message_difference(expected: &ChatMessage, got: &ChatMessage) -> Option<String> {
    if expected.role != got.role {
        return Some(format!(
            "role differs: expected {}, got {}",
            expected.role, got.role
        ));
    }
    // Compare wire forms: that is what the model saw.
    let e = serde_json::to_value(expected).unwrap_or(Value::Null);
    let g = serde_json::to_value(got).unwrap_or(Value::Null);
    if e == g {
        return None;
    }
    if e.get("content") != g.get("content") {
        return Some(format!(
            "content differs: {}",
            text_difference(&expected.text(), &got.text())
        ));
    }
    for field in ["tool_calls", "tool_call_id"] {
        if e.get(field) != g.get(field) {
            return Some(format!(
                "{field} differs: expected {}, got {}",
                super::shorten(&e.get(field).map(Value::to_string).unwrap_or_default(), 200),
                super::shorten(&g.get(field).map(Value::to_string).unwrap_or_default(), 200),
            ));
        }
    }
    Some(format!(
        "differs: expected {}, got {}",
        super::shorten(&e.to_string(), 200),
        super::shorten(&g.to_string(), 200)
    ))
}

/// Both texts around their first differing character, so long messages give short errors.
fn text_difference(expected: &str, got: &str) -> String {
    let at = expected
        .char_indices()
        .zip(got.chars())
        .find(|((_, a), b)| a != b)
        .map_or_else(|| expected.len().min(got.len()), |((i, _), _)| i);
    let window = |s: &str| {
        let mut start = at.saturating_sub(30).min(s.len());
        while !s.is_char_boundary(start) {
            start -= 1;
        }
        let rest = &s[start..];
        let snippet: String = rest.chars().take(80).collect();
        let prefix = if start > 0 { "…" } else { "" };
        let suffix = if rest.chars().count() > 80 { "…" } else { "" };
        format!("{prefix}{snippet}{suffix}")
    };
    format!(
        "at byte {at}: expected {:?}, got {:?}",
        window(expected),
        window(got)
    )
}
