//! The Postgres backend of a [`SessionStore`](crate::SessionStore): logs in a database every node
//! of a cluster reaches, so an agent's log outlives the machine that wrote it.
//!
//! A log is its commits, one row each (`troupe_session_commits`), holding the commit's exact
//! JSONL lines — the bytes a file log would hold — numbered from 0 as the log's steps are. A
//! row is inserted whole or not at all, and a log is read back by concatenating its rows and
//! running the same strict scanner as a file's ([`crate::scan`]), which also checks that every
//! row is exactly one commit: no half of a step ever loads.
//!
//! One writer per log: the writer holds the log's lease (`troupe_session_leases`, `lease.rs`),
//! taken with a new epoch, renewed on the store thread while held, released when the claim is
//! dropped; another owner may take it only once it expired. Every commit is inserted under a
//! `FOR SHARE` lock of the lease row at the writer's epoch, so a writer whose lease was taken
//! over is refused ([`SessionError::Fenced`]) and never writes after its successor began.
//!
//! Calls are synchronous, as a file's fsync is: they run on the store thread (`worker.rs`) and
//! the caller waits for the answer, at most [`PostgresOptions::deadline`].

mod commits;
mod lease;
mod schema;
mod worker;

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::config::Host;

use crate::error::SessionError;
use crate::records::Session;
use crate::steps::Step;
use crate::store::{Backend, Claimed};

use lease::Lease;
use worker::{CallError, Worker};

/// How a Postgres store is used: who this process is to the others, how long its leases run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// Who holds this store's leases, as others are told when refused (a node's name; default
    /// `pid N`).
    pub node: String,
    /// How long a lease runs without being renewed: how long a log stays claimed after its
    /// writer's process died or froze (default 10 s). Renewed every third of it.
    pub lease: Duration,
    /// The most connections the store opens at once (default 8).
    pub connections: usize,
    /// How long one call may take before it fails (default 10 s).
    pub deadline: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            node: format!("pid {}", std::process::id()),
            lease: Duration::from_secs(10),
            connections: 8,
            deadline: Duration::from_secs(10),
        }
    }
}

impl PostgresOptions {
    /// These options naming the holder `node`.
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.node = node.into();
        self
    }

    /// These options with leases of `lease`.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
}

/// What every claim and log of one store shares.
#[derive(Debug)]
pub(crate) struct Shared {
    worker: Worker,
    /// The database as shown in errors: no password.
    shown: String,
    /// This store's holder token in the lease table: unique to this store in this process.
    holder: String,
    node: String,
    lease: Duration,
    deadline: Duration,
    /// The leases this store holds, by log, renewed on the store thread.
    held: Arc<Mutex<HashMap<String, Arc<Lease>>>>,
}

impl Shared {
    /// A call on the store thread; its failure (a reason in words) is a [`SessionError::Store`]
    /// about `log`.
    fn call<T, F>(
        &self,
        log: &Path,
        work: impl FnOnce(deadpool_postgres::Pool) -> F + Send + 'static,
    ) -> Result<T, SessionError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, String>> + Send + 'static,
    {
        match self.worker.call(self.deadline, work) {
            Ok(out) => out.map_err(|reason| self.failed(log, &reason)),
            Err(CallError::Gone) => Err(self.failed(log, "the store's thread has stopped")),
            Err(CallError::Late(after)) => {
                Err(self.failed(log, &format!("no answer within {} ms", after.as_millis())))
            }
        }
    }

    /// A [`SessionError::Store`] about `log`.
    fn failed(&self, log: &Path, reason: &str) -> SessionError {
        SessionError::Store {
            path: log.to_path_buf(),
            store: self.shown.clone(),
            reason: reason.to_string(),
        }
    }
}

/// The log's name in the store: its path's text.
fn name_of(log: &Path) -> String {
    log.to_string_lossy().into_owned()
}

/// A failed statement in words, with the server's own message when it sent one.
fn sql_reason(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// The Postgres backend.
#[derive(Debug)]
pub(crate) struct Postgres {
    shared: Arc<Shared>,
}

impl Postgres {
    /// Connect to the database at `url`, bring its schema up to date and start renewing leases.
    pub(crate) fn connect(url: &str, options: PostgresOptions) -> Result<Postgres, SessionError> {
        let refused = |store: &str, reason: String| SessionError::Connect {
            store: store.to_string(),
            reason,
        };
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| refused("postgres://…", format!("not a Postgres URL: {e}")))?;
        let shown = shown(&config);
        if options.lease < Duration::from_millis(300) {
            return Err(refused(
                &shown,
                format!(
                    "a lease of {} ms is too short to be renewed in time (at least 300 ms)",
                    options.lease.as_millis()
                ),
            ));
        }
        config
            .application_name("troupe")
            .connect_timeout(Duration::from_secs(5))
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10));
        let worker = Worker::start(config, options.connections.max(1))
            .map_err(|e| refused(&shown, format!("cannot start the store thread: {e}")))?;
        let shared = Arc::new(Shared {
            worker,
            shown: shown.clone(),
            holder: lease::holder_token(),
            node: options.node,
            lease: options.lease,
            deadline: options.deadline,
            held: Arc::default(),
        });
        let migrated = shared
            .worker
            .call(options.deadline, |pool| async move {
                let mut client = pool.get().await.map_err(|e| e.to_string())?;
                schema::migrate(&mut client).await.map_err(|e| match e {
                    schema::SchemaError::Sql(e) => sql_reason(&e),
                    schema::SchemaError::Newer(v) => format!(
                        "its schema is version {v}, written by a newer troupe (this one knows {})",
                        schema::SCHEMA_VERSION
                    ),
                })
            })
            .map_err(|e| match e {
                CallError::Gone => "the store's thread has stopped".to_string(),
                CallError::Late(after) => format!("no answer within {} ms", after.as_millis()),
            });
        match migrated {
            Ok(Ok(_)) => {}
            Ok(Err(reason)) | Err(reason) => return Err(refused(&shown, reason)),
        }
        lease::start_renewing(&shared);
        Ok(Postgres { shared })
    }
}

/// `postgres://user@host:port/db`, never the password.
fn shown(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or_default();
    format!("postgres://{user}{host}:{port}/{db}")
}

impl Backend for Postgres {
    fn claim(&self, log: &Path) -> Result<Box<dyn Claimed>, SessionError> {
        Ok(Box::new(lease::claim(&self.shared, log)?))
    }

    fn load(&self, log: &Path) -> Result<Session, SessionError> {
        Ok(commits::read(&self.shared, log)?.session)
    }

    fn steps(&self, log: &Path) -> Result<Vec<Step>, SessionError> {
        Ok(commits::read(&self.shared, log)?.steps)
    }

    fn fork(&self, log: &Path, at: usize, out: &Path) -> Result<Session, SessionError> {
        commits::fork(&self.shared, log, at, out)
    }

    fn describe(&self) -> String {
        self.shared.shown.clone()
    }
}
