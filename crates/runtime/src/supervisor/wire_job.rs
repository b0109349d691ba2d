//! Typed jobs that can cross nodes: a [`WireJob`] travels as its serde form, under a versioned
//! kind name, and a team that accepts it ([`Directory::accept_wire_job`]) runs it for other
//! nodes exactly as a local [`Directory::ask_job`] would.
//!
//! Most jobs hold things that cannot leave a process (models, caches, closures); a job type that
//! can opt in implements [`WireJob`]. The runtime only (de)serializes: which node a job goes to
//! is the cluster's business, behind [`RemoteAgents`](crate::RemoteAgents).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::supervisor::behavior::AgentError;
use crate::supervisor::directory::{AskError, Directory};
use crate::supervisor::job::Reply;
use troupe_protocol::TraceContext;

/// A job whose request and reply can travel between nodes as JSON: the request's serde form
/// travels, and the receiving node turns it into the variant of the behaviour's job enum
/// ([`WireJob::into_job`]), so a job from another node takes the same road as a local one.
///
/// ```
/// use troupe_runtime::{Reply, WireJob};
/// enum CounterJob {
///     Count(Vec<String>, Reply<usize>),
/// }
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Count(Vec<String>);
/// impl WireJob for Count {
///     const KIND: &'static str = "example.count/1";
///     type Reply = usize;
///     type Job = CounterJob;
///     fn into_job(self, reply: Reply<usize>) -> CounterJob {
///         CounterJob::Count(self.0, reply)
///     }
/// }
/// ```
pub trait WireJob: Serialize + DeserializeOwned + Send + 'static {
    /// The job's name on the wire, with a version (`troupe.compaction/1`): a node that does not
    /// know a kind refuses it by name.
    const KIND: &'static str;
    /// What the agent answers, as it travels back.
    type Reply: Serialize + DeserializeOwned + Send + 'static;
    /// The job enum of the behaviour that takes it.
    type Job: Send + 'static;
    /// The variant of [`WireJob::Job`] this request is, answering on `reply` (a behaviour that
    /// answers in another type adapts the port with [`Reply::map`]).
    fn into_job(self, reply: Reply<Self::Reply>) -> Self::Job;
}

type JobFuture = Pin<Box<dyn Future<Output = Result<String, AskError>> + Send>>;

/// Runs a job that arrived as JSON on a local agent; answers the reply as JSON.
type Runner =
    Arc<dyn Fn(Directory, String, &str, TraceContext, Duration) -> JobFuture + Send + Sync>;

