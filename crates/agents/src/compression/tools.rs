//! The compression agent's four tools, validated and executed against a [`CompactionSession`].
//!
//! Every argument is checked before anything changes: unknown or malformed ids, protected
//! messages and ranges that would cut a tool pair are refused with a message that says how to
//! fix the call, so even a weak model cannot break the conversation.

use serde::Deserialize;
use serde_json::{Value, json};
use troupe_compaction::session::{
    CompactionSession, CompressionMetadata, Refusal, StepOutcome, ToolResultStrategy,
};
use troupe_compaction::summary::Summarizer;
use troupe_protocol::{MessageId, ToolCall, ToolDefinition};

/// `get_compression_metadata`.
pub const GET_METADATA: &str = "get_compression_metadata";
/// `compress_tool_result`.
pub const COMPRESS_TOOL_RESULT: &str = "compress_tool_result";
/// `compress_conversation_segment`.
pub const COMPRESS_SEGMENT: &str = "compress_conversation_segment";
/// `verify_compression_target`.
pub const VERIFY_TARGET: &str = "verify_compression_target";

/// How many of the largest compressible messages the metadata lists (keeps it small enough for
/// a small model's window; the totals still cover every message).
const LARGEST_SHOWN: usize = 12;

/// The four tool definitions, as OpenAI function definitions.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: GET_METADATA.into(),
            description: "Get the conversation's token totals, the target, protected ranges, the \
                          largest compressible messages and the file ledger."
                .into(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
        ToolDefinition {
            name: COMPRESS_TOOL_RESULT.into(),
            description:
                "Shrink one tool result: `truncate` keeps head and tail, `mask` replaces it \
                          with a one-line stub naming the file or tool."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "message_id": {"type": "string", "description": "id of a tool result, e.g. m12"},
                    "strategy": {"type": "string", "enum": ["truncate", "mask"]}
                },
                "required": ["message_id", "strategy"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: COMPRESS_SEGMENT.into(),
            description: "Summarize the messages from start_id to end_id (inclusive) into one \
                          structured summary. The range must not include protected messages or \
                          cut a tool call from its result."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "start_id": {"type": "string"},
                    "end_id": {"type": "string"},
                    "focus": {"type": "string", "description": "what the summary must keep"}
                },
                "required": ["start_id", "end_id"],
                "additionalProperties": false
            }),
        },
        ToolDefinition {
            name: VERIFY_TARGET.into(),
            description: "Check whether the conversation is at or below its target token count."
                .into(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
    ]
}

#[derive(Deserialize)]
struct CompressToolResultArgs {
    message_id: String,
    strategy: String,
}

#[derive(Deserialize)]
struct CompressSegmentArgs {
    start_id: String,
    end_id: String,
    focus: Option<String>,
}

/// What one executed tool call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolExecution {
    /// The tool result for the compression model.
    pub content: String,
    /// Whether the call changed the conversation.
    pub applied: bool,
}

fn refused(message: impl Into<String>) -> ToolExecution {
    ToolExecution {
        content: format!("refused: {}", message.into()),
        applied: false,
    }
}

/// The tool result of an operation: what it did and where the conversation stands, or why it
/// was refused.
fn applied(
    result: Result<StepOutcome, Refusal>,
    what: impl FnOnce(&StepOutcome) -> String,
) -> ToolExecution {
    match result {
        Ok(step) => ToolExecution {
            content: format!(
                "{}: {} → {} tokens; conversation now {} tokens{}",
                what(&step),
                step.tokens_before,
                step.tokens_after,
                step.total_tokens,
                if step.reached {
                    " (target reached)"
                } else {
                    ""
                }
            ),
            applied: true,
        },
        Err(refusal) => refused(refusal.to_string()),
    }
}

fn parse_id(field: &str, raw: &str) -> Result<MessageId, ToolExecution> {
    raw.parse::<MessageId>()
        .map_err(|e| refused(format!("{field}: {e}")))
}

