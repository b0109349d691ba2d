//! Typed jobs, ractor's idiom: a behaviour's jobs are one enum whose variants carry their answer
//! port, a [`Reply<T>`] (like ractor's `RpcReplyPort`).
//!
//! [`Directory::ask_job`](crate::Directory::ask_job) builds the variant around a fresh port and
//! waits for what comes back on it. The mailbox carries the job type-erased; the receiving
//! behaviour opens the [`JobRequest`] once as its own enum ([`JobRequest::open`], the one type
//! check, as ractor's `ActorRef` does for a message) and dispatches with an exhaustive `match`,
//! so a job added to the enum is a compile error until it is handled. A job can only be answered
//! with its own reply type: the port in its variant takes nothing else.

use std::any::{Any, type_name};
use std::fmt;

use tokio::sync::oneshot;

use crate::supervisor::behavior::AgentError;
use troupe_protocol::TraceContext;

/// The answer port of one job: the variant of a job enum carries it, the behaviour answers
/// through it once. Dropping it unanswered tells the asker so (an error, never a hang).
#[must_use = "a job is answered with Reply::send; dropping the port tells the asker no answer came"]
pub struct Reply<T> {
    port: Box<dyn FnOnce(T) + Send>,
    /// Closes once the asker stopped waiting (it timed out, or its future was dropped): see
    /// [`Reply::abandoned`]. `None` for a port whose asker cannot be watched, or once taken.
    waited_for: Option<oneshot::Receiver<()>>,
}

/// The asker's side of a [`Reply`]: the answer, and — while this lives — the sign that the
/// asker still waits for it.
pub(crate) struct Answer<T> {
    answer: oneshot::Receiver<T>,
    waiting: oneshot::Sender<()>,
}

impl<T> Answer<T> {
    /// The answer, once sent; an error when the port was dropped unanswered. Dropping this
    /// future before it ends tells the port its asker is gone ([`Reply::abandoned`]).
    pub(crate) async fn received(self) -> Result<T, oneshot::error::RecvError> {
        let Answer { answer, waiting } = self;
        let answer = answer.await;
        drop(waiting);
        answer
    }
}

impl<T> fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reply<{}>", type_name::<T>())
    }
}

impl<T: Send + 'static> Reply<T> {
    /// A port and the receiver its answer arrives on.
    pub(crate) fn channel() -> (Reply<T>, Answer<T>) {
        let (tx, answer) = oneshot::channel();
        let (waiting, waited_for) = oneshot::channel();
        let reply = Reply {
            port: Box::new(move |answer| {
                // The asker may have timed out and gone; that is not the behaviour's failure.
                let _ = tx.send(answer);
            }),
            waited_for: Some(waited_for),
        };
        (reply, Answer { answer, waiting })
    }

    /// Answer the job.
    pub fn send(self, answer: T) {
        (self.port)(answer);
    }

    /// Resolves once the asker stopped waiting for the answer — it timed out, or was
    /// cancelled — so a long job (a compaction's model calls) can stop instead of running on
    /// for nobody. Never resolves for a port whose asker cannot be watched (a job from another
    /// node), nor when called a second time. The port can still be answered meanwhile.
    pub fn abandoned(&mut self) -> impl Future<Output = ()> + Send + 'static {
        let waited_for = self.waited_for.take();
        async move {
            match waited_for {
                // Nothing is ever sent on it: it ends when the asker's side drops.
                Some(waited_for) => {
                    let _ = waited_for.await;
                }
                None => std::future::pending().await,
            }
        }
    }

    /// A port for answers of another type, converted by `convert` into this one's: how a job
    /// from another node (answered in its wire form) is handed to a behaviour as the same
    /// variant a local job is.
    pub fn map<U: 'static>(mut self, convert: impl FnOnce(U) -> T + Send + 'static) -> Reply<U> {
        let waited_for = self.waited_for.take();
        Reply {
            port: Box::new(move |answer| self.send(convert(answer))),
            waited_for,
        }
    }
}

/// A job on its way to a behaviour: open it with [`JobRequest::open`] as the behaviour's own job
/// enum.
pub struct JobRequest {
    payload: Box<dyn Any + Send>,
    job_type: &'static str,
    trace: TraceContext,
}

impl fmt::Debug for JobRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobRequest")
            .field("job_type", &self.job_type)
            .field("trace", &self.trace)
            .finish()
    }
}

impl JobRequest {
    /// Wrap `job` for the mailbox.
    pub(crate) fn new<J: Send + 'static>(job: J, trace: TraceContext) -> Self {
        JobRequest {
            payload: Box::new(job),
            job_type: type_name::<J>(),
            trace,
        }
    }

    /// The trace the job belongs to (the caller's request; events of the job carry its id).
    pub fn trace(&self) -> TraceContext {
        self.trace
    }

    /// The job's Rust type name, for error messages.
    pub fn job_type(&self) -> &'static str {
        self.job_type
    }

    /// Take the job out as `J`, the job enum of the behaviour named `agent`.
    ///
    /// # Errors
    /// A refusal naming the agent and the job's type, when the request holds no `J` (the
    /// asker's reply port is dropped with it, and the asker gets the refusal).
    pub fn open<J: 'static>(self, agent: &str) -> Result<J, AgentError> {
        match self.payload.downcast::<J>() {
            Ok(job) => Ok(*job),
            Err(_) => Err(refusal(agent, self.job_type)),
        }
    }

    /// The refusal for a job this behaviour does not take, naming the job type.
    pub fn refuse(self, agent: &str) -> AgentError {
        refusal(agent, self.job_type)
    }
}

