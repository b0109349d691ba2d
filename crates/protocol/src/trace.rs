//! Tracing: the span attribute names ([`semconv`]), whether spans carry message content
//! ([`record_content`]), the content they carry ([`content`]), the lines of the JSONL trace
//! file ([`TraceLine`]) and the one reader of that file ([`read_trace_file`], [`TraceReader`]).
//! The context that travels inside actor messages is [`TraceContext`](crate::TraceContext).

use std::sync::atomic::{AtomicU8, Ordering};

pub mod content;
mod file_line;
mod file_reader;

pub use file_line::{EventLine, SpanLine, TraceLine};
pub use file_reader::{
    BadLine, LineProblem, NAMED_BAD_LINES, TraceRead, TraceReader, read_trace_bytes,
    read_trace_file,
};

/// `1`/`true`/`yes`/`on` asks for message content (prompts, completions, tool arguments and
/// results) in trace spans.
pub const TRACE_CONTENT_ENV: &str = "TROUPE_TRACE_CONTENT";

/// [`record_content`]'s state: not decided yet (read the environment), off, on.
const CONTENT_UNSET: u8 = 0;
const CONTENT_OFF: u8 = 1;
const CONTENT_ON: u8 = 2;
static RECORD_CONTENT: AtomicU8 = AtomicU8::new(CONTENT_UNSET);

