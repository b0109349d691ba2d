//! A model's answer as a stream of deltas ([`ChatStream`]), and the one place deltas become a
//! [`ChatResponse`] ([`ResponseAssembler`]).
//!
//! Every provider answers through [`ChatModel::chat_stream`](crate::ChatModel::chat_stream);
//! [`ChatModel::chat`](crate::ChatModel::chat) is [`collect_stream`] over it, so a streamed
//! answer and a whole one cannot disagree.

use std::collections::BTreeMap;
use std::pin::Pin;

use futures::{Stream, StreamExt};

use crate::message::{ChatMessage, ToolCall, WireFields, WireValue};
use crate::model::{ChatResponse, FinishReason, ModelError, Usage};

/// One piece of a model's answer as it is generated.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelDelta {
    /// Generated text (a whole UTF-8 string; never a split character).
    Text(String),
    /// A tool call began: its position among the answer's calls, id and function name.
    ToolCallStarted {
        /// The call's position among the answer's calls (OpenAI's `index`).
        index: usize,
        /// The call's id, which its tool result will answer.
        id: String,
        /// The function called.
        name: String,
    },
    /// More of the JSON arguments of the tool call at `index`.
    ToolCallArguments {
        /// The call these arguments belong to.
        index: usize,
        /// The next piece of its arguments' JSON text (not valid JSON on its own).
        fragment: String,
    },
    /// A field of the answer's message troupe does not interpret (`refusal`,
    /// `reasoning_content`, provider extensions), kept in its `extra`. A text value for a key
    /// that already has text is appended (streamed `refusal` and reasoning arrive in pieces);
    /// any other value replaces.
    MessageField {
        /// The field's key.
        key: String,
        /// Its value (or the next piece of its text), exactly as sent.
        value: WireValue,
    },
    /// Fields of the tool call at `index` troupe does not interpret — on the call (Gemini's
    /// `extra_content` with its thought signature, which must go back unchanged) and on its
    /// function — kept in their `extra`s; later values replace earlier ones.
    ToolCallFields {
        /// The call they belong to.
        index: usize,
        /// Fields of the call itself.
        call: WireFields,
        /// Fields of its `function`.
        function: WireFields,
    },
    /// Token usage of the call (OpenAI sends it in the last chunk).
    Usage(Usage),
    /// Why generation stopped.
    Finished(FinishReason),
}

/// A model's answer as a stream of deltas; ends after the last delta or at the first error.
///
/// Dropping it stops generation (the provider cancels its job or drops its connection).
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<ModelDelta, ModelError>> + Send>>;

/// A tool call being assembled from its deltas.
#[derive(Debug)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    call_fields: WireFields,
    function_fields: WireFields,
}

/// Builds the `ChatResponse` a stream adds up to: text concatenated, tool calls assembled by
/// index (in index order, whatever order their deltas came in), the usage and the finish
/// reason. The one place deltas become a response.
///
/// A delta that cannot belong to a well-formed answer — arguments of a call that never
/// started, a call started twice, text or calls after the finish, a second finish — is a
/// [`ModelError::InvalidResponse`] naming it, as is an answer that ends without a finish.
#[derive(Debug, Default)]
pub struct ResponseAssembler {
    text: String,
    fields: WireFields,
    calls: BTreeMap<usize, PartialCall>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

impl ResponseAssembler {
    /// An assembler that has seen nothing yet.
    pub fn new() -> Self {
        ResponseAssembler::default()
    }