fn refusal(agent: &str, job_type: &str) -> AgentError {
    AgentError::Refused(format!(
        "agent `{agent}` does not take jobs of type {job_type}"
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;

    use super::*;
    use crate::supervisor::behavior::{AgentBehavior, AgentContext, AgentRequest, Checkpoint};
    use crate::{AskError, Team, TeamConfig};

    /// A behaviour's jobs, ractor-style: each variant carries its typed answer port.
    #[derive(Debug)]
    enum CalcJob {
        Double(u32, Reply<u64>),
        Shout(String, Reply<String>),
        /// Answered later, by a task the behaviour hands the port to.
        Later(Reply<&'static str>),
        /// Never answered: the port is dropped.
        Forget(Reply<u8>),
        /// Refused with the behaviour's own error.
        Fail(Reply<()>),
    }

    /// Another behaviour's job: `Calc` refuses it.
    #[derive(Debug)]
    struct OtherJob(#[expect(dead_code, reason = "never opened")] Reply<()>);

    struct Calc;

    #[async_trait]
    impl AgentBehavior for Calc {
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
            match job.open::<CalcJob>(&ctx.name)? {
                CalcJob::Double(n, reply) => reply.send(u64::from(n) * 2),
                CalcJob::Shout(text, reply) => reply.send(text.to_uppercase()),
                CalcJob::Later(reply) => {
                    tokio::spawn(async move { reply.send("later") });
                }
                CalcJob::Forget(reply) => drop(reply),
                CalcJob::Fail(reply) => {
                    drop(reply);
                    return Err(AgentError::Refused("not now".into()));
                }
            }
            Ok(())
        }
        fn checkpoint(&self) -> Checkpoint {
            Checkpoint::default()
        }
    }

    async fn calc_team() -> Team {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        team.spawn(
            "calc",
            Arc::new(|_| Ok(Box::new(Calc) as Box<dyn AgentBehavior>)),
        )
        .await
        .unwrap();
        team
    }

    const WAIT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn each_variant_is_answered_with_its_own_reply_type() {
        let team = calc_team().await;
        let dir = team.directory();
        let root = TraceContext::new_root;
        let doubled = dir.ask_job("calc", |r| CalcJob::Double(21, r), root(), WAIT);
        assert_eq!(doubled.await, Ok(42));
        let shout = dir.ask_job("calc", |r| CalcJob::Shout("hi".into(), r), root(), WAIT);
        assert_eq!(shout.await.unwrap(), "HI");
        // A port handed on is answered after `handle_job` returned.
        assert_eq!(
            dir.ask_job("calc", CalcJob::Later, root(), WAIT).await,
            Ok("later")
        );
        team.shutdown().await;
    }

    #[tokio::test]
    async fn an_unanswered_job_a_refused_one_and_a_foreign_one_are_errors_not_hangs() {
        let team = calc_team().await;
        let dir = team.directory();
        let root = TraceContext::new_root;
        let forgot = dir.ask_job("calc", CalcJob::Forget, root(), WAIT).await;
        let err = forgot.unwrap_err().to_string();
        assert!(err.contains("without answering"), "{err}");
        assert!(err.contains("CalcJob"), "{err}");

        let failed = dir.ask_job("calc", CalcJob::Fail, root(), WAIT).await;
        match failed.unwrap_err() {
            AskError::Agent { name, error } => {
                assert_eq!(name, "calc");
                assert_eq!(error, AgentError::Refused("not now".into()));
            }
            other => panic!("{other}"),
        }

        let foreign = dir.ask_job("calc", OtherJob, root(), WAIT).await;
        let err = foreign.unwrap_err().to_string();
        assert!(err.contains("`calc`"), "{err}");
        assert!(err.contains("OtherJob"), "{err}");
        team.shutdown().await;
    }

    #[tokio::test]
    async fn a_mapped_port_converts_the_answer_on_its_way() {
        let (reply, answer) = Reply::<String>::channel();
        reply.map(|n: u32| n.to_string()).send(7);
        assert_eq!(answer.received().await.unwrap(), "7");
    }

    #[tokio::test]
    async fn a_port_hears_when_its_asker_stops_waiting() {
        use futures::FutureExt;
        let (mut reply, answer) = Reply::<u32>::channel();
        let mut abandoned = Box::pin(reply.abandoned());
        assert!((&mut abandoned).now_or_never().is_none(), "the asker waits");
        // A second watch never fires: the first one took it.
        assert!(reply.abandoned().now_or_never().is_none());
        // The asker's wait is dropped before the answer came: a timeout, a cancelled task.
        let waiting = answer.received();
        drop(waiting);
        tokio::time::timeout(Duration::from_secs(5), abandoned)
            .await
            .expect("the port heard that its asker is gone");
        // Answering a gone asker is no failure.
        reply.send(1);

        // Through a mapped port (a job from another node is handed on so) the same.
        let (reply, answer) = Reply::<u32>::channel();
        let mut mapped = reply.map(|n: u8| u32::from(n));
        let abandoned = mapped.abandoned();
        drop(answer);
        tokio::time::timeout(Duration::from_secs(5), abandoned)
            .await
            .expect("the mapped port heard it too");
    }
}
