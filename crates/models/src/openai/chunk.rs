//! One streamed `chat.completion.chunk` → troupe's [`ModelDelta`]s.
//!
//! A chunk is read straight into the few fields troupe uses (no `serde_json::Value` tree: this
//! runs for every streamed piece of every answer), as leniently as the whole-answer parser
//! reads an answer: the envelope (`id`, `model`, `object`, `created`) may be missing, a finish
//! reason may be one no spec names (kept raw), a tool-call fragment without an `index` gets its
//! position in the chunk, and fields troupe does not read are not looked at. A tool call's start
//! is passed on once its name is known; argument fragments that come before that are held back
//! until then.

use std::collections::BTreeMap;

use async_openai::types::chat::CompletionUsage;
use serde::Deserialize;
use serde_json::Value;
use troupe_protocol::{ModelDelta, ModelError};

use super::super::shorten;
use super::super::sse_answer::{EventDecoder, StreamFault};
use super::wire::{finish_reason, usage_of};

/// The parts of a chunk troupe reads.
#[derive(Deserialize)]
struct Chunk {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<CompletionUsage>,
    /// An error object a server sends instead of a chunk.
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    index: u32,
    delta: Delta,
    /// Raw: servers invent reasons (`eos_token`), which [`finish_reason`] keeps.
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallFragment>>,
}

#[derive(Deserialize)]
struct CallFragment {
    /// Missing on servers that send every call whole: then its position in the chunk.
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionFragment>,
}

#[derive(Deserialize)]
struct FunctionFragment {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

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

fn invalid(what: String) -> StreamFault {
    StreamFault::Malformed(ModelError::InvalidResponse(what))
}

/// Why `data` is not a chunk, read again as plain JSON to say it precisely: not JSON, not an
/// object, an error object the server sent instead (an interruption: another attempt may fare
/// better), or a shape troupe cannot read (`shape`, the typed reader's complaint).
fn not_a_chunk(data: &str, shape: &serde_json::Error) -> StreamFault {
    let value: Value = match serde_json::from_str(data) {
        Ok(value) => value,
        Err(e) => {
            return invalid(format!(
                "a streamed chunk is not JSON ({e}): {}",
                shorten(data, 200)
            ));
        }
    };
    let Some(object) = value.as_object() else {
        return invalid(format!(
            "a streamed chunk is not a JSON object: {}",
            shorten(data, 200)
        ));
    };
    if let Some(error) = object.get("error") {
        return server_error(error);
    }
    invalid(format!(
        "unexpected chunk shape ({shape}): {}",
        shorten(data, 200)
    ))
}

/// The server failed, not the stream: another attempt may fare better.
fn server_error(error: &Value) -> StreamFault {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_string);
    StreamFault::Interrupted(ModelError::InvalidResponse(format!(
        "the server reported an error mid-stream: {}",
        shorten(&message, 500)
    )))
}

impl ChunkDecoder {
    /// Whether a chunk said why the model stopped.
    pub(super) fn finished(&self) -> bool {
        self.finished
    }

