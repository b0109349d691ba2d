//! Where the view reads what its events do not carry: a live team's agents (their conversation
//! and archive; their budgets through their handles), the rate limiters of their models, or a
//! finished run's log.

use std::time::Duration;

use axum::http::StatusCode;
use troupe_agents::{ConversationCopy, LlmAgentJob};
use troupe_models::RateLimitedModel;
use troupe_protocol::TraceContext;
use troupe_runtime::Directory;

/// How long the page waits for an agent's conversation: it is answered between requests, so a
/// long request holds it up.
const CONVERSATION_TIMEOUT: Duration = Duration::from_secs(60);

/// A live team.
pub(crate) struct Live {
    pub(crate) directory: Directory,
    /// The rate limiters whose waits the view reports, by name.
    pub(crate) rate_limits: Vec<(String, RateLimitedModel)>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("rate_limits", &self.rate_limits.len())
            .finish_non_exhaustive()
    }
}

/// Where the view reads an agent's conversation, and what it may change.
#[derive(Debug)]
pub(crate) enum Source {
    /// A running team: asked, and acted on.
    Live(Live),
    /// A finished run: its session log's one agent (`None` for a trace file, which keeps no
    /// conversation).
    Finished(Option<(String, ConversationCopy)>),
}

/// Why a request could not be answered, as its status and text.
pub(crate) type Refusal = (StatusCode, String);

impl Source {
    /// The conversation and archive of `agent`: asked of a live agent (between its requests),
    /// or the finished run's.
    pub(crate) async fn copy(&self, agent: &str) -> Result<ConversationCopy, Refusal> {
        match self {
            Source::Live(live) => live
                .directory
                .ask_job(
                    agent,
                    LlmAgentJob::Conversation,
                    TraceContext::new_root(),
                    CONVERSATION_TIMEOUT,
                )
                .await
                .map_err(|e| (StatusCode::NOT_FOUND, format!("{agent}: {e}"))),
            Source::Finished(Some((name, copy))) if name == agent => Ok(copy.clone()),
            Source::Finished(_) => Err((
                StatusCode::NOT_FOUND,
                format!("this run kept no conversation of {agent}"),
            )),
        }
    }

    /// The live team, or why a finished run cannot be acted on.
    pub(crate) fn live(&self) -> Result<&Live, Refusal> {
        match self {
            Source::Live(live) => Ok(live),
            Source::Finished(_) => Err((
                StatusCode::CONFLICT,
                "a finished run is read-only".to_string(),
            )),
        }
    }
}
