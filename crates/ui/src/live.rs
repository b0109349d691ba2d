//! A running team's view: its events folded in as they come, `/context` asked of an LLM agent
//! whenever it falls idle (for the meter's window and exact tokens), its approvals answered.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};
use troupe_agents::LlmAgentJob;
use troupe_protocol::{Event, EventRecord, TraceContext};
use troupe_runtime::{Directory, Team};

use crate::config::UiConfig;
use crate::error::UiError;
use crate::feed::Feed;
use crate::server::UiServer;
use crate::source::{Live, Source};
use crate::view::View;

/// How long a `/context` question may wait for an agent (it is asked when the agent falls
/// idle, so it is answered at once unless a new request came first).
const STATS_TIMEOUT: Duration = Duration::from_secs(30);

/// Serve a live view of `team` (see the crate docs). The team goes on as before; the view
/// only subscribes to its events and answers its approval desk.
///
/// # Errors
/// [`UiError`] when the address cannot be bound or no token can be drawn.
pub async fn serve(team: &Team, config: UiConfig) -> Result<UiServer, UiError> {
    let feed = Feed::new(
        View::new(config.marks, config.history, false),
        config.viewer_queue,
    );
    // Subscribed before the agents are listed, so nothing falls between.
    let events = team.subscribe();
    let names = team.directory().names();
    for name in &names {
        feed.update(|view| view.add_agent(name));
    }
    let directory = team.directory().clone();
    let source = Source::Live(Live {
        directory: directory.clone(),
        rate_limits: config.rate_limits.clone(),
    });
    let server = UiServer::start(
        &config,
        feed.clone(),
        Some(team.approvals().clone()),
        source,
    )
    .await?;
    for name in names {
        tokio::spawn(ask_context(directory.clone(), feed.clone(), name));
    }
    tokio::spawn(pump(events, feed, directory, server.closed()));
    Ok(server)
}

/// Fold the team's events into the feed until the team or the server stops.
async fn pump(
    mut events: broadcast::Receiver<EventRecord>,
    feed: Arc<Feed>,
    directory: Directory,
    mut closed: watch::Receiver<bool>,
) {
    loop {
        let record = tokio::select! {
            _ = closed.wait_for(|closed| *closed) => return,
            record = events.recv() => record,
        };
        match record {
            Ok(record) => {
                let idle = falls_idle(&record.event).map(str::to_string);
                feed.update(|view| view.apply(record));
                if let Some(agent) = idle
                    && feed.read(|view| view.agent(&agent).is_some_and(|a| a.llm))
                {
                    tokio::spawn(ask_context(directory.clone(), feed.clone(), agent));
                }
            }
            Err(RecvError::Lagged(n)) => feed.missed(n),
            Err(RecvError::Closed) => return,
        }
    }
}

/// The agent an event leaves between requests, whose `/context` is then current.
fn falls_idle(event: &Event) -> Option<&str> {
    match event {
        Event::RequestFinished { agent, .. } | Event::CompactionApplied { agent, .. } => {
            Some(agent)
        }
        _ => None,
    }
}

/// Ask an agent its `/context`; an agent that is not an LLM agent refuses, and then the meter
/// reads the model calls' tokens only.
async fn ask_context(directory: Directory, feed: Arc<Feed>, agent: String) {
    let asked = directory
        .ask_job(
            &agent,
            LlmAgentJob::ContextStats,
            TraceContext::new_root(),
            STATS_TIMEOUT,
        )
        .await;
    if let Ok(stats) = asked {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        feed.update(|view| view.stats(&agent, at_ms, &stats));
    }
}