    /// Add the next delta.
    ///
    /// # Errors
    /// [`ModelError::InvalidResponse`] when the delta cannot follow the ones before it.
    pub fn push(&mut self, delta: &ModelDelta) -> Result<(), ModelError> {
        let invalid = |what: String| Err(ModelError::InvalidResponse(what));
        if self.finish.is_some() && !matches!(delta, ModelDelta::Usage(_)) {
            return invalid(format!(
                "the stream went on after the model finished: {}",
                describe(delta)
            ));
        }
        match delta {
            ModelDelta::Text(text) => self.text.push_str(text),
            ModelDelta::ToolCallStarted { index, id, name } => {
                if self.calls.contains_key(index) {
                    return invalid(format!("tool call {index} started twice"));
                }
                self.calls.insert(
                    *index,
                    PartialCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: String::new(),
                        call_fields: WireFields::new(),
                        function_fields: WireFields::new(),
                    },
                );
            }
            ModelDelta::ToolCallArguments { index, fragment } => {
                let Some(call) = self.calls.get_mut(index) else {
                    return invalid(format!(
                        "arguments for tool call {index}, which has not started"
                    ));
                };
                call.arguments.push_str(fragment);
            }
            ModelDelta::MessageField { key, value } => {
                let joined = match (self.fields.get(key).and_then(WireValue::as_str), value) {
                    (Some(before), WireValue::String(more)) => {
                        Some(WireValue::String(format!("{before}{more}")))
                    }
                    _ => None,
                };
                self.fields
                    .insert(key.clone(), joined.unwrap_or_else(|| value.clone()));
            }
            ModelDelta::ToolCallFields {
                index,
                call,
                function,
            } => {
                let Some(partial) = self.calls.get_mut(index) else {
                    return invalid(format!(
                        "fields for tool call {index}, which has not started"
                    ));
                };
                for (key, value) in call.iter() {
                    partial.call_fields.insert(key, value.clone());
                }
                for (key, value) in function.iter() {
                    partial.function_fields.insert(key, value.clone());
                }
            }
            ModelDelta::Usage(usage) => self.usage = Some(*usage),
            ModelDelta::Finished(reason) => self.finish = Some(reason.clone()),
        }
        Ok(())
    }

    /// The response the deltas add up to. A `stop` finish with tool calls reads as
    /// [`FinishReason::ToolCalls`] (some servers say `stop` after calls); text next to tool
    /// calls is kept as the message's content, and no text is `null` content.
    ///
    /// # Errors
    /// [`ModelError::InvalidResponse`] when no [`ModelDelta::Finished`] came.
    pub fn finish(self) -> Result<ChatResponse, ModelError> {
        let Some(reason) = self.finish else {
            return Err(ModelError::InvalidResponse(
                "the stream ended before the model said why it stopped (no finish reason)"
                    .to_string(),
            ));
        };
        let mut calls: Vec<ToolCall> = self
            .calls
            .into_values()
            .map(|c| {
                let mut call = ToolCall::new(c.id, c.name, c.arguments);
                call.extra = c.call_fields;
                call.function.extra = c.function_fields;
                call
            })
            .collect();
        unique_call_ids(&mut calls);
        let (message, finish_reason) = if calls.is_empty() {
            (ChatMessage::assistant(self.text), reason)
        } else {
            let content = (!self.text.is_empty()).then_some(self.text);
            let reason = match reason {
                FinishReason::Stop => FinishReason::ToolCalls,
                other => other,
            };
            (ChatMessage::assistant_tool_calls(content, calls), reason)
        };
        let mut message = message;
        message.extra = self.fields;
        Ok(ChatResponse {
            message,
            usage: self.usage.unwrap_or_default(),
            finish_reason,
        })
    }
}

/// Give every call of one answer an id of its own: an empty id becomes `call_N` (N its
/// position), a repeated one `ID_2`, `ID_3`, … (the first keeps it). Tool results, approvals and
/// the session log find a call by its id; two calls under one id would let an answer given
/// about one run the other, and their results reach the wrong calls.
fn unique_call_ids(calls: &mut [ToolCall]) {
    let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
    let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
    for (index, call) in calls.iter_mut().enumerate() {
        let wanted = if call.id.is_empty() {
            format!("call_{index}")
        } else {
            call.id.clone()
        };
        let mut id = wanted.clone();
        let mut n = 2;
        // Not one taken already, nor one a later call of the answer holds as its own.
        while taken.contains(&id) || (id != call.id && ids.contains(&id)) {
            id = format!("{wanted}_{n}");
            n += 1;
        }
        taken.insert(id.clone());
        call.id = id;
    }
}

