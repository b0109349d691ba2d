//! A tool call's `execute_tool` span: every call the model makes runs inside one, the
//! registry's tools and the agent's own `compact` alike.

use std::future::Future;

use tracing::Instrument;
use troupe_protocol::ToolCall;
use troupe_protocol::trace::{self, semconv};
use troupe_tools::{ToolOutcome, ToolResult};

use crate::tool_span;

/// Run `serve`, the serving of `call` for `agent`, inside the call's `execute_tool` span, and
/// record on it the result (when content is recorded) and the failure's kind.
pub(super) async fn in_tool_span(
    call: &ToolCall,
    agent: &str,
    serve: impl Future<Output = ToolResult>,
) -> ToolResult {
    let span = tool_span(call, agent);
    let recorder = span.clone();
    let result = serve.instrument(span).await;
    if trace::record_content() {
        recorder.record(semconv::TOOL_CALL_RESULT, result.content.as_str());
    }
    match &result.outcome {
        ToolOutcome::Success => {}
        ToolOutcome::Error(failure) => {
            recorder.record(semconv::ERROR_TYPE, failure.kind());
        }
        ToolOutcome::Fatal(_) => {
            recorder.record(semconv::ERROR_TYPE, "fatal");
        }
    }
    result
}
