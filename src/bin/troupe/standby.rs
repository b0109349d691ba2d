//! `troupe node --standby AGENT`: the config's agent is not started here; the node watches it
//! and takes it over when no connected node hosts it and its log's lease in the shared store is
//! free — its node was lost (killed, or frozen past its lease). The takeover claims the lease
//! (epoch + 1: the lost node's writes are refused from then on), starts the agent from its
//! log, publishes it, and resumes the request it had in flight from its last committed step,
//! exactly as a restarted process does; askers waiting on the lost node retry here under the
//! same request id (`--failover`), and the agent answers them from its log.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;
use troupe::runtime::{Directory, EventBus, TeamSpawner};
use troupe::session::SessionStore;
use troupe::{AgentSpec, Event, LlmAgent};

/// What a takeover needs of the node's team.
pub(crate) struct TeamParts {
    pub(crate) spawner: TeamSpawner,
    pub(crate) directory: Directory,
    pub(crate) events: EventBus,
}

/// An agent this node may take over.
pub(crate) struct Standby {
    pub(crate) spec: AgentSpec,
    pub(crate) log: PathBuf,
    pub(crate) store: SessionStore,
}

/// A takeover done, waiting for the node to publish the agent (then `published` is answered).
pub(crate) struct TookOver {
    pub(crate) agent: String,
    pub(crate) published: oneshot::Sender<()>,
}

/// Watch `standby` every `every` until this node hosts it; each takeover is sent on `took`.
pub(crate) async fn watch(
    team: TeamParts,
    node: String,
    standby: Standby,
    every: Duration,
    took: mpsc::Sender<TookOver>,
) {
    let name = standby.spec.name.clone();
    let mut last_home: Option<String> = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Some(home) = team.directory.remote_node_of(&name) {
            last_home = Some(home);
            continue;
        }
        let from = last_home.clone().unwrap_or_else(|| "unknown".to_string());
        let span = tracing::info_span!("takeover", agent = %name, from = %from, to = %node);
        let taken = async {
            // Refused while another node holds the lease (alive, or not yet expired).
            // The road every agent is spawned by: its budget joins the team's too.
            if let Err(e) = troupe::spawn_agent_with(&team.spawner, standby.spec.clone()).await {
                tracing::debug!(error = %e, "not taken over yet");
                return false;
            }
            let (published, done) = oneshot::channel();
            let took_over = TookOver {
                agent: name.clone(),
                published,
            };
            if took.send(took_over).await.is_err() {
                return true;
            }
            let _ = done.await;
            let (log, store) = (standby.log.clone(), standby.store.clone());
            let step = tokio::task::spawn_blocking(move || store.steps(&log))
                .await
                .ok()
                .and_then(Result::ok)
                .and_then(|steps| steps.last().map(|s| s.id))
                .unwrap_or(0);
            tracing::info!(step, "took the agent over: resuming from its log");
            eprintln!("node `{node}` took agent `{name}` over from `{from}` at step {step}");
            team.events.publish(
                None,
                Event::AgentMoved {
                    agent: name.clone(),
                    from: from.clone(),
                    to: node.clone(),
                    step,
                },
            );
            match team
                .directory
                .agent::<LlmAgent>(name.as_str())
                .resume_request()
                .await
            {
                Ok(Some(Ok(_))) => tracing::info!("the request in flight is finished here"),
                Ok(Some(Err(e))) => tracing::warn!(error = %e, "the resumed request failed"),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "could not resume the request in flight"),
            }
            true
        }
        .instrument(span)
        .await;
        if taken {
            return;
        }
    }
}
