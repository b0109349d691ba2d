//! A cassette on disk: a header line, then one JSON line per recorded call.
//!
//! ```text
//! {"cassette":2,"model":{"name":"gpt-4o-mini","context_window":128000,"supports_tools":true}}
//! {"agent":"coder","call":1,"model":{…},"request":{…},"response":{…,"text_chunks":[4,4,2]}}
//! {"agent":"compressor","call":1,"model":{…},"request":{…},"error":{"kind":"timeout",…}}
//! ```
//!
//! `agent` is who asked (the request's [`ChatRequest::agent`]) and `call` its 1-based count of
//! calls on this cassette: agents that share a model call it concurrently, so a cassette is
//! read as one queue per asker, never in the order of its lines. A file with no header is the
//! first format (version 1: no `agent`, no `call`, one queue) and still loads.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use troupe_protocol::{
    ChatMessage, ChatRequest, FinishReason, ModelError, ModelInfo, ToolChoice, ToolDefinition,
    Usage,
};

use super::ReplayError;

/// The format this troupe writes, and the newest it reads.
pub const CASSETTE_VERSION: u32 = 2;

/// The first line of a cassette.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Header {
    /// The format's version ([`CASSETTE_VERSION`] when written by this troupe).
    pub(super) cassette: u32,
    /// The recorded model, so a replay reports the same window even before its first call.
    pub(super) model: ModelInfo,
}

/// A request as recorded (the wire-visible parts of [`ChatRequest`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct RecordedRequest {
    pub(super) messages: Vec<Arc<ChatMessage>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<ToolDefinition>,
    #[serde(default)]
    pub(super) tool_choice: ToolChoice,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
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
pub(super) struct RecordedResponse {
    pub(super) message: ChatMessage,
    pub(super) usage: Usage,
    pub(super) finish_reason: FinishReason,
    /// The characters of each text delta as the model streamed them, so a replay streams the
    /// same deltas (and its run publishes the same `model_delta` events). Empty: no text, or
    /// the first format (a replay then cuts [`super::REPLAY_CHUNK_CHARS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) text_chunks: Vec<usize>,
}

/// A [`ModelError`] in a stable, serialisable form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct RecordedError {
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

/// One recorded call: a line of a cassette after its header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Record {
    /// Who asked; `None` for a request that named no agent (and in the first format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) agent: Option<String>,
    /// The asker's 1-based count of calls on this cassette (absent in the first format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) call: Option<usize>,
    pub(super) model: ModelInfo,
    pub(super) request: RecordedRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) response: Option<RecordedResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<RecordedError>,
}

/// A cassette read back: its model and one queue of recorded calls per asker.
#[derive(Debug)]
pub(super) struct Loaded {
    pub(super) model: Option<ModelInfo>,
    pub(super) lanes: HashMap<Option<String>, VecDeque<Record>>,
}

/// Read a whole cassette, checking its version and that each asker's calls are numbered 1, 2, …
/// in order. Nothing is written: a cassette that does not load is left as it was.
pub(super) fn load(path: &Path) -> Result<Loaded, ReplayError> {
    let file = File::open(path).map_err(|cause| ReplayError::Io {
        path: path.to_path_buf(),
        cause,
    })?;
    let parse = |line: usize, message: String| ReplayError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut loaded = Loaded {
        model: None,
        lanes: HashMap::new(),
    };
    let mut seen_record = false;
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let number = i + 1;
        let line = line.map_err(|cause| ReplayError::Io {
            path: path.to_path_buf(),
            cause,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line).map_err(|e| parse(number, e.to_string()))?;
        if let Some(version) = value.get("cassette") {
            if seen_record || loaded.model.is_some() {
                return Err(parse(number, "a header after the first line".into()));
            }
            let found = version.as_u64().unwrap_or(0);
            if found != u64::from(CASSETTE_VERSION) {
                return Err(ReplayError::Version {
                    path: path.to_path_buf(),
                    found: version.to_string(),
                    supported: CASSETTE_VERSION,
                });
            }
            let header: Header =
                serde_json::from_value(value).map_err(|e| parse(number, e.to_string()))?;
            loaded.model = Some(header.model);
            continue;
        }
        let record: Record =
            serde_json::from_value(value).map_err(|e| parse(number, e.to_string()))?;
        if record.response.is_none() && record.error.is_none() {
            return Err(parse(
                number,
                "a recorded call needs a `response` or an `error`".into(),
            ));
        }
        let lane = loaded.lanes.entry(record.agent.clone()).or_default();
        if let Some(call) = record.call
            && call != lane.len() + 1
        {
            return Err(parse(
                number,
                format!(
                    "{} call {call} follows call {}: the cassette lost or reordered a line",
                    asker(record.agent.as_deref()),
                    lane.len()
                ),
            ));
        }
        seen_record = true;
        lane.push_back(record);
    }
    Ok(loaded)
}

/// `agent \`coder\`` or `the unnamed asker`, for messages.
pub(super) fn asker(agent: Option<&str>) -> String {
    match agent {
        Some(name) => format!("agent `{name}`"),
        None => "the unnamed asker".to_string(),
    }
}

/// The file of `agent`'s cassette in `dir`: its name, with any character that is not safe in a
/// file name (`/`, `:`, a leading `.`, …) written as `%XX`, so no name escapes `dir`.
pub(super) fn cassette_path(dir: &Path, agent: &str) -> PathBuf {
    let mut file = String::new();
    for (i, byte) in agent.bytes().enumerate() {
        let safe =
            byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_') || (byte == b'.' && i > 0);
        if safe {
            file.push(char::from(byte));
        } else {
            file.push_str(&format!("%{byte:02X}"));
        }
    }
    dir.join(format!("{file}.jsonl"))
}
