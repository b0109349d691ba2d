//! A finished run's session log, read-only: its agent's conversation (messages, tool calls,
//! summaries and stubs, pins) and its last compaction.

use std::path::Path;

use troupe_agents::ConversationCopy;
use troupe_compaction::Archive;
use troupe_protocol::{CompactionMode, Event, EventRecord};
use troupe_session::SessionStore;

use crate::config::UiConfig;
use crate::conversation::ConversationView;
use crate::error::UiError;
use crate::feed::Feed;
use crate::server::UiServer;
use crate::source::Source;
use crate::view::View;

/// Serve a session log (`troupe chat`'s, or an agent's `AgentSpec::session`) of `store`
/// read-only.
///
/// # Errors
/// [`UiError::Session`] when the log cannot be read; otherwise as [`crate::serve`].
pub async fn serve_session(
    store: &SessionStore,
    path: &Path,
    config: UiConfig,
) -> Result<UiServer, UiError> {
    let owned = path.to_path_buf();
    let store = store.clone();
    let session = tokio::task::spawn_blocking(move || store.load(&owned))
        .await
        .map_err(|e| UiError::Session {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?
        .map_err(|e| UiError::Session {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    let agent = session.agent.clone().unwrap_or_else(|| "agent".to_string());
    let feed = Feed::new(
        View::new(config.marks, config.history, true),
        config.viewer_queue,
    );
    if let Some(report) = session.last_report.clone() {
        // Told as the event it was, so the same reducer shows it.
        let record = EventRecord {
            seq: 1,
            at_ms: 0,
            trace_id: None,
            event: Event::CompactionFinished {
                agent: agent.clone(),
                report: Box::new(report),
                // A session log keeps the report, not how the agent took it.
                mode: CompactionMode::Blocking,
            },
        };
        feed.update(|view| view.apply(record));
    }
    let copy = ConversationCopy {
        conversation: session.conversation,
        archive: Archive::from(session.archive_entries),
    };
    let conversation = ConversationView::of(&agent, &copy);
    let model = session.model.clone();
    feed.update(|view| view.set_conversation(conversation, model));
    UiServer::start(&config, feed, None, Source::Finished(Some((agent, copy)))).await
}
