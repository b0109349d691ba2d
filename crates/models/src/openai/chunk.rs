//! One streamed `chat.completion.chunk` → troupe's [`ModelDelta`]s.
//!
//! Chunks are parsed into async-openai's `CreateChatCompletionStreamResponse` after the same
//! leniency the whole-answer parser applies (missing envelope fields filled in, unknown finish
//! reasons kept raw), plus one of its own: a tool-call fragment without an `index` gets its
//! position in the chunk. A tool call's start is passed on once its name is known; argument
//! fragments that come before that are held back until then.

use std::collections::BTreeMap;

use async_openai::types::chat::CreateChatCompletionStreamResponse;
use serde_json::Value;
use troupe_protocol::{ModelDelta, ModelError};

use super::super::shorten;
use super::super::sse_answer::{EventDecoder, StreamFault};
use super::wire::{fill_envelope, finish_reason, take_finish_reasons, usage_of};

/// A tool call of the answer, as far as its fragments have come.
#[derive(Debug, Default)]
struct CallState {
    id: Option<String>,
    name: String,
    /// Whether [`ModelDelta::ToolCallStarted`] went out.
    started: bool,
    /// Arguments that arrived before the name.
    held_back: String,
}

/// Decodes the chunks of one answer, in order.
#[derive(Debug, Default)]
pub(super) struct ChunkDecoder {
    calls: BTreeMap<usize, CallState>,
    finished: bool,
}

impl ChunkDecoder {
    /// Whether a chunk said why the model stopped.
    pub(super) fn finished(&self) -> bool {
        self.finished
    }

    /// The deltas in one chunk's JSON.
    ///
    /// # Errors
    /// [`StreamFault::Malformed`] when the chunk is not a chunk (not JSON, a shape
    /// async-openai rejects even after the leniency, a tool call that finished without a
    /// name); [`StreamFault::Interrupted`] for an error object the server sent instead (both
    /// as [`ModelError::InvalidResponse`]).
    pub(super) fn decode(&mut self, data: &str) -> Result<Vec<ModelDelta>, StreamFault> {
        let invalid = |what: String| StreamFault::Malformed(ModelError::InvalidResponse(what));
        let mut value: Value = serde_json::from_str(data).map_err(|e| {
            invalid(format!(
                "a streamed chunk is not JSON ({e}): {}",
                shorten(data, 200)
            ))
        })?;
        let Some(object) = value.as_object_mut() else {
            return Err(invalid(format!(
                "a streamed chunk is not a JSON object: {}",
                shorten(data, 200)
            )));
        };
        if let Some(error) = object.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_string);
            // The server failed, not the stream: another attempt may fare better.
            return Err(StreamFault::Interrupted(ModelError::InvalidResponse(
                format!(
                    "the server reported an error mid-stream: {}",
                    shorten(&message, 500)
                ),
            )));
        }
        fill_envelope(object, "chat.completion.chunk");
        let raw_finishes = take_finish_reasons(object);
        number_tool_call_fragments(object);
        let chunk: CreateChatCompletionStreamResponse =
            serde_json::from_value(value).map_err(|e| {
                invalid(format!(
                    "unexpected chunk shape ({e}): {}",
                    shorten(data, 200)
                ))
            })?;
        let mut deltas = Vec::new();
        for (choice, raw_finish) in chunk.choices.into_iter().zip(raw_finishes) {
            // troupe asks for one answer (no `n`); other choices are not its.
            if choice.index != 0 {
                continue;
            }
            let delta = choice.delta;
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                deltas.push(ModelDelta::Text(text));
            }
            for fragment in delta.tool_calls.unwrap_or_default() {
                let index = fragment.index as usize;
                let call = self.calls.entry(index).or_default();
                if !call.started
                    && let Some(id) = fragment.id.filter(|id| !id.is_empty())
                {
                    call.id = Some(id);
                }
                let (name, arguments) = fragment
                    .function
                    .map_or((None, None), |f| (f.name, f.arguments));
                if !call.started
                    && let Some(name) = name.filter(|n| !n.is_empty())
                {
                    call.name = name;
                }
                let arguments = arguments.unwrap_or_default();
                if call.started {
                    if !arguments.is_empty() {
                        deltas.push(ModelDelta::ToolCallArguments {
                            index,
                            fragment: arguments,
                        });
                    }
                    continue;
                }
                call.held_back.push_str(&arguments);
                if !call.name.is_empty() {
                    call.started = true;
                    deltas.push(ModelDelta::ToolCallStarted {
                        index,
                        id: call.id.clone().unwrap_or_else(|| format!("call_{index}")),
                        name: call.name.clone(),
                    });
                    let held_back = std::mem::take(&mut call.held_back);
                    if !held_back.is_empty() {
                        deltas.push(ModelDelta::ToolCallArguments {
                            index,
                            fragment: held_back,
                        });
                    }
                }
            }
            if let Some(refusal) = delta.refusal.as_deref().filter(|r| !r.is_empty()) {
                deltas.push(ModelDelta::MessageField {
                    key: "refusal".to_string(),
                    value: refusal.into(),
                });
            }
            if let Some(raw) = raw_finish {
                if let Some((index, _)) = self.calls.iter().find(|(_, c)| !c.started) {
                    return Err(invalid(format!(
                        "tool call {index} finished without a function name"
                    )));
                }
                self.finished = true;
                deltas.push(ModelDelta::Finished(finish_reason(
                    Some(&raw),
                    !self.calls.is_empty(),
                )));
            }
        }
        if let Some(usage) = chunk.usage {
            deltas.push(ModelDelta::Usage(usage_of(&usage)));
        }
        Ok(deltas)
    }
}

