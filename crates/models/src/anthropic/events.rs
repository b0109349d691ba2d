//! One streamed Messages event → troupe's [`ModelDelta`]s.
//!
//! The stream is `message_start` (the input usage), then per content block
//! `content_block_start` / `content_block_delta`* / `content_block_stop` (`text_delta` for
//! text, `input_json_delta` for a tool call's arguments), then `message_delta` (the
//! `stop_reason` and the output usage) and `message_stop`; `ping`s anywhere, and an `error`
//! event instead of the rest when the server fails mid-answer. Event types troupe does not know
//! are skipped (Anthropic may add some); so are blocks other than text and tool use (thinking).
//!
//! A typed ask's answer arrives as the input of its answer tool (see `wire::AnswerTool`): that
//! block is collected and handed on as the answer's text when it ends (unwrapped from `value`
//! when the schema was wrapped), and is not a tool call.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use troupe_protocol::{ModelDelta, ModelError};

use super::super::shorten;
use super::super::sse_answer::{EventDecoder, StreamFault};
use super::errors::{ApiError, error_of};
use super::wire::{AnswerTool, WRAPPED_KEY, WireUsage, finish_reason};

/// The events troupe reads; any other `type` is [`Event::Other`].
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: ApiError,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct StartedMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// A `tool_use` block being streamed.
#[derive(Debug)]
struct ToolBlock {
    /// Its position among the answer's calls (troupe's call index).
    call: usize,
    /// The `input` its start carried, sent when no `input_json_delta` follows.
    initial_input: String,
    /// Whether an argument fragment went out.
    got_arguments: bool,
}

/// Decodes the events of one answer, in order.
#[derive(Debug)]
pub(super) struct EventsDecoder {
    model: String,
    /// Tool-use blocks by content-block index.
    tools: BTreeMap<usize, ToolBlock>,
    /// A typed ask's answer tool, and its block's index and input so far once it started.
    answer_tool: Option<AnswerTool>,
    answer: Option<(usize, String)>,
    usage: WireUsage,
    finished: bool,
}

impl EventsDecoder {
    pub(super) fn new(model: &str, answer_tool: Option<AnswerTool>) -> Self {
        EventsDecoder {
            model: model.to_string(),
            tools: BTreeMap::new(),
            answer_tool,
            answer: None,
            usage: WireUsage::default(),
            finished: false,
        }
    }

    /// The answer tool's collected input as the answer's text.
    fn answer_text(&self, input: String) -> Result<Vec<ModelDelta>, ModelError> {
        let wrapped = self.answer_tool.as_ref().is_some_and(|a| a.wrapped);
        let text = if wrapped {
            let value: Value = serde_json::from_str(&input).map_err(|e| {
                ModelError::InvalidResponse(format!(
                    "the answer tool's input is not JSON ({e}): {}",
                    shorten(&input, 200)
                ))
            })?;
            value
                .get(WRAPPED_KEY)
                .map(Value::to_string)
                .ok_or_else(|| {
                    ModelError::InvalidResponse(format!(
                        "the answer tool's input has no `{WRAPPED_KEY}`: {}",
                        shorten(&input, 200)
                    ))
                })?
        } else {
            input
        };
        Ok(vec![ModelDelta::Text(text)])
    }

    fn block_start(&mut self, index: usize, block: &Value) -> Result<Vec<ModelDelta>, ModelError> {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => Ok(block
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(|t| ModelDelta::Text(t.to_string()))
                .into_iter()
                .collect()),
            Some("tool_use") => {
                let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
                let (id, name) = (field("id"), field("name"));
                if self.answer_tool.as_ref().is_some_and(|a| a.name == name) {
                    let input = match block.get("input") {
                        Some(Value::Object(o)) if !o.is_empty() => {
                            Value::Object(o.clone()).to_string()
                        }
                        _ => String::new(),
                    };
                    self.answer = Some((index, input));
                    return Ok(Vec::new());
                }
                if name.is_empty() {
                    return Err(ModelError::InvalidResponse(format!(
                        "a tool_use block without a name: {}",
                        shorten(&block.to_string(), 200)
                    )));
                }
                let call = self.tools.len();
                let initial_input = match block.get("input") {
                    Some(Value::Object(o)) if !o.is_empty() => Value::Object(o.clone()).to_string(),
                    _ => "{}".to_string(),
                };
                self.tools.insert(
                    index,
                    ToolBlock {
                        call,
                        initial_input,
                        got_arguments: false,
                    },
                );
                let id = if id.is_empty() {
                    format!("call_{call}")
                } else {
                    id.to_string()
                };
                Ok(vec![ModelDelta::ToolCallStarted {
                    index: call,
                    id,
                    name: name.to_string(),
                }])
            }
            _ => Ok(Vec::new()),
        }
    }
}