/// The wire jobs a team accepts from other nodes, by kind (a directory extension).
#[derive(Default)]
pub(crate) struct WireJobs(Mutex<HashMap<&'static str, Runner>>);

impl Directory {
    /// Let other nodes give this team's agents jobs of type `J` (each is handled as a local
    /// [`Directory::ask_job`], on whichever agent it names).
    pub fn accept_wire_job<J: WireJob>(&self) {
        let runner: Runner = Arc::new(|directory, agent, payload, trace, timeout| {
            let job = serde_json::from_str::<J>(payload);
            Box::pin(async move {
                let job = job.map_err(|e| AskError::Agent {
                    name: agent.clone(),
                    error: AgentError::Refused(format!("malformed `{}` job: {e}", J::KIND)),
                })?;
                let reply = directory
                    .ask_job(&agent, |reply| job.into_job(reply), trace, timeout)
                    .await?;
                serde_json::to_string(&reply).map_err(|e| AskError::Agent {
                    name: agent,
                    error: AgentError::Failed(format!("its reply cannot be sent: {e}")),
                })
            })
        });
        let jobs = self.extension(WireJobs::default);
        troupe_protocol::sync::lock(&jobs.0).insert(J::KIND, runner);
    }

    /// Run a job of kind `kind` that arrived from another node (its JSON in `payload`) on the
    /// local agent `agent`; the reply as JSON. Called by a cluster's gateway.
    ///
    /// # Errors
    /// [`AskError::Agent`] with a refusal when this team does not accept `kind` or the payload
    /// is not one; every error of [`Directory::ask_job`].
    pub async fn run_wire_job(
        &self,
        agent: &str,
        kind: &str,
        payload: &str,
        trace: TraceContext,
        timeout: Duration,
    ) -> Result<String, AskError> {
        let runner = {
            let jobs = self.extension(WireJobs::default);
            troupe_protocol::sync::lock(&jobs.0).get(kind).cloned()
        };
        let Some(runner) = runner else {
            return Err(AskError::Agent {
                name: agent.to_string(),
                error: AgentError::Refused(format!("this node takes no `{kind}` jobs")),
            });
        };
        runner(self.clone(), agent.to_string(), payload, trace, timeout).await
    }

    /// Give `name` a [`WireJob`]: a local agent first (as [`Directory::ask_job`]), else the agent
    /// of that name on another node of the cluster.
    ///
    /// # Errors
    /// Every [`AskError`] of [`Directory::ask_job`], and for a remote agent
    /// [`AskError::NodeDown`], [`AskError::Remote`] (including a reply this build cannot read).
    pub async fn ask_wire_job<J: WireJob>(
        &self,
        name: &str,
        job: J,
        trace: TraceContext,
        timeout: Duration,
    ) -> Result<J::Reply, AskError> {
        let Some(remote) = self.remote_for(name) else {
            return self
                .ask_job(name, |reply| job.into_job(reply), trace, timeout)
                .await;
        };
        let node = remote.locate(name).unwrap_or_default();
        let payload = serde_json::to_string(&job).map_err(|e| AskError::Remote {
            node: node.clone(),
            reason: format!("the `{}` job cannot be sent: {e}", J::KIND),
        })?;
        let reply = remote
            .ask_job(name, J::KIND, payload, trace, timeout)
            .await?;
        serde_json::from_str(&reply).map_err(|e| AskError::Remote {
            node,
            reason: format!("unreadable `{}` reply: {e}", J::KIND),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde::Deserialize;

    use super::*;
    use crate::supervisor::behavior::{AgentBehavior, AgentContext, AgentRequest, Checkpoint};
    use crate::supervisor::job::JobRequest;
    use crate::{Team, TeamConfig};

    enum CounterJob {
        Count(Vec<String>, Reply<usize>),
    }

    #[derive(Serialize, Deserialize)]
    struct Count(Vec<String>);

    impl WireJob for Count {
        const KIND: &'static str = "test.count/1";
        type Reply = usize;
        type Job = CounterJob;
        fn into_job(self, reply: Reply<usize>) -> CounterJob {
            CounterJob::Count(self.0, reply)
        }
    }

    struct Counter;

    #[async_trait]
    impl AgentBehavior for Counter {
        async fn handle(
            &mut self,
            _: AgentRequest,
            _: &AgentContext,
        ) -> Result<String, AgentError> {
            Ok(String::new())
        }
        async fn handle_job(
            &mut self,
            job: JobRequest,
            ctx: &AgentContext,
        ) -> Result<(), AgentError> {
            match job.open::<CounterJob>(&ctx.name)? {
                CounterJob::Count(items, reply) => reply.send(items.len()),
            }
            Ok(())
        }
        fn checkpoint(&self) -> Checkpoint {
            Checkpoint::default()
        }
    }

    #[tokio::test]
    async fn an_accepted_wire_job_runs_and_unknown_or_malformed_ones_are_refused_by_name() {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        team.spawn(
            "counter",
            Arc::new(|_| Ok(Box::new(Counter) as Box<dyn AgentBehavior>)),
        )
        .await
        .unwrap();
        let directory = team.directory();
        let run = |kind: &'static str, payload: &'static str| {
            directory.run_wire_job(
                "counter",
                kind,
                payload,
                TraceContext::new_root(),
                Duration::from_secs(5),
            )
        };
        // Not accepted yet: refused, naming the kind.
        let refused = run(Count::KIND, r#"["a"]"#).await.unwrap_err();
        assert!(
            refused.to_string().contains("takes no `test.count/1` jobs"),
            "{refused}"
        );

        directory.accept_wire_job::<Count>();
        assert_eq!(run(Count::KIND, r#"["a","b"]"#).await.unwrap(), "2");
        let malformed = run(Count::KIND, r#"{"not": "a list"}"#).await.unwrap_err();
        assert!(
            malformed
                .to_string()
                .contains("malformed `test.count/1` job"),
            "{malformed}"
        );
        // Locally, ask_wire_job is ask_job.
        let local = directory
            .ask_wire_job(
                "counter",
                Count(vec!["x".into()]),
                TraceContext::new_root(),
                Duration::from_secs(5),
            )
            .await;
        assert_eq!(local, Ok(1));
        team.shutdown().await;
    }
}
