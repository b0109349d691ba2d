//! The routes: the page and its assets, the snapshot, the live feed, the approval answers;
//! an agent's conversation and archive, the traces, the spend; the actions (`actions.rs`).

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt as _;
use serde::Deserialize;
use tokio::sync::watch;
use troupe_protocol::{ApprovalDecision, ApprovalId, MessageId};
use troupe_runtime::approval::Approvals;

use crate::actions::{self, json_ok};
use crate::budgets;
use crate::conversation::{self, ConversationView};
use crate::feed::{Feed, Out};
use crate::json::to_safe_json;
use crate::page;
use crate::shown;
use crate::source::Source;

/// What the routes act on.
#[derive(Debug, Clone)]
pub(crate) struct Routes {
    pub(crate) feed: Arc<Feed>,
    /// The team's approval desk; `None` for a finished run (read-only).
    pub(crate) approvals: Option<Approvals>,
    pub(crate) token: String,
    /// Where conversations are read, and what actions act on.
    pub(crate) source: Arc<Source>,
    /// Turns `true` when the server shuts down: live feeds end then.
    pub(crate) closing: watch::Receiver<bool>,
}

pub(crate) fn router(routes: Routes) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/app.css", get(app_css))
        .route("/api/snapshot", get(snapshot))
        .route("/api/events", get(events))
        .route("/api/approvals/approve", post(approve))
        .route("/api/approvals/deny", post(deny))
        .route("/api/conversation", get(conversation))
        .route("/api/archive", get(archive))
        .route("/api/traces", get(traces))
        .route("/api/traces/{id}", get(trace))
        .route("/api/spend", get(spend))
        .route("/api/agents/compact", post(actions::compact))
        .route("/api/budgets/raise", post(actions::raise))
        .with_state(routes)
}

fn with_type(body: impl IntoResponse, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

async fn index(State(routes): State<Routes>) -> Response {
    let mut response = with_type(page::index(&routes.token), "text/html; charset=utf-8");
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(page::CSP),
    );
    response
}

async fn app_js() -> Response {
    with_type(page::APP_JS, "text/javascript; charset=utf-8")
}

async fn app_css() -> Response {
    with_type(page::APP_CSS, "text/css; charset=utf-8")
}

async fn snapshot(State(routes): State<Routes>) -> Response {
    with_type(routes.feed.snapshot(), "application/json")
}

/// The live feed: a snapshot, then patches; `lagged` then a snapshot when the viewer fell
/// behind. Ends when the server shuts down.
async fn events(State(routes): State<Routes>) -> impl IntoResponse {
    let mut closing = routes.closing.clone();
    let closed = async move {
        let _ = closing.wait_for(|closed| *closed).await;
    };
    let stream = routes
        .feed
        .subscribe()
        .map(|out| {
            Ok::<_, Infallible>(match out {
                Out::Snapshot(json) => SseEvent::default().event("snapshot").data(json),
                Out::Patch(json) => SseEvent::default().event("patch").data(&*json),
                Out::Lagged => SseEvent::default().event("lagged").data("{}"),
            })
        })
        .take_until(Box::pin(closed));
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// An answer to a waiting tool call: which call, and what the page showed of it.
#[derive(Debug, Deserialize)]
struct Answer {
    id: ApprovalId,
    /// The digest of the tool and arguments shown (the snapshot's): the call is answered only
    /// if it is still the one waiting under `id`.
    digest: String,
    /// Why, for a denial (the model sees it as the call's result).
    #[serde(default)]
    reason: Option<String>,
}

async fn approve(State(routes): State<Routes>, Json(answer): Json<Answer>) -> Response {
    decide(
        &routes,
        &answer,
        ApprovalDecision::Approve { arguments: None },
    )
}

async fn deny(State(routes): State<Routes>, Json(answer): Json<Answer>) -> Response {
    let reason = answer
        .reason
        .clone()
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| "denied in the troupe view".to_string());
    decide(&routes, &answer, ApprovalDecision::Deny { reason })
}

/// Answer the call `answer` names if it is what the page showed; else nothing is answered
/// (409) and the call still waits.
fn decide(routes: &Routes, answer: &Answer, decision: ApprovalDecision) -> Response {
    let Some(approvals) = &routes.approvals else {
        return (StatusCode::CONFLICT, "a finished run is read-only").into_response();
    };
    let shown = |tool: &str, arguments: &str| shown::digest(tool, arguments) == answer.digest;
    match approvals.decide_shown(&answer.id, shown, decision) {
        Ok(()) => {
            routes.feed.update(|view| view.answered(&answer.id));
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => (StatusCode::CONFLICT, e.to_string()).into_response(),
    }
}

/// Which agent, and for the archive which id (`m12` or `12`).
#[derive(Debug, Deserialize)]
struct Which {
    agent: String,
    #[serde(default)]
    id: Option<String>,
}

/// An agent's conversation, summaries and stubs where they sit, with what each stands for.
async fn conversation(State(routes): State<Routes>, Query(which): Query<Which>) -> Response {
    match routes.source.copy(&which.agent).await {
        Ok(copy) => json_ok(to_safe_json(&ConversationView::of(&which.agent, &copy))),
        Err(refusal) => refusal.into_response(),
    }
}

/// The agent's archive: its newest originals, or the one `id` names as `recall` reads it.
async fn archive(State(routes): State<Routes>, Query(which): Query<Which>) -> Response {
    let copy = match routes.source.copy(&which.agent).await {
        Ok(copy) => copy,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(id) = which.id else {
        return json_ok(to_safe_json(&conversation::listing(
            &which.agent,
            &copy.archive,
        )));
    };
    let digits = id.trim().trim_start_matches('m');
    let Ok(n) = digits.parse::<u64>() else {
        return (StatusCode::BAD_REQUEST, "an id is m12 or 12").into_response();
    };
    match conversation::original(&which.agent, &copy.archive, MessageId(n)) {
        Some(found) => json_ok(to_safe_json(&found)),
        None => (
            StatusCode::NOT_FOUND,
            format!("m{n} is not archived by {}", which.agent),
        )
            .into_response(),
    }
}

/// The newest traces, one line each.
async fn traces(State(routes): State<Routes>) -> Response {
    json_ok(
        routes
            .feed
            .read(|view| to_safe_json(&view.traces().lines())),
    )
}

/// One trace's spans, for its waterfall.
async fn trace(State(routes): State<Routes>, Path(id): Path<String>) -> Response {
    let found = routes
        .feed
        .read(|view| view.traces().get(&id).map(to_safe_json));
    match found {
        Some(json) => json_ok(json),
        None => (StatusCode::NOT_FOUND, "no such trace (or no longer kept)").into_response(),
    }
}

/// Spend against budgets, and the rate limiters' waits (a finished run has none to show).
async fn spend(State(routes): State<Routes>) -> Response {
    match routes.source.live() {
        Ok(live) => json_ok(
            routes
                .feed
                .read(|view| to_safe_json(&budgets::spend(live, view))),
        ),
        Err(_) => json_ok(r#"{"agents":[],"rate_limits":[]}"#.to_string()),
    }
}