impl EventDecoder for EventsDecoder {
    /// Every failure is the stream's being malformed but an `error` event: the server failing
    /// mid-answer, which another attempt may not meet.
    fn decode(&mut self, data: &str) -> Result<Vec<ModelDelta>, StreamFault> {
        let event: Event = serde_json::from_str(data).map_err(|e| {
            StreamFault::malformed(format!(
                "a streamed event is not a Messages event ({e}): {}",
                shorten(data, 200)
            ))
        })?;
        match event {
            Event::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.usage = self.usage.updated(usage);
                }
                Ok(Vec::new())
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self
                .block_start(index, &content_block)
                .map_err(StreamFault::Malformed),
            Event::ContentBlockDelta { index, delta } => Ok(match delta {
                BlockDelta::TextDelta { text } if !text.is_empty() => vec![ModelDelta::Text(text)],
                BlockDelta::InputJsonDelta { partial_json }
                    if self.answer.as_ref().is_some_and(|(i, _)| *i == index) =>
                {
                    if let Some((_, input)) = self.answer.as_mut() {
                        input.push_str(&partial_json);
                    }
                    Vec::new()
                }
                BlockDelta::InputJsonDelta { partial_json } if !partial_json.is_empty() => {
                    let Some(tool) = self.tools.get_mut(&index) else {
                        return Err(StreamFault::malformed(format!(
                            "input_json_delta for block {index}, which is not a tool_use block"
                        )));
                    };
                    tool.got_arguments = true;
                    vec![ModelDelta::ToolCallArguments {
                        index: tool.call,
                        fragment: partial_json,
                    }]
                }
                _ => Vec::new(),
            }),
            Event::ContentBlockStop { index }
                if self.answer.as_ref().is_some_and(|(i, _)| *i == index) =>
            {
                let input = self
                    .answer
                    .take()
                    .map(|(_, input)| input)
                    .unwrap_or_default();
                let input = if input.trim().is_empty() {
                    "{}".to_string()
                } else {
                    input
                };
                self.answer_text(input).map_err(StreamFault::Malformed)
            }
            Event::ContentBlockStop { index } => Ok(match self.tools.get_mut(&index) {
                // A call without arguments streams none: its arguments are the start's input.
                Some(tool) if !tool.got_arguments => {
                    tool.got_arguments = true;
                    vec![ModelDelta::ToolCallArguments {
                        index: tool.call,
                        fragment: tool.initial_input.clone(),
                    }]
                }
                _ => Vec::new(),
            }),
            Event::MessageDelta { delta, usage } => {
                if let Some(usage) = usage {
                    self.usage = self.usage.updated(usage);
                }
                let Some(reason) = delta.stop_reason else {
                    return Ok(Vec::new());
                };
                if self.finished {
                    return Ok(Vec::new());
                }
                self.finished = true;
                // An answer through the answer tool alone is an answer, not a tool call.
                let reason = if reason == "tool_use" && self.tools.is_empty() {
                    "end_turn".to_string()
                } else {
                    reason
                };
                Ok(vec![
                    ModelDelta::Finished(finish_reason(&reason, !self.tools.is_empty())),
                    ModelDelta::Usage(self.usage.to_usage()),
                ])
            }
            Event::MessageStop => {
                if self.finished {
                    return Ok(Vec::new());
                }
                Err(StreamFault::malformed(
                    "message_stop came before a stop_reason",
                ))
            }
            Event::Ping | Event::Other => Ok(Vec::new()),
            Event::Error { error } => Err(StreamFault::Interrupted(error_of(
                None,
                &error.kind,
                error.message,
                &self.model,
            ))),
        }
    }

    fn finished(&self) -> bool {
        self.finished
    }

    /// A typed ask's answer, collected until its block ends.
    fn held_back(&self) -> usize {
        self.answer.as_ref().map_or(0, |(_, input)| input.len())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use troupe_protocol::{FinishReason, Usage};

    use super::*;

    fn decode_all(events: &[Value]) -> Result<Vec<ModelDelta>, StreamFault> {
        let mut decoder = EventsDecoder::new("m", None);
        let mut deltas = Vec::new();
        for event in events {
            deltas.extend(decoder.decode(&event.to_string())?);
        }
        Ok(deltas)
    }

    #[test]
    fn text_and_a_tool_call_without_arguments_decode() {
        let deltas = decode_all(&[
            json!({"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": 3, "cache_read_input_tokens": 50, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "now", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}}),
            json!({"type": "message_stop"}),
        ])
        .unwrap_or_default();
        assert_eq!(
            deltas,
            vec![
                ModelDelta::Text("Hi".into()),
                ModelDelta::ToolCallStarted {
                    index: 0,
                    id: "t1".into(),
                    name: "now".into()
                },
                ModelDelta::ToolCallArguments {
                    index: 0,
                    fragment: "{}".into()
                },
                ModelDelta::Finished(FinishReason::ToolCalls),
                ModelDelta::Usage(Usage {
                    input_tokens: 53,
                    output_tokens: 7,
                    cache_read_input_tokens: 50,
                    cache_creation_input_tokens: 0,
                }),
            ]
        );
    }

    #[test]
    fn malformed_events_and_error_events_are_typed_errors() {
        let not_json = EventsDecoder::new("m", None)
            .decode("{\"type\": \"content_block_delta\"")
            .err();
        assert!(
            matches!(&not_json, Some(StreamFault::Malformed(ModelError::InvalidResponse(m))) if m.contains("not a Messages event")),
            "{not_json:?}"
        );
        let overloaded = decode_all(&[
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ])
        .err();
        assert!(
            matches!(
                overloaded,
                Some(StreamFault::Interrupted(ModelError::Server {
                    status: 529,
                    ..
                }))
            ),
            "{overloaded:?}"
        );
        let early_stop = decode_all(&[json!({"type": "message_stop"})]).err();
        assert!(matches!(
            early_stop,
            Some(StreamFault::Malformed(ModelError::InvalidResponse(_)))
        ));
        let unknown = decode_all(&[json!({"type": "brand_new_event", "x": 1})]);
        assert_eq!(unknown, Ok(vec![]));
    }

    #[test]
    fn the_answer_tools_input_is_the_answers_text_unwrapped_when_wrapped() {
        let events = |name: &str, pieces: [&str; 2]| {
            vec![
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": name, "input": {}}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": pieces[0]}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": pieces[1]}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 4}}),
            ]
        };
        let decode = |answer_tool: AnswerTool, events: Vec<Value>| {
            let mut decoder = EventsDecoder::new("m", Some(answer_tool));
            let mut deltas = Vec::new();
            for event in events {
                deltas.extend(decoder.decode(&event.to_string())?);
            }
            Ok::<_, StreamFault>(deltas)
        };
        let plain = AnswerTool {
            name: "City".into(),
            wrapped: false,
        };
        // The answer collected so far counts against the answer's cap until its block ends.
        let mut collecting = EventsDecoder::new("m", Some(plain.clone()));
        for event in &events("City", ["{\"name\": ", "\"Oslo\"}"])[..4] {
            collecting.decode(&event.to_string()).unwrap();
        }
        assert_eq!(collecting.held_back(), "{\"name\": \"Oslo\"}".len());
        let deltas = decode(plain.clone(), events("City", ["{\"name\": ", "\"Oslo\"}"]));
        let deltas = deltas.unwrap_or_default();
        assert_eq!(deltas[0], ModelDelta::Text("{\"name\": \"Oslo\"}".into()));
        assert_eq!(deltas[1], ModelDelta::Finished(FinishReason::Stop));
        let wrapped = AnswerTool {
            name: "Size".into(),
            wrapped: true,
        };
        let deltas = decode(wrapped.clone(), events("Size", ["{\"value\"", ": \"L\"}"]));
        assert_eq!(
            deltas.unwrap_or_default()[0],
            ModelDelta::Text("\"L\"".into())
        );
        let missing = decode(wrapped, events("Size", ["{\"other\"", ": 1}"])).err();
        assert!(
            matches!(&missing, Some(StreamFault::Malformed(ModelError::InvalidResponse(m))) if m.contains("no `value`")),
            "{missing:?}"
        );
        // Another tool is still a call.
        let deltas = decode(plain, events("read", ["{}", ""])).unwrap_or_default();
        assert!(matches!(deltas[0], ModelDelta::ToolCallStarted { .. }));
    }
}