    /// The deltas in one chunk's JSON.
    ///
    /// # Errors
    /// [`StreamFault::Malformed`] when the chunk is not a chunk (not JSON, not an object, a
    /// shape troupe cannot read, a tool call that finished without a name);
    /// [`StreamFault::Interrupted`] for an error object the server sent instead (both as
    /// [`ModelError::InvalidResponse`]).
    pub(super) fn decode(&mut self, data: &str) -> Result<Vec<ModelDelta>, StreamFault> {
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| not_a_chunk(data, &e))?;
        if let Some(error) = &chunk.error {
            return Err(server_error(error));
        }
        let mut deltas = Vec::new();
        for choice in chunk.choices {
            // troupe asks for one answer (no `n`); other choices are not its.
            if choice.index != 0 {
                continue;
            }
            let delta = choice.delta;
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                deltas.push(ModelDelta::Text(text));
            }
            for (position, fragment) in delta.tool_calls.unwrap_or_default().into_iter().enumerate()
            {
                let index = fragment.index.map_or(position, |i| i as usize);
                self.take_fragment(index, fragment, &mut deltas);
            }
            if let Some(refusal) = delta.refusal.filter(|r| !r.is_empty()) {
                deltas.push(ModelDelta::MessageField {
                    key: "refusal".to_string(),
                    value: refusal.into(),
                });
            }
            if let Some(raw) = choice.finish_reason {
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

    /// One fragment of tool call `index`: its start once its name is known, then its
    /// arguments.
    fn take_fragment(
        &mut self,
        index: usize,
        fragment: CallFragment,
        deltas: &mut Vec<ModelDelta>,
    ) {
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
            return;
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

#[cfg(test)]
mod tests {
    use serde_json::json;
    use troupe_protocol::FinishReason;

    use super::*;

    fn started(index: usize, id: &str, name: &str) -> ModelDelta {
        ModelDelta::ToolCallStarted {
            index,
            id: id.into(),
            name: name.into(),
        }
    }

    fn arguments(index: usize, fragment: &str) -> ModelDelta {
        ModelDelta::ToolCallArguments {
            index,
            fragment: fragment.into(),
        }
    }

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
                started(0, "a", "f"),
                arguments(0, "{}"),
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
            vec![started(0, "a", "f"), arguments(0, "{\"x\":1}"),]
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

    #[test]
    fn a_chunk_of_another_shape_is_malformed_and_says_which_way() {
        for (data, says) in [
            ("[1, 2]", "not a JSON object"),
            (r#"{"choices": "many"}"#, "unexpected chunk shape"),
            (r#"{"choices": [{"delta": {}}]}"#, "unexpected chunk shape"),
            (
                r#"{"choices": [{"index": 0, "delta": {"content": 7}}]}"#,
                "unexpected chunk shape",
            ),
        ] {
            let error = ChunkDecoder::default().decode(data).err();
            assert!(
                matches!(&error, Some(StreamFault::Malformed(ModelError::InvalidResponse(m))) if m.contains(says)),
                "{data}: {error:?}"
            );
        }
        // What troupe does not read may be anything: the envelope, a role, a call's type.
        let mut decoder = ChunkDecoder::default();
        let deltas = decode(
            &mut decoder,
            json!({"id": 5, "object": null, "choices": [{"index": 0, "logprobs": {"x": 1},
                "delta": {"role": "narrator", "content": "hi"}}]}),
        );
        assert_eq!(deltas, vec![ModelDelta::Text("hi".into())]);
    }

    #[test]
    fn absurd_usage_numbers_are_a_malformed_chunk_not_a_wrapped_count() {
        for usage in [
            json!({"prompt_tokens": 1e30, "completion_tokens": 1, "total_tokens": 1}),
            json!({"prompt_tokens": -5, "completion_tokens": 1, "total_tokens": 1}),
            json!({"prompt_tokens": 4_294_967_296_u64, "completion_tokens": 1, "total_tokens": 1}),
        ] {
            let data = json!({"choices": [], "usage": usage}).to_string();
            let error = ChunkDecoder::default().decode(&data).err();
            assert!(
                matches!(&error, Some(StreamFault::Malformed(ModelError::InvalidResponse(m))) if m.contains("unexpected chunk shape")),
                "{data}: {error:?}"
            );
        }
    }

    #[test]
    fn a_call_started_twice_is_started_once_and_keeps_its_first_id_and_name() {
        let mut decoder = ChunkDecoder::default();
        let start = |id: &str, name: &str, arguments: &str| {
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": id, "function": {"name": name, "arguments": arguments}}]}}]})
        };
        let first = decode(&mut decoder, start("a", "f", "{\"x\""));
        let again = decode(&mut decoder, start("b", "rm_everything", ":1}"));
        assert_eq!(first, vec![started(0, "a", "f"), arguments(0, "{\"x\""),]);
        assert_eq!(again, vec![arguments(0, ":1}")]);
    }
}