/// A delta in a few words, for error messages (text is not quoted: it may be long).
fn describe(delta: &ModelDelta) -> String {
    match delta {
        ModelDelta::Text(text) => format!("{} characters of text", text.chars().count()),
        ModelDelta::ToolCallStarted { index, name, .. } => {
            format!("tool call {index} (`{name}`) started")
        }
        ModelDelta::ToolCallArguments { index, .. } => format!("arguments for tool call {index}"),
        ModelDelta::MessageField { key, .. } => format!("the message field `{key}`"),
        ModelDelta::ToolCallFields { index, .. } => format!("fields of tool call {index}"),
        ModelDelta::Usage(_) => "usage".to_string(),
        ModelDelta::Finished(_) => "a second finish".to_string(),
    }
}

/// Collect a stream into its response.
///
/// # Errors
/// The stream's first error, or the assembler's (see [`ResponseAssembler`]).
pub async fn collect_stream(mut stream: ChatStream) -> Result<ChatResponse, ModelError> {
    let mut assembler = ResponseAssembler::new();
    while let Some(delta) = stream.next().await {
        assembler.push(&delta?)?;
    }
    assembler.finish()
}

/// The deltas of a whole response, in the order a provider would stream them: text cut into
/// chunks of about `chunk_chars` characters (on char boundaries; at least one per chunk), then
/// each tool call's start and its arguments in chunks, then the usage and the finish.
///
/// Collected again, the deltas give back the same response for every response a provider
/// produces, fields troupe does not interpret (the message's, each call's and its function's
/// `extra`) included.
pub fn response_deltas(response: ChatResponse, chunk_chars: usize) -> Vec<ModelDelta> {
    let chunk_chars = chunk_chars.max(1);
    let mut deltas: Vec<ModelDelta> = chunks(&response.message.text(), chunk_chars)
        .map(ModelDelta::Text)
        .collect();
    for (index, call) in response.message.calls().iter().enumerate() {
        deltas.push(ModelDelta::ToolCallStarted {
            index,
            id: call.id.clone(),
            name: call.function.name.clone(),
        });
        deltas.extend(
            chunks(&call.function.arguments, chunk_chars)
                .map(|fragment| ModelDelta::ToolCallArguments { index, fragment }),
        );
        if !call.extra.is_empty() || !call.function.extra.is_empty() {
            deltas.push(ModelDelta::ToolCallFields {
                index,
                call: call.extra.clone(),
                function: call.function.extra.clone(),
            });
        }
    }
    deltas.extend(
        response
            .message
            .extra
            .iter()
            .map(|(key, value)| ModelDelta::MessageField {
                key: key.to_string(),
                value: value.clone(),
            }),
    );
    deltas.push(ModelDelta::Usage(response.usage));
    deltas.push(ModelDelta::Finished(response.finish_reason));
    deltas
}

/// A response as a stream (for models that have the whole answer at once), text cut into
/// chunks of about `chunk_chars` characters on char boundaries (see [`response_deltas`]).
pub fn stream_response(response: ChatResponse, chunk_chars: usize) -> ChatStream {
    let deltas = response_deltas(response, chunk_chars);
    Box::pin(futures::stream::iter(deltas.into_iter().map(Ok)))
}

/// `text` in pieces of `size` characters (the last may be shorter); nothing for empty text.
fn chunks(text: &str, size: usize) -> impl Iterator<Item = String> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.char_indices().nth(size).map_or(rest.len(), |(i, _)| i);
        let (head, tail) = rest.split_at(end);
        rest = tail;
        Some(head.to_string())
    })
}

#[cfg(test)]
mod tests;
