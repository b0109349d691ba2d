//! The store thread: a thread of its own with a current-thread tokio runtime and a pool of
//! Postgres connections, so that every [`CommitLog`](crate::store::CommitLog) call stays
//! synchronous (a commit waits for its row as a file commit waits for its fsync) whatever
//! runtime, if any, the caller runs on. Each call is a task on that runtime; the caller blocks on
//! a channel of the standard library until it answers or its deadline passes.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::mpsc;

/// A job for the store thread: given the pool, a future it runs as a task of its own.
type Job = Box<dyn FnOnce(Pool) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Why a call to the store thread did not answer.
#[derive(Debug)]
pub(super) enum CallError {
    /// The thread is gone (it could not start its runtime, or the store was dropped).
    Gone,
    /// No answer within the deadline.
    Late(Duration),
}

/// The handle callers hold; the thread ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub(super) struct Worker {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Worker {
    /// Start the thread with a pool on `config` of at most `connections` connections.
    pub(super) fn start(
        config: tokio_postgres::Config,
        connections: usize,
    ) -> std::io::Result<Worker> {
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("troupe-session-store".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let manager = Manager::from_config(
                        config,
                        tokio_postgres::NoTls,
                        ManagerConfig {
                            recycling_method: RecyclingMethod::Fast,
                        },
                    );
                    let pool = match Pool::builder(manager)
                        .max_size(connections)
                        .runtime(Runtime::Tokio1)
                        .wait_timeout(Some(Duration::from_secs(30)))
                        .create_timeout(Some(Duration::from_secs(10)))
                        .build()
                    {
                        Ok(pool) => pool,
                        // Unreachable with a runtime given; the callers then see `Gone`.
                        Err(e) => {
                            tracing::error!(error = %e, "the session store's pool failed to build");
                            return;
                        }
                    };
                    while let Some(job) = queue.recv().await {
                        tokio::spawn(job(pool.clone()));
                    }
                    pool.close();
                });
            })?;
        Ok(Worker { jobs })
    }

    /// Run `work` on the store thread and wait (blocking this thread) for its answer, at most
    /// `deadline`.
    pub(super) fn call<T, F>(
        &self,
        deadline: Duration,
        work: impl FnOnce(Pool) -> F + Send + 'static,
    ) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let (answer, answered) = std_mpsc::sync_channel(1);
        let job: Job = Box::new(move |pool| {
            Box::pin(async move {
                let out = tokio::time::timeout(deadline, work(pool)).await;
                // The caller may have given up: nobody to tell then.
                let _ = answer.send(out.ok());
            })
        });
        self.jobs.send(job).map_err(|_| CallError::Gone)?;
        // The task's own timeout answers first; this one only covers a thread that stopped.
        match answered.recv_timeout(deadline + Duration::from_secs(5)) {
            Ok(Some(out)) => Ok(out),
            Ok(None) => Err(CallError::Late(deadline)),
            Err(std_mpsc::RecvTimeoutError::Timeout) => Err(CallError::Late(deadline)),
            Err(std_mpsc::RecvTimeoutError::Disconnected) => Err(CallError::Gone),
        }
    }

    /// Run `work` on the store thread without waiting for it.
    pub(super) fn spawn<F>(&self, work: impl FnOnce(Pool) -> F + Send + 'static)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let job: Job = Box::new(move |pool| Box::pin(work(pool)));
        let _ = self.jobs.send(job);
    }
}