impl EventDecoder for ChunkDecoder {
    fn decode(&mut self, data: &str) -> Result<Vec<ModelDelta>, StreamFault> {
        ChunkDecoder::decode(self, data)
    }

    fn finished(&self) -> bool {
        ChunkDecoder::finished(self)
    }

    /// The arguments of calls whose name has not come yet.
    fn held_back(&self) -> usize {
        self.calls.values().map(|call| call.held_back.len()).sum()
    }
}

/// Give tool-call fragments without an `index` their position in the chunk (some servers send
/// every call whole, unnumbered).
fn number_tool_call_fragments(object: &mut serde_json::Map<String, Value>) {
    let Some(choices) = object.get_mut("choices").and_then(Value::as_array_mut) else {
        return;
    };
    for choice in choices {
        let Some(calls) = choice
            .get_mut("delta")
            .and_then(|d| d.get_mut("tool_calls"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for (position, call) in calls.iter_mut().enumerate() {
            if let Some(call) = call.as_object_mut() {
                call.entry("index").or_insert_with(|| Value::from(position));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use troupe_protocol::FinishReason;

    use super::*;

    fn decode(decoder: &mut ChunkDecoder, chunk: Value) -> Vec<ModelDelta> {
        decoder.decode(&chunk.to_string()).unwrap()
    }

    #[test]
    fn a_loose_chunk_with_an_unknown_finish_reason_and_unnumbered_calls_parses() {
        let mut decoder = ChunkDecoder::default();
        let deltas = decode(
            &mut decoder,
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]}, "finish_reason": "eos_token"}]}),
        );
        assert_eq!(
            deltas,
            vec![
                ModelDelta::ToolCallStarted {
                    index: 0,
                    id: "a".into(),
                    name: "f".into()
                },
                ModelDelta::ToolCallArguments {
                    index: 0,
                    fragment: "{}".into()
                },
                ModelDelta::Finished(FinishReason::Other("eos_token".into())),
            ]
        );
        assert!(decoder.finished());
    }

    #[test]
    fn arguments_before_the_name_wait_for_it_and_a_nameless_call_cannot_finish() {
        let mut decoder = ChunkDecoder::default();
        let first = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "a", "function": {"arguments": "{\"x\""}}]}}]});
        assert_eq!(decode(&mut decoder, first.clone()), vec![]);
        let named = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"name": "f", "arguments": ":1}"}}]}}]});
        assert_eq!(
            decode(&mut decoder, named),
            vec![
                ModelDelta::ToolCallStarted {
                    index: 0,
                    id: "a".into(),
                    name: "f".into()
                },
                ModelDelta::ToolCallArguments {
                    index: 0,
                    fragment: "{\"x\":1}".into()
                },
            ]
        );
        // What waits for the name counts against the answer's cap meanwhile.
        let mut waiting = ChunkDecoder::default();
        decode(&mut waiting, first.clone());
        assert_eq!(EventDecoder::held_back(&waiting), "{\"x\"".len());
        let mut nameless = ChunkDecoder::default();
        decode(&mut nameless, first);
        let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
        let error = nameless.decode(&finish.to_string()).err();
        assert!(
            matches!(&error, Some(StreamFault::Malformed(ModelError::InvalidResponse(m))) if m.contains("without a function name")),
            "{error:?}"
        );
    }

    #[test]
    fn an_error_object_mid_stream_is_an_interruption_naming_it() {
        let error = ChunkDecoder::default()
            .decode(r#"{"error": {"message": "overloaded", "type": "server_error"}}"#)
            .err();
        assert!(
            matches!(&error, Some(StreamFault::Interrupted(ModelError::InvalidResponse(m))) if m.contains("overloaded")),
            "{error:?}"
        );
        let not_json = ChunkDecoder::default().decode("{\"choi").err();
        assert!(
            matches!(&not_json, Some(StreamFault::Malformed(ModelError::InvalidResponse(m))) if m.contains("not JSON")),
            "{not_json:?}"
        );
    }
}