/// Whether [`TRACE_CONTENT_ENV`] asks for message content in traces.
pub fn content_env_enabled() -> bool {
    std::env::var(TRACE_CONTENT_ENV).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Whether spans should carry message content. Code that records content checks this before
/// it builds anything, so with recording off (the default) content costs one atomic load. Set
/// by [`set_record_content`] (the facade's telemetry setup calls it); until then it follows
/// [`TRACE_CONTENT_ENV`]. Exporters apply their own switch too: this only decides whether the
/// content is built at all.
pub fn record_content() -> bool {
    match RECORD_CONTENT.load(Ordering::Relaxed) {
        CONTENT_ON => true,
        CONTENT_OFF => false,
        _ => {
            let on = content_env_enabled();
            let state = if on { CONTENT_ON } else { CONTENT_OFF };
            // A concurrent `set_record_content` wins over the environment.
            match RECORD_CONTENT.compare_exchange(
                CONTENT_UNSET,
                state,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => on,
                Err(current) => current == CONTENT_ON,
            }
        }
    }
}

/// Turn content recording on or off for the whole process (see [`record_content`]).
pub fn set_record_content(on: bool) {
    let state = if on { CONTENT_ON } else { CONTENT_OFF };
    RECORD_CONTENT.store(state, Ordering::Relaxed);
}

/// A span id written as 16 hex digits (as `traceparent` and troupe's span-id attributes write
/// it); `None` for anything else, and for the invalid id 0.
pub fn parse_span_id(hex: &str) -> Option<u64> {
    u64::from_str_radix(hex, 16)
        .ok()
        .filter(|id| *id != 0 && hex.len() == 16)
}

/// Span attribute names: the OpenTelemetry GenAI semantic conventions' (`gen_ai.*`) and troupe's
/// own (`troupe.*`). Every span field and every reader of the trace file names them from here.
pub mod semconv {
    /// `gen_ai.operation.name`: `chat`, `execute_tool`, `invoke_agent`, …
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    /// `gen_ai.agent.name`.
    pub const AGENT_NAME: &str = "gen_ai.agent.name";
    /// `gen_ai.request.model`.
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    /// `gen_ai.usage.input_tokens`.
    pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// `gen_ai.usage.output_tokens`.
    pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// `gen_ai.usage.cache_read.input_tokens`: of the input tokens, those read from the
    /// provider's prompt cache.
    pub const USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
    /// `gen_ai.usage.cache_creation.input_tokens`: of the input tokens, those written to the
    /// provider's prompt cache.
    pub const USAGE_CACHE_CREATION_INPUT_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
    /// `troupe.spend.cost_micros`: on a `chat` span of an agent whose model has a price, what
    /// the call cost in millionths of the price's currency — the number its budget recorded.
    pub const SPEND_COST_MICROS: &str = "troupe.spend.cost_micros";
    /// `troupe.rate_limit.waited_ms`: on a `chat` span of a call under a shared rate limit, how
    /// long it (its retries included) waited for the limiter, in milliseconds (0: not at all).
    pub const RATE_LIMIT_WAITED_MS: &str = "troupe.rate_limit.waited_ms";
    /// `troupe.rate_limit.holds`: on a `chat` span of a call under a shared rate limit, how many
    /// `Retry-After` answers it heard, each holding every caller of the endpoint.
    pub const RATE_LIMIT_HOLDS: &str = "troupe.rate_limit.holds";
    /// `gen_ai.tool.name`.
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    /// `gen_ai.tool.call.id`.
    pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// `error.type`: the class of error that ended the operation (set only on failure).
    pub const ERROR_TYPE: &str = "error.type";
    /// `gen_ai.system_instructions`: the system prompt, as a JSON array of parts (content).
    pub const SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
    /// `gen_ai.input.messages`: the messages sent to the model, as JSON (content).
    pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
    /// `gen_ai.output.messages`: the model's answer, as JSON (content).
    pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
    /// `gen_ai.tool.call.arguments`: the arguments a tool was called with (content).
    pub const TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
    /// `gen_ai.tool.call.result`: what the tool returned (content).
    pub const TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
    /// `gen_ai.prompt`: the prompt, in the conventions' older form (content; troupe reads it in
    /// spans from other libraries, never writes it).
    pub const LEGACY_PROMPT: &str = "gen_ai.prompt";
    /// `gen_ai.completion`: the answer, in the conventions' older form (content; read, not written).
    pub const LEGACY_COMPLETION: &str = "gen_ai.completion";
    /// The prefix of the token counts, `gen_ai.usage.*`: integers in the conventions.
    pub const USAGE_PREFIX: &str = "gen_ai.usage.";
    /// `gen_ai.request.max_tokens`: the output limit a request set (an integer).
    pub const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
    /// `gen_ai.request.seed`: the sampling seed a request set (an integer).
    pub const REQUEST_SEED: &str = "gen_ai.request.seed";
    /// `gen_ai.request.choice.count`: how many answers a request asked for (an integer).
    pub const REQUEST_CHOICE_COUNT: &str = "gen_ai.request.choice.count";
    /// `gen_ai.response.time_to_first_chunk`: seconds (a float) from issuing a model call to
    /// the first delta of its streamed answer.
    pub const RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
    /// `gen_ai.request.stream`: whether the call was made in streaming mode (a boolean).
    pub const REQUEST_STREAM: &str = "gen_ai.request.stream";
    /// `gen_ai.conversation.id`: the conversation an `invoke_agent` span continues — the
    /// agent's session log when it keeps one, else an id for the agent's life in this process.
    pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
    /// `session.id` (OpenInference): the same id, for trace UIs that group a conversation's
    /// traces by it (Arize Phoenix's Sessions view).
    pub const SESSION_ID: &str = "session.id";
    /// `openinference.span.kind` (OpenInference): the kind a trace UI shows for a span it cannot
    /// classify from `gen_ai.operation.name` (a compaction is a `CHAIN`).
    pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";

    // troupe's own attributes, under `troupe.`: what the GenAI conventions have no name for.

    /// `troupe.trace_id`: the runtime's trace id (32 hex digits) on a request's root span, so
    /// the trace file and OTLP export put the span in the trace that travelled with the request.
    pub const TRACE_ID: &str = "troupe.trace_id";
    /// `troupe.parent_span_id`: the span id (16 hex digits) of the asking side of a request.
    pub const PARENT_SPAN_ID: &str = "troupe.parent_span_id";
    /// `troupe.span_id`: a span's id (16 hex digits) chosen by troupe rather than the exporter:
    /// set on the span that sends a request to another node, so the other node can name it
    /// as its parent.
    pub const SPAN_ID: &str = "troupe.span_id";
    /// `troupe.remote_parent_span_id`: on the span that takes a request from another node,
    /// the id (16 hex digits) of the sending span there — the exporters make it the parent,
    /// so one request is one trace across processes.
    pub const REMOTE_PARENT_SPAN_ID: &str = "troupe.remote_parent_span_id";
    /// `troupe.node`: the cluster node a request went to or came from.
    pub const NODE: &str = "troupe.node";
    /// `troupe.from`: the agent that sent a request, or `user`.
    pub const FROM: &str = "troupe.from";
    /// `troupe.mcp.server`: the MCP server that served a tool call, on its `execute_tool` span.
    pub const MCP_SERVER: &str = "troupe.mcp.server";
    /// `troupe.sandbox.policy`: the sandbox policy a tool's command ran under (`read-only`,
    /// `workspace-write`, `full`), on its `execute_tool` span.
    pub const SANDBOX_POLICY: &str = "troupe.sandbox.policy";
    /// `troupe.trigger`: what started a compaction (`manual`, `automatic`, `agent_tool`,
    /// `emergency`, `scope`).
    pub const TRIGGER: &str = "troupe.trigger";
    /// `troupe.compressor`: the compression agent that ran a compaction.
    pub const COMPRESSOR: &str = "troupe.compressor";
    /// `troupe.scope`: the label of the scope a scope summary closes.
    pub const SCOPE: &str = "troupe.scope";
    /// `troupe.compaction.tokens_before`: the conversation's tokens before a compaction.
    pub const COMPACTION_TOKENS_BEFORE: &str = "troupe.compaction.tokens_before";
    /// `troupe.compaction.tokens_after`: the conversation's tokens after it.
    pub const COMPACTION_TOKENS_AFTER: &str = "troupe.compaction.tokens_after";
    /// `troupe.compaction.target`: the token count the compaction aimed for.
    pub const COMPACTION_TARGET: &str = "troupe.compaction.target";
    /// `troupe.compaction.reached`: whether it got there.
    pub const COMPACTION_REACHED: &str = "troupe.compaction.reached";
    /// `troupe.compaction.skipped`: whether the anti-thrash guard skipped it.
    pub const COMPACTION_SKIPPED: &str = "troupe.compaction.skipped";
    /// `troupe.compaction.tiers`: the tiers it used, e.g. `truncate,mask`.
    pub const COMPACTION_TIERS: &str = "troupe.compaction.tiers";
    /// `troupe.compaction.reason`: the report's one-line account of what happened.
    pub const COMPACTION_REASON: &str = "troupe.compaction.reason";
    /// `troupe.compaction.outcome`: how a compaction ended — `applied` (its agent took the
    /// answer), `dropped` (it answered, and its agent dropped the answer as stale: see
    /// [`COMPACTION_DROPPED`]), `answered` (its answer went to a caller that is not an agent:
    /// a transcript file, an MCP client), `failed` (with [`ERROR_TYPE`]) or `cancelled` (with
    /// [`ERROR_TYPE`] `cancelled`: stopped before it answered).
    pub const COMPACTION_OUTCOME: &str = "troupe.compaction.outcome";
    /// `troupe.compaction.dropped`: why its agent dropped a compaction's answer (outcome
    /// `dropped`).
    pub const COMPACTION_DROPPED: &str = "troupe.compaction.dropped";
    /// `troupe.compaction.summarizer_calls`: how many summaries a model was asked for.
    pub const COMPACTION_SUMMARIZER_CALLS: &str = "troupe.compaction.summarizer_calls";
    /// `troupe.compaction.mode`: `background` (the agent went on working while it ran) or
    /// `blocking` (the agent waited for it).
    pub const COMPACTION_MODE: &str = "troupe.compaction.mode";
    /// `troupe.compaction.waited_ms`: how long the agent's request was held up by the
    /// compaction — all of it when blocking; in the background, the wait at the trigger plus
    /// the splice (0 when the answer landed on its own).
    pub const COMPACTION_WAITED_MS: &str = "troupe.compaction.waited_ms";
    /// `troupe.compaction.receipt.cached_prefix_kept`: tokens of the longest prefix of messages
    /// a compaction left byte-identical (still cached for the next call).
    pub const COMPACTION_RECEIPT_CACHED_PREFIX_KEPT: &str =
        "troupe.compaction.receipt.cached_prefix_kept";
    /// `troupe.compaction.receipt.tokens_rebilled`: the tokens after that prefix, which the next
    /// call reads uncached.
    pub const COMPACTION_RECEIPT_TOKENS_REBILLED: &str =
        "troupe.compaction.receipt.tokens_rebilled";
    /// `troupe.compaction.receipt.summarizer_billed`: what the compaction's summarizer calls
    /// cost, in uncached-input-token units.
    pub const COMPACTION_RECEIPT_SUMMARIZER_BILLED: &str =
        "troupe.compaction.receipt.summarizer_billed";
    /// `troupe.compaction.receipt.expected_turns`: the calls expected before the next
    /// compaction.
    pub const COMPACTION_RECEIPT_EXPECTED_TURNS: &str = "troupe.compaction.receipt.expected_turns";
    /// `troupe.compaction.receipt.net_saving`: what the compaction saves over those calls, less
    /// what it re-bills and its summarizer cost (uncached-input-token units; negative: a loss).
    pub const COMPACTION_RECEIPT_NET_SAVING: &str = "troupe.compaction.receipt.net_saving";
    /// `troupe.compaction.receipt.pricing`: the cost model the receipt was priced under
    /// (`openai` or `anthropic`).
    pub const COMPACTION_RECEIPT_PRICING: &str = "troupe.compaction.receipt.pricing";
    /// `troupe.input`: the transcript file a CLI operation read.
    pub const INPUT: &str = "troupe.input";
    /// `troupe.archive`: the archive file a CLI operation read.
    pub const ARCHIVE: &str = "troupe.archive";
    /// `troupe.window`: the context window (tokens) a CLI operation assumed.
    pub const WINDOW: &str = "troupe.window";
    /// `troupe.content`: the prefix for message content of troupe's own (or a custom tool's)
    /// attributes, written only when content recording is on, like the `gen_ai` content fields.
    pub const CONTENT: &str = "troupe.content";
    /// `troupe.restarted`: on a supervisor's `restart` span, `true` once the agent is running
    /// again (absent when the supervisor gave up on it).
    pub const RESTARTED: &str = "troupe.restarted";
    /// `gen_ai.token.type`: `input` or `output`, on [`METRIC_TOKEN_USAGE`] points.
    pub const TOKEN_TYPE: &str = "gen_ai.token.type";
    /// Metric `gen_ai.client.token.usage` (histogram, `{token}`): tokens per model call, by
    /// agent, model and [`TOKEN_TYPE`].
    pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    /// Metric `gen_ai.client.inference.usage.cache_read.input_tokens` (counter, `{token}`):
    /// of the input tokens, those read from the provider's prompt cache, by agent and model
    /// (the GenAI conventions' usage counter; `gen_ai.token.type` has only `input` and `output`,
    /// and cached tokens are input tokens, so a third type would count them twice).
    pub const METRIC_USAGE_CACHE_READ_INPUT_TOKENS: &str =
        "gen_ai.client.inference.usage.cache_read.input_tokens";
    /// Metric `gen_ai.client.inference.usage.cache_write.input_tokens` (counter, `{token}`): of
    /// the input tokens, those written to the provider's prompt cache, by agent and model.
    pub const METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS: &str =
        "gen_ai.client.inference.usage.cache_write.input_tokens";
    /// Metric `gen_ai.client.operation.duration` (histogram, `s`): how long a model call
    /// (`gen_ai.operation.name` = `chat`) or a tool call (`execute_tool`) took.
    pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
    /// Metric `troupe.compactions` (counter): compactions run, by agent and [`TRIGGER`].
    pub const METRIC_COMPACTIONS: &str = "troupe.compactions";
    /// Metric `troupe.compaction.tokens_freed` (counter, `{token}`): tokens before minus tokens
    /// after, summed over compactions, by agent and [`TRIGGER`].
    pub const METRIC_COMPACTION_TOKENS_FREED: &str = "troupe.compaction.tokens_freed";
    /// Metric `troupe.agent.restarts` (counter): agents restarted by their supervisor, by agent.
    pub const METRIC_AGENT_RESTARTS: &str = "troupe.agent.restarts";
    /// Metric `troupe.spend.cost` (counter, millionths of the prices' currency): what model
    /// calls cost, by agent and model, for models with a price ([`SPEND_COST_MICROS`]).
    pub const METRIC_SPEND_COST: &str = "troupe.spend.cost";
    /// Metric `troupe.rate_limit.wait` (histogram, `s`): how long each model call under a
    /// shared rate limit waited for it, by model ([`RATE_LIMIT_WAITED_MS`]).
    pub const METRIC_RATE_LIMIT_WAIT: &str = "troupe.rate_limit.wait";
    /// Metric `troupe.rate_limit.holds` (counter): `Retry-After` answers that held a shared
    /// rate limit's every caller, by model ([`RATE_LIMIT_HOLDS`]).
    pub const METRIC_RATE_LIMIT_HOLDS: &str = "troupe.rate_limit.holds";
}
