//! A deterministic model for tests and demos: it answers from a script, in order.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use troupe_protocol::sync::lock;
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, FinishReason, ModelError,
    ModelInfo, ToolCall, Usage, stream_response,
};

/// Characters per streamed text delta: about a token, so a scripted answer of a few words
/// arrives as several deltas, as a real model's would.
pub const SCRIPTED_CHUNK_CHARS: usize = 4;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptedReply {
    /// A final text answer.
    Text(String),
    /// Tool calls: `(tool name, JSON arguments)`; ids are generated `call_<n>`.
    ToolCalls(Vec<(String, String)>),
    /// A provider error.
    Error(ModelError),
}

impl ScriptedReply {
    /// A final answer.
    pub fn text(t: impl Into<String>) -> Self {
        ScriptedReply::Text(t.into())
    }

    /// One tool call.
    pub fn call(name: impl Into<String>, arguments: impl Into<String>) -> Self {
        ScriptedReply::ToolCalls(vec![(name.into(), arguments.into())])
    }
}

/// A model that plays back a fixed script, then repeats a fallback answer (or errors).
///
/// Answers stream in deltas of [`SCRIPTED_CHUNK_CHARS`] characters; an error reply fails the
/// call before any delta.
///
/// It records every request it received so tests can assert what the agent sent.
///
/// ```
/// use troupe_models::{ScriptedModel, ScriptedReply};
/// let model = ScriptedModel::new("demo", [
///     ScriptedReply::call("add", r#"{"a": 1, "b": 2}"#),
///     ScriptedReply::text("1 + 2 = 3"),
/// ]);
/// ```
#[derive(Debug)]
pub struct ScriptedModel {
    name: String,
    context_window: usize,
    script: Mutex<VecDeque<ScriptedReply>>,
    fallback: Option<String>,
    requests: Mutex<Vec<ChatRequest>>,
    next_call: Mutex<u64>,
}

impl ScriptedModel {
    /// A model named `name` that plays `script` and then fails with "script exhausted".
    pub fn new(name: impl Into<String>, script: impl IntoIterator<Item = ScriptedReply>) -> Self {
        ScriptedModel {
            name: name.into(),
            context_window: 32_768,
            script: Mutex::new(script.into_iter().collect()),
            fallback: None,
            requests: Mutex::new(Vec::new()),
            next_call: Mutex::new(1),
        }
    }

    /// After the script, answer every request with `text`.
    pub fn with_fallback(mut self, text: impl Into<String>) -> Self {
        self.fallback = Some(text.into());
        self
    }

    /// Report this context window.
    pub fn with_context_window(mut self, tokens: usize) -> Self {
        self.context_window = tokens;
        self
    }

    /// Append replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = ScriptedReply>) {
        lock(&self.script).extend(replies);
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.requests).clone()
    }

    /// Replies left in the script.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }
}

/// Rough token estimate for usage reporting (4 characters per token).
fn estimate_tokens(text: &str) -> u64 {
    text.len().div_ceil(4) as u64
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: self.name.clone(),
            context_window: self.context_window,
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let response = self.answer(request)?;
        Ok(stream_response(response, SCRIPTED_CHUNK_CHARS))
    }
}

impl ScriptedModel {
    /// The next scripted answer to `request`, whole.
    fn answer(&self, request: ChatRequest) -> Result<ChatResponse, ModelError> {
        let input_tokens = request
            .messages
            .iter()
            .map(|m| estimate_tokens(&m.text()))
            .sum();
        lock(&self.requests).push(request);
        let next = lock(&self.script).pop_front();
        let reply = match (next, &self.fallback) {
            (Some(reply), _) => reply,
            (None, Some(text)) => ScriptedReply::Text(text.clone()),
            (None, None) => {
                return Err(ModelError::Unavailable(format!(
                    "scripted model `{}`: script exhausted",
                    self.name
                )));
            }
        };
        match reply {
            ScriptedReply::Text(text) => Ok(ChatResponse {
                usage: Usage {
                    input_tokens,
                    output_tokens: estimate_tokens(&text),
                    ..Default::default()
                },
                message: ChatMessage::assistant(text),
                finish_reason: FinishReason::Stop,
            }),
            ScriptedReply::ToolCalls(calls) => {
                let mut n = lock(&self.next_call);
                let calls: Vec<ToolCall> = calls
                    .into_iter()
                    .map(|(name, args)| {
                        let call = ToolCall::new(format!("call_{}", *n), name, args);
                        *n += 1;
                        call
                    })
                    .collect();
                let output_tokens = calls
                    .iter()
                    .map(|c| estimate_tokens(&c.function.arguments))
                    .sum();
                Ok(ChatResponse {
                    message: ChatMessage::assistant_tool_calls(None, calls),
                    usage: Usage {
                        input_tokens,
                        output_tokens,
                        ..Default::default()
                    },
                    finish_reason: FinishReason::ToolCalls,
                })
            }
            ScriptedReply::Error(e) => Err(e),
        }
    }
}
