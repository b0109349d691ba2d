//! Typed handles: `team.agent::<LlmAgent>("coder")` answers the handle of an agent of a known
//! behaviour, whose methods are that behaviour's jobs — so sending an agent a job enum it does
//! not take is a compile error, not a refusal at run time.
//!
//! A behaviour opts in with [`AgentKind`]: its job enum and its handle type (defined beside the
//! behaviour, in its own crate, with a method per job). The handle wraps an [`AgentRef`], which
//! sends only that job enum:
//!
//! ```compile_fail
//! # use troupe_runtime::{AgentRef, AgentKind, Reply};
//! # use std::time::Duration;
//! struct OtherJob(Reply<()>);
//! async fn wrong<B: AgentKind>(agent: AgentRef<'_, B>) {
//!     // `OtherJob` is not `B::Job`: this does not compile.
//!     let _ = agent.ask_job(OtherJob, Duration::from_secs(1)).await;
//! }
//! ```

use std::marker::PhantomData;
use std::time::Duration;

use crate::supervisor::behavior::AgentBehavior;
use crate::supervisor::directory::{AskError, Directory};
use crate::supervisor::job::Reply;
use crate::supervisor::team::Team;
use troupe_protocol::TraceContext;

/// A behaviour that typed handles address ([`Team::agent`]).
pub trait AgentKind: AgentBehavior + Sized {
    /// The job enum its [`AgentBehavior::handle_job`] opens.
    type Job: Send + 'static;
    /// Its handle: the behaviour's jobs as methods, over an [`AgentRef`].
    type Handle<'t>;

    /// The handle of the agent `agent` names.
    fn typed_handle(agent: AgentRef<'_, Self>) -> Self::Handle<'_>;
}

/// An agent of a team by name, known to run behaviour `B`: it sends `B`'s jobs only. It holds
/// the team's [`Directory`], so a server that keeps a clone of the directory (not the team)
/// builds the same handles ([`Directory::agent`]).
pub struct AgentRef<'t, B> {
    directory: &'t Directory,
    name: String,
    behavior: PhantomData<fn() -> B>,
}

impl<B> std::fmt::Debug for AgentRef<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRef")
            .field("name", &self.name)
            .field("behavior", &std::any::type_name::<B>())
            .finish_non_exhaustive()
    }
}

impl<B> Clone for AgentRef<'_, B> {
    fn clone(&self) -> Self {
        AgentRef {
            directory: self.directory,
            name: self.name.clone(),
            behavior: PhantomData,
        }
    }
}

impl<'t, B: AgentKind> AgentRef<'t, B> {
    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The directory of the team the agent belongs to.
    pub fn directory(&self) -> &'t Directory {
        self.directory
    }

    /// Give the agent the job `job` builds around a fresh answer port, as a new trace, and
    /// wait up to `timeout` for its answer ([`crate::Directory::ask_job`]).
    ///
    /// # Errors
    /// Every [`AskError`] of [`crate::Directory::ask_job`]: the agent is not in the team, it
    /// failed, timed out, or ended the job without answering.
    pub async fn ask_job<T: Send + 'static>(
        &self,
        job: impl FnOnce(Reply<T>) -> B::Job,
        timeout: Duration,
    ) -> Result<T, AskError> {
        self.directory
            .ask_job(&self.name, job, TraceContext::new_root(), timeout)
            .await
    }
}

impl Team {
    /// The handle of `name`, an agent running behaviour `B`: `B`'s jobs as methods
    /// (`team.agent::<LlmAgent>("coder").compact(None)`). Nothing is asked until a method is
    /// called; an agent that is not in the team, or runs another behaviour, answers that
    /// call with an error.
    pub fn agent<B: AgentKind>(&self, name: impl Into<String>) -> B::Handle<'_> {
        self.directory().agent::<B>(name)
    }
}

impl Directory {
    /// [`Team::agent`] from the team's directory: the same handle, for a holder of a clone of
    /// the directory that cannot hold the team (a server answering a page).
    pub fn agent<B: AgentKind>(&self, name: impl Into<String>) -> B::Handle<'_> {
        B::typed_handle(AgentRef {
            directory: self,
            name: name.into(),
            behavior: PhantomData,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::*;
    use crate::{AgentContext, AgentError, AgentRequest, Checkpoint, JobRequest, TeamConfig};

    /// A counter's jobs.
    #[derive(Debug)]
    enum CounterJob {
        Add(u64, Reply<u64>),
    }

    #[derive(Default)]
    struct Counter(u64);

    #[async_trait]
    impl AgentBehavior for Counter {
        async fn handle(
            &mut self,
            _: AgentRequest,
            _: &AgentContext,
        ) -> Result<String, AgentError> {
            Ok(self.0.to_string())
        }
        async fn handle_job(
            &mut self,
            job: JobRequest,
            ctx: &AgentContext,
        ) -> Result<(), AgentError> {
            match job.open::<CounterJob>(&ctx.name)? {
                CounterJob::Add(n, reply) => {
                    self.0 += n;
                    reply.send(self.0);
                }
            }
            Ok(())
        }
        fn checkpoint(&self) -> Checkpoint {
            Checkpoint::default()
        }
    }

    /// The counter's handle: its one job as a method.
    struct CounterHandle<'t>(AgentRef<'t, Counter>);

    impl CounterHandle<'_> {
        async fn add(&self, n: u64) -> Result<u64, AskError> {
            let job = |reply| CounterJob::Add(n, reply);
            self.0.ask_job(job, Duration::from_secs(5)).await
        }
    }

    impl AgentKind for Counter {
        type Job = CounterJob;
        type Handle<'t> = CounterHandle<'t>;
        fn typed_handle(agent: AgentRef<'_, Self>) -> CounterHandle<'_> {
            CounterHandle(agent)
        }
    }

    #[tokio::test]
    async fn a_handle_sends_its_behaviours_jobs_by_name() {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        let factory = |_| Ok(Box::new(Counter::default()) as Box<dyn AgentBehavior>);
        team.spawn("counter", Arc::new(factory)).await.unwrap();
        let counter = team.agent::<Counter>("counter");
        assert_eq!(counter.0.name(), "counter");
        assert_eq!(counter.add(2).await, Ok(2));
        assert_eq!(counter.add(3).await, Ok(5));
        // A name the team does not hold answers an error when asked, not when the handle is made.
        let missing = team.agent::<Counter>("nobody");
        assert!(matches!(
            missing.add(1).await,
            Err(AskError::NoSuchAgent { .. })
        ));
        team.shutdown().await;
    }
}
