//! What the page may do to a live team besides answering approvals: `/compact` an agent, raise
//! the budget that paused it. Like every request they pass the guard (the token, no other
//! origin); a finished run refuses them.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use troupe_agents::{CompactionAskError, LlmAgent};
use troupe_protocol::{BudgetScope, SpendLimit};

use crate::json::to_safe_json;
use crate::routes::Routes;

/// `/compact [focus]` of one agent.
#[derive(Debug, Deserialize)]
pub(crate) struct CompactAsk {
    agent: String,
    #[serde(default)]
    focus: Option<String>,
}

/// A new limit for one of an agent's budgets.
#[derive(Debug, Deserialize)]
pub(crate) struct RaiseAsk {
    agent: String,
    scope: BudgetScope,
    limit: SpendLimit,
}

/// `/compact` an agent as `troupe chat` does: through its handle
/// ([`LlmAgentHandle::compact`](troupe_agents::LlmAgentHandle::compact)), built from the team's
/// directory — refused when the team has no compression agent, joining the compaction already
/// running when the agent is mid-request, refused while it responds without one. Answers its
/// before and after tokens.
pub(crate) async fn compact(State(routes): State<Routes>, Json(ask): Json<CompactAsk>) -> Response {
    let live = match routes.source.live() {
        Ok(live) => live,
        Err(refusal) => return refusal.into_response(),
    };
    let CompactAsk { agent, focus } = ask;
    match live
        .directory
        .agent::<LlmAgent>(&agent)
        .compact(focus)
        .await
    {
        Ok(applied) => {
            let body = serde_json::json!({
                "agent": agent,
                "tokens_before": applied.report.tokens_before,
                "tokens_after": applied.report.tokens_after,
            });
            json_ok(to_safe_json(&body))
        }
        Err(CompactionAskError::Ask(e)) => (StatusCode::NOT_FOUND, e.to_string()).into_response(),
        Err(e) => (StatusCode::CONFLICT, format!("{agent}: {e}")).into_response(),
    }
}

/// Raise one of an agent's budgets (the one that paused it, say): it goes on from its next
/// check. The budget is the one the team holds for the agent
/// ([`LlmAgentHandle::budget`](troupe_agents::LlmAgentHandle::budget)), whoever served the view.
pub(crate) async fn raise(State(routes): State<Routes>, Json(ask): Json<RaiseAsk>) -> Response {
    let live = match routes.source.live() {
        Ok(live) => live,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(budget) = live.directory.agent::<LlmAgent>(&ask.agent).budget() else {
        return (
            StatusCode::NOT_FOUND,
            format!("the team holds no budget of {}", ask.agent),
        )
            .into_response();
    };
    // A limit the spend still reaches would leave the agent waiting with nothing asked.
    let spent = routes.feed.read(|view| {
        view.agent(&ask.agent)
            .and_then(|a| a.paused())
            .filter(|p| p.scope == ask.scope)
            .map(|p| p.spent)
    });
    if let Some(spent) = spent
        && ask.limit.reached_by(&spent)
    {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("spent {spent}: a limit of {} is still reached", ask.limit),
        )
            .into_response();
    }
    match budget.raise(ask.scope, ask.limit) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => (StatusCode::CONFLICT, e.to_string()).into_response(),
    }
}

pub(crate) fn json_ok(body: String) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
