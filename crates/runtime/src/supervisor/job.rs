//! Typed jobs: structured requests to an agent with a reply type fixed by the request type.
//!
//! A [`Job`] names its reply type. [`Directory::ask_job`](crate::Directory::ask_job) sends one and
//! returns `J::Reply`; the receiving behaviour opens the [`JobRequest`] as the job types it knows
//! and answers through the [`ReplyTo<J>`] that opening gave it, which only accepts `J::Reply`.
//! The mailbox carries the job type-erased, but no behaviour can answer a job with the wrong type:
//! the only way to make a [`JobReply`] is from the `ReplyTo` of the job being answered.

use std::any::{Any, type_name};
use std::fmt;
use std::marker::PhantomData;

use crate::supervisor::behavior::AgentError;
use crate::TraceContext;

/// A structured request an agent may accept besides text, and the type of its answer.
///
/// ```
/// use troupe_runtime::Job;
/// struct Count(Vec<String>);
/// impl Job for Count {
///     type Reply = usize;
/// }
/// ```
pub trait Job: Send + 'static {
    /// What the agent answers.
    type Reply: Send + 'static;
}

/// A job on its way to a behaviour: open it with [`JobRequest::open`] as each job type the
/// behaviour handles.
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
    pub(crate) fn new<J: Job>(job: J, trace: TraceContext) -> Self {
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

    /// Take the job out as a `J`, with the only handle that can answer it; a job of another type
    /// is given back unchanged, so the next type can be tried.
    ///
    /// # Errors
    /// The request itself, when it does not hold a `J`.
    pub fn open<J: Job>(self) -> Result<(J, ReplyTo<J>), JobRequest> {
        let JobRequest {
            payload,
            job_type,
            trace,
        } = self;
        match payload.downcast::<J>() {
            Ok(job) => Ok((*job, ReplyTo(PhantomData))),
            Err(payload) => Err(JobRequest {
                payload,
                job_type,
                trace,
            }),
        }
    }

    /// The refusal for a job this behaviour does not take, naming the job type.
    pub fn refuse(self, agent: &str) -> AgentError {
        AgentError::Refused(format!(
            "agent `{agent}` does not take jobs of type {}",
            self.job_type
        ))
    }
}

/// The answer slot of one opened job of type `J`: it accepts only `J::Reply`.
#[must_use = "a job must be answered with ReplyTo::answer"]
pub struct ReplyTo<J: Job>(PhantomData<fn() -> J>);

impl<J: Job> fmt::Debug for ReplyTo<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReplyTo<{}>", type_name::<J>())
    }
}

impl<J: Job> ReplyTo<J> {
    /// The behaviour's answer to the job.
    pub fn answer(self, reply: J::Reply) -> JobReply {
        JobReply(Box::new(reply))
    }
}

/// A behaviour's answer to a job, made only by [`ReplyTo::answer`].
pub struct JobReply(Box<dyn Any + Send>);

impl fmt::Debug for JobReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JobReply")
    }
}

impl JobReply {
    /// The typed reply. `ReplyTo<J>` only makes replies of `J::Reply`, so a mismatch means a
    /// behaviour answered one job with another job's reply slot.
    pub(crate) fn into_reply<J: Job>(self) -> Result<J::Reply, AgentError> {
        self.0.downcast::<J::Reply>().map(|r| *r).map_err(|_| {
            AgentError::Failed(format!(
                "the agent answered a {} with another job's reply",
                type_name::<J>()
            ))
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Double(u32);
    impl Job for Double {
        type Reply = u64;
    }
    #[derive(Debug)]
    struct Shout(String);
    impl Job for Shout {
        type Reply = String;
    }

    #[test]
    fn a_request_opens_as_its_own_type_only_and_the_reply_comes_back_typed() {
        let request = JobRequest::new(Shout("hi".into()), TraceContext::new_root());
        let request = request.open::<Double>().expect_err("not a Double");
        assert!(request.job_type().ends_with("Shout"));
        let (Shout(text), reply_to) = request.open::<Shout>().unwrap();
        let reply = reply_to.answer(text.to_uppercase());
        assert_eq!(reply.into_reply::<Shout>().unwrap(), "HI");
    }

    #[test]
    fn a_reply_read_as_another_jobs_reply_is_an_error_not_a_panic() {
        let (Double(n), reply_to) = JobRequest::new(Double(2), TraceContext::new_root())
            .open::<Double>()
            .unwrap();
        let err = reply_to
            .answer(u64::from(n) * 2)
            .into_reply::<Shout>()
            .unwrap_err();
        assert!(err.to_string().contains("another job's reply"), "{err}");
    }

    #[test]
    fn a_refusal_names_the_agent_and_the_job_type() {
        let err = JobRequest::new(Double(1), TraceContext::new_root()).refuse("coder");
        assert!(err.to_string().contains("`coder`"), "{err}");
        assert!(err.to_string().contains("Double"), "{err}");
    }
}
