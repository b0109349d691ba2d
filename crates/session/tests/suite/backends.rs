//! The two backends the store suite runs on: files in a temporary directory, and the Postgres
//! database `.ci/run` starts (`TROUPE_TEST_POSTGRES`; under `CI=true` its absence fails the
//! test, elsewhere the test says it skipped). `both!` makes each test of a list once per backend.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use troupe_session::{PostgresOptions, SessionStore};

/// The Postgres URL the tests use, or `None` (then the caller skips) — a panic under CI.
pub(crate) fn postgres_url() -> Option<String> {
    match std::env::var("TROUPE_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("TROUPE_TEST_POSTGRES is unset under CI: .ci/run starts PostgreSQL for it")
        }
        _ => {
            eprintln!("skipped: TROUPE_TEST_POSTGRES is unset (source .ci/postgres.sh to run it)");
            None
        }
    }
}

/// A backend for one test: its store and where that test's logs go.
pub(crate) struct Backend {
    pub(crate) store: SessionStore,
    kind: Kind,
}

enum Kind {
    Files(tempfile::TempDir),
    Postgres { url: String, prefix: String },
}

/// A name no other test (or run) uses.
pub(crate) fn unique(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{what}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl Backend {
    pub(crate) fn files() -> Backend {
        Backend {
            store: SessionStore::files(),
            kind: Kind::Files(tempfile::tempdir().unwrap()),
        }
    }

    /// On Postgres with `options`; `None` when the test is skipped.
    pub(crate) fn postgres_with(options: PostgresOptions) -> Option<Backend> {
        let url = postgres_url()?;
        let store = SessionStore::postgres(&url, options).unwrap();
        Some(Backend {
            store,
            kind: Kind::Postgres {
                url,
                prefix: unique("suite"),
            },
        })
    }

    pub(crate) fn postgres() -> Option<Backend> {
        Self::postgres_with(PostgresOptions::default().node("suite"))
    }

    /// A second store on the same database (another node), or another handle on the same
    /// directory.
    pub(crate) fn another(&self, node: &str, lease: Duration) -> SessionStore {
        match &self.kind {
            Kind::Files(_) => SessionStore::files(),
            Kind::Postgres { url, .. } => {
                SessionStore::postgres(url, PostgresOptions::default().node(node).lease(lease))
                    .unwrap()
            }
        }
    }

    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self.kind, Kind::Postgres { .. })
    }

    /// The log `name` of this test.
    pub(crate) fn log(&self, name: &str) -> PathBuf {
        match &self.kind {
            Kind::Files(dir) => dir.path().join(format!("{name}.jsonl")),
            Kind::Postgres { prefix, .. } => PathBuf::from(format!("{prefix}/{name}")),
        }
    }

    /// Write `commits` as the log `log` holds them, bypassing troupe's writer (each commit's
    /// lines, a `{"type":"commit"}` among them where the test wants one): a file of their lines,
    /// or one row per commit.
    pub(crate) fn write_raw(&self, log: &Path, commits: &[&[&str]]) {
        match &self.kind {
            Kind::Files(_) => {
                let text: String = commits
                    .iter()
                    .flat_map(|c| c.iter())
                    .map(|l| format!("{l}\n"))
                    .collect();
                std::fs::write(log, text).unwrap();
            }
            Kind::Postgres { url, .. } => {
                let name = log.to_string_lossy().into_owned();
                let rows: Vec<String> = commits
                    .iter()
                    .map(|c| c.iter().map(|l| format!("{l}\n")).collect())
                    .collect();
                sql(url, move |client| {
                    Box::pin(async move {
                        for (seq, lines) in rows.iter().enumerate() {
                            client
                                .execute(
                                    "INSERT INTO troupe_session_commits (log, seq, epoch, lines)
                                     VALUES ($1, $2, 0, $3)",
                                    &[&name, &(seq as i64), lines],
                                )
                                .await
                                .unwrap();
                        }
                    })
                });
            }
        }
    }

    /// The database's URL (Postgres only).
    pub(crate) fn url(&self) -> &str {
        match &self.kind {
            Kind::Postgres { url, .. } => url,
            Kind::Files(_) => panic!("not a Postgres backend"),
        }
    }
}

/// A database of its own on the test server (a migration test, a node's store), dropped at the
/// end; `None` when the test is skipped.
pub(crate) struct Database {
    admin: String,
    name: String,
    pub(crate) url: String,
}

impl Database {
    pub(crate) fn new() -> Option<Database> {
        let admin = postgres_url()?;
        let name = unique("troupe_test").replace('-', "_");
        let create = format!("CREATE DATABASE {name}");
        sql(&admin, move |client| {
            Box::pin(async move {
                client.batch_execute(&create).await.unwrap();
            })
        });
        let (base, _) = admin.rsplit_once('/').unwrap();
        let url = format!("{base}/{name}");
        Some(Database { admin, name, url })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        sql(&self.admin, move |client| {
            Box::pin(async move {
                let _ = client.batch_execute(&drop).await;
            })
        });
    }
}

type Work<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>>;

/// Run `work` with a client of its own on the database at `url` (what the test does behind
/// troupe's back: an expired lease, a damaged row).
pub(crate) fn sql(url: &str, work: impl for<'c> FnOnce(&'c tokio_postgres::Client) -> Work<'c>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        work(&client).await;
        drop(client);
        let _ = driver.await;
    });
}

/// Each named test function `fn(&Backend)`, once on files and once on Postgres.
macro_rules! both {
    ($($test:ident),* $(,)?) => {
        mod on_files {
            $(#[test] fn $test() { super::$test(&super::super::backends::Backend::files()) })*
        }
        mod on_postgres {
            $(#[test] fn $test() {
                if let Some(backend) = super::super::backends::Backend::postgres() {
                    super::$test(&backend)
                }
            })*
        }
    };
}
pub(crate) use both;