/// A small view of the metadata: totals, ranges, ledger, and the largest candidates.
pub fn condensed_metadata(metadata: &CompressionMetadata) -> Value {
    let mut candidates: Vec<_> = metadata
        .messages
        .iter()
        .filter(|m| !m.protected && !m.compressed)
        .collect();
    candidates.sort_by_key(|m| std::cmp::Reverse(m.tokens));
    let largest: Vec<Value> = candidates
        .iter()
        .take(LARGEST_SHOWN)
        .map(|m| {
            json!({
                "id": m.id.to_string(),
                "role": m.role.to_string(),
                "tokens": m.tokens,
                "tool": m.tool_name,
                "preview": m.preview.chars().take(60).collect::<String>(),
            })
        })
        .collect();
    let first_unprotected = metadata
        .messages
        .iter()
        .find(|m| !m.protected)
        .map(|m| m.id.to_string());
    json!({
        "total_tokens": metadata.total_tokens,
        "target_tokens": metadata.target_tokens,
        "tokens_to_free": metadata.tokens_to_free,
        "reached": metadata.reached,
        "messages": metadata.messages.len(),
        "first_unprotected_id": first_unprotected,
        "protected_ranges": metadata.protected_ranges,
        "largest_compressible": largest,
        "previous_summary": metadata.previous_summary.map(|id| id.to_string()),
        "read_only_files": metadata.ledger.read_only_files.len(),
        "modified_files": metadata.ledger.modified_files,
        "freeable_tokens": metadata.freeable_tokens,
    })
}

/// Validate and run one tool call of the compression model against the session.
pub async fn execute(
    call: &ToolCall,
    session: &mut CompactionSession<'_>,
    summarizer: &dyn Summarizer,
) -> ToolExecution {
    let args = call.function.arguments.trim();
    let args = if args.is_empty() { "{}" } else { args };
    match call.function.name.as_str() {
        GET_METADATA => ToolExecution {
            content: condensed_metadata(&session.metadata()).to_string(),
            applied: false,
        },
        VERIFY_TARGET => {
            let status = session.verify_target();
            ToolExecution {
                content: json!({"current": status.current, "target": status.target, "reached": status.reached})
                    .to_string(),
                applied: false,
            }
        }
        COMPRESS_TOOL_RESULT => {
            let parsed: CompressToolResultArgs = match serde_json::from_str(args) {
                Ok(a) => a,
                Err(e) => {
                    return refused(format!("invalid arguments for {COMPRESS_TOOL_RESULT}: {e}"));
                }
            };
            let id = match parse_id("message_id", &parsed.message_id) {
                Ok(id) => id,
                Err(r) => return r,
            };
            let strategy = match parsed.strategy.as_str() {
                "truncate" => ToolResultStrategy::Truncate,
                "mask" => ToolResultStrategy::Mask,
                other => {
                    return refused(format!(
                        "strategy must be `truncate` or `mask`, not `{other}`"
                    ));
                }
            };
            applied(session.compress_tool_result(id, strategy), |_| {
                format!("compressed {id}")
            })
        }
        COMPRESS_SEGMENT => {
            let parsed: CompressSegmentArgs = match serde_json::from_str(args) {
                Ok(a) => a,
                Err(e) => return refused(format!("invalid arguments for {COMPRESS_SEGMENT}: {e}")),
            };
            let (start, end) = match (
                parse_id("start_id", &parsed.start_id),
                parse_id("end_id", &parsed.end_id),
            ) {
                (Ok(s), Ok(e)) => (s, e),
                (Err(r), _) | (_, Err(r)) => return r,
            };
            let result = session
                .compress_segment(start, end, parsed.focus, summarizer)
                .await;
            applied(result, |step| {
                let into = step.new_id.map(|id| id.to_string()).unwrap_or_default();
                format!("summarized {} messages into {into}", step.replaced.len())
            })
        }
        other => refused(format!(
            "unknown tool `{other}`; the tools are {GET_METADATA}, {COMPRESS_TOOL_RESULT}, {COMPRESS_SEGMENT}, {VERIFY_TARGET}"
        )),
    }
}
