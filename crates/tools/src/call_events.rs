//! The events every tool call publishes, whoever serves it.

use std::future::Future;
use std::time::Instant;

use troupe_protocol::{Event, ToolCall};

use crate::context::ToolContext;
use crate::result::ToolResult;

/// Run `run`, the serving of `call`, between [`Event::ToolCallStarted`] and
/// [`Event::ToolCallFinished`] published on `ctx.events`. [`crate::ToolRegistry::dispatch`]
/// serves every registered tool through it; a tool served outside a registry (an agent's own
/// `compact`) goes through it too, so observers see every call alike.
pub async fn observe_call(
    call: &ToolCall,
    ctx: &ToolContext,
    run: impl Future<Output = ToolResult>,
) -> ToolResult {
    let tool = call.function.name.clone();
    ctx.events.publish(
        ctx.trace_id,
        Event::ToolCallStarted {
            agent: ctx.agent.clone(),
            tool: tool.clone(),
            call_id: call.id.clone(),
        },
    );
    let started = Instant::now();
    let result = run.await;
    ctx.events.publish(
        ctx.trace_id,
        Event::ToolCallFinished {
            agent: ctx.agent.clone(),
            tool,
            call_id: call.id.clone(),
            is_error: result.is_error(),
            ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        },
    );
    result
}
