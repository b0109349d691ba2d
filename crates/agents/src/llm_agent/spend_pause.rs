//! The spend check before every model call: a request whose budget is spent ends, or — the
//! budget's [`OnExceeded::Pause`] — waits there for a raised limit (`spend.rs`).
//!
//! The pause sits at a turn boundary, before a call: every assistant message has its tool
//! results, so a pause that ends without a raise ends the request exactly as
//! [`OnExceeded::End`] would have, keeping everything. The raise itself does not travel
//! through the agent's mailbox, which the paused request occupies: it is a shared limit the
//! meter watches ([`AgentBudget::raise`](crate::spend::AgentBudget::raise),
//! [`TeamSpend::set_limit`](troupe_runtime::budget::TeamSpend::set_limit)).

use troupe_protocol::{Event, TraceId};
use troupe_runtime::{AgentContext, AgentError, RequestWatch};

use crate::spend::{OnExceeded, SpendMeter};

/// `Ok` when the next model call may start; else, by the budget's policy, end with
/// [`AgentError::BudgetExceeded`] or pause until a limit is raised (ending the same way
/// when the pause times out or the caller stops listening).
///
/// One pause per spent budget: a raise that frees one while another is still spent (the
/// request's and the agent's, spent by the same call) pauses again, naming the other, so
/// whoever raises is asked about each — each pause with its own timeout, since each waits
/// on a new question.
pub(super) async fn within_budget(
    spend: &SpendMeter,
    ctx: &AgentContext,
    trace_id: TraceId,
    watch: Option<&RequestWatch>,
) -> Result<(), AgentError> {
    loop {
        let Err(exceeded) = spend.check() else {
            return Ok(());
        };
        let OnExceeded::Pause { timeout } = spend.on_exceeded() else {
            return Err(AgentError::BudgetExceeded(exceeded));
        };
        tracing::info!(agent = %ctx.name, %exceeded, "budget spent; paused until a limit is raised");
        let scope = exceeded.scope;
        ctx.events.publish(
            Some(trace_id),
            Event::BudgetPaused {
                agent: ctx.name.clone(),
                exceeded,
            },
        );
        // An abandoned request ends as a timed-out pause does: typed, nothing rolled back.
        let waited = spend.wait_for_raise(scope, timeout);
        let result = match watch {
            None => waited.await,
            Some(watch) => tokio::select! {
                waited = waited => waited,
                // Nobody is left to ask about a budget still spent.
                () = watch.abandoned() => {
                    return spend.check().map_err(AgentError::BudgetExceeded);
                }
            },
        };
        result.map_err(AgentError::BudgetExceeded)?;
    }
}
