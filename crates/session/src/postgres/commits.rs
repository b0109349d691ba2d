//! A log's commits in the store: read back through the file scanner, written one row per
//! commit under the writer's lease, forked by copying rows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::lease::Lease;
use super::{Shared, name_of, sql_reason};
use crate::error::SessionError;
use crate::log::{commit_text, now_ms};
use crate::records::{SESSION_FORMAT_VERSION, Session, SessionRecord};
use crate::steps::{Step, steps_of};
use crate::store::CommitLog;

/// A log read from the store.
pub(super) struct Read {
    pub(super) session: Session,
    pub(super) steps: Vec<Step>,
    /// Its rows' lines, in order (what a fork copies).
    rows: Vec<String>,
}

/// The rows of `log`, oldest first (none: no such log).
fn fetch(shared: &Shared, log: &Path) -> Result<Vec<(i64, String)>, SessionError> {
    let name = name_of(log);
    shared.call(log, move |pool| async move {
        let client = pool.get().await.map_err(|e| e.to_string())?;
        let rows = client
            .query(
                "SELECT seq, lines FROM troupe_session_commits WHERE log = $1 ORDER BY seq",
                &[&name],
            )
            .await
            .map_err(|e| sql_reason(&e))?;
        Ok(rows
            .iter()
            .map(|row| (row.get::<_, i64>(0), row.get::<_, String>(1)))
            .collect())
    })
}

/// The session and steps `rows` hold, read as a file of their lines would be, each row checked
/// to be exactly one commit.
fn parse(log: &Path, rows: Vec<(i64, String)>) -> Result<Read, SessionError> {
    let mut bytes = String::new();
    let mut bounds = Vec::with_capacity(rows.len());
    let mut line = 1usize;
    let mut lines = Vec::with_capacity(rows.len());
    for (at, (seq, text)) in rows.into_iter().enumerate() {
        if usize::try_from(seq).ok() != Some(at) {
            return Err(SessionError::Corrupt {
                path: log.to_path_buf(),
                line,
                reason: format!("the store has no commit {at} (the next one is {seq})"),
            });
        }
        bytes.push_str(&text);
        bounds.push((line, bytes.len() as u64));
        line += text.matches('\n').count();
        lines.push(text);
    }
    let (steps, scan) = steps_of(log, bytes.as_bytes())?;
    for (at, (first_line, end)) in bounds.iter().enumerate() {
        if steps.get(at).map(|s| s.end) != Some(*end) {
            return Err(SessionError::Corrupt {
                path: log.to_path_buf(),
                line: *first_line,
                reason: format!(
                    "commit {at} in the store is not one whole commit (its lines must end with \
                     its only `commit` line)"
                ),
            });
        }
    }
    Ok(Read {
        session: scan.session,
        steps,
        rows: lines,
    })
}

/// The log `log` as of its last commit; a log with no commit is not found.
pub(super) fn read(shared: &Shared, log: &Path) -> Result<Read, SessionError> {
    let rows = fetch(shared, log)?;
    if rows.is_empty() {
        return Err(not_found(shared, log));
    }
    parse(log, rows)
}

fn not_found(shared: &Shared, log: &Path) -> SessionError {
    SessionError::Io {
        path: log.to_path_buf(),
        cause: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no such log in {}", shared.shown),
        ),
    }
}

/// A log open for writing under its lease.
#[derive(Debug)]
pub(crate) struct PgLog {
    shared: Arc<Shared>,
    path: PathBuf,
    lease: Arc<Lease>,
    /// The number the next commit gets (how many the log holds).
    next: i64,
    pending: Vec<SessionRecord>,
}

/// Open `path` under `lease`, writing its header when it is new (naming `agent`).
pub(super) fn open(
    shared: &Arc<Shared>,
    path: &Path,
    lease: Arc<Lease>,
    agent: Option<&str>,
) -> Result<(PgLog, Session), SessionError> {
    let rows = fetch(shared, path)?;
    let mut log = PgLog {
        shared: shared.clone(),
        path: path.to_path_buf(),
        lease,
        next: i64::try_from(rows.len()).unwrap_or(i64::MAX),
        pending: Vec::new(),
    };
    if !rows.is_empty() {
        let read = parse(path, rows)?;
        return Ok((log, read.session));
    }
    log.append(SessionRecord::Session {
        version: SESSION_FORMAT_VERSION,
        agent: agent.map(str::to_string),
        created_ms: now_ms(),
    });
    log.flush()?;
    let session = Session {
        agent: agent.map(str::to_string),
        ..Session::default()
    };
    Ok((log, session))
}

/// What a commit's insert found.
enum Inserted {
    /// The row is in.
    Yes,
    /// The lease row no longer has this writer's epoch: who has it now, and with which epoch.
    Fenced(Option<(String, i64)>),
    /// A row of that number exists and is not this one.
    Taken,
}

impl CommitLog for PgLog {
    fn append(&mut self, record: SessionRecord) {
        self.pending.push(record);
    }

    fn flush(&mut self) -> Result<(), SessionError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let fenced = |by: Option<(String, i64)>| SessionError::Fenced {
            path: self.path.clone(),
            epoch: u64::try_from(self.lease.epoch).unwrap_or(0),
            by: by.map(|(node, epoch)| (node, u64::try_from(epoch).unwrap_or(0))),
        };
        if *self.lease.lost().borrow() {
            return Err(fenced(None));
        }
        let text = commit_text(&self.pending, &self.path)?;
        let (log, seq, epoch, holder) = (
            self.lease.log.clone(),
            self.next,
            self.lease.epoch,
            self.shared.holder.clone(),
        );
        let inserted = self.shared.call(&self.path, move |pool| async move {
            let client = pool.get().await.map_err(|e| e.to_string())?;
            let insert = client
                .execute(
                    "INSERT INTO troupe_session_commits (log, seq, epoch, lines)
                     SELECT $1, $2, $3, $4 FROM troupe_session_leases
                     WHERE log = $1 AND epoch = $3 AND holder = $5 FOR SHARE",
                    &[&log, &seq, &epoch, &text, &holder],
                )
                .await;
            match insert {
                Ok(1) => Ok(Inserted::Yes),
                Ok(_) => {
                    let by = client
                        .query_opt(
                            "SELECT node, epoch FROM troupe_session_leases WHERE log = $1",
                            &[&log],
                        )
                        .await
                        .ok()
                        .flatten()
                        .map(|row| (row.get::<_, String>(0), row.get::<_, i64>(1)));
                    Ok(Inserted::Fenced(by))
                }
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                    Ok(Inserted::Taken)
                }
                // The connection may have failed after the row went in: look, on another one.
                Err(e) if e.as_db_error().is_none() => {
                    drop(client);
                    let again = pool.get().await.map_err(|e2| format!("{e}; then {e2}"))?;
                    let row = again
                        .query_opt(
                            "SELECT lines FROM troupe_session_commits WHERE log = $1 AND seq = $2",
                            &[&log, &seq],
                        )
                        .await
                        .map_err(|e2| format!("{e}; then {}", sql_reason(&e2)))?;
                    match row {
                        Some(row) if row.get::<_, String>(0) == text => Ok(Inserted::Yes),
                        Some(_) => Ok(Inserted::Taken),
                        None => Err(e.to_string()),
                    }
                }
                Err(e) => Err(sql_reason(&e)),
            }
        })?;
        match inserted {
            Inserted::Yes => {
                self.next += 1;
                self.pending.clear();
                Ok(())
            }
            Inserted::Fenced(by) => {
                self.lease.lose();
                Err(fenced(by))
            }
            Inserted::Taken => {
                self.lease.lose();
                Err(fenced(None))
            }
        }
    }

    fn discard_pending(&mut self) {
        self.pending.clear();
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A new log `out` holding `log`'s commits up to and including step `at`.
pub(super) fn fork(
    shared: &Shared,
    log: &Path,
    at: usize,
    out: &Path,
) -> Result<Session, SessionError> {
    let read = read(shared, log)?;
    if at >= read.rows.len() {
        return Err(SessionError::UnknownStep {
            path: log.to_path_buf(),
            step: at.to_string(),
            steps: read.rows.len(),
        });
    }
    let kept: Vec<String> = read.rows.into_iter().take(at + 1).collect();
    let seqs: Vec<i64> = (0..kept.len())
        .map(|i| i64::try_from(i).unwrap_or(i64::MAX))
        .collect();
    let name = name_of(out);
    let copied = kept.clone();
    let inserted = shared.call(out, move |pool| async move {
        let client = pool.get().await.map_err(|e| e.to_string())?;
        // All or nothing in one statement; the primary key refuses a log that exists.
        let done = client
            .execute(
                "INSERT INTO troupe_session_commits (log, seq, epoch, lines)
                 SELECT $1, s, 0, l FROM unnest($2::bigint[], $3::text[]) AS t(s, l)",
                &[&name, &seqs, &copied],
            )
            .await;
        match done {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                Ok(false)
            }
            Err(e) => Err(sql_reason(&e)),
        }
    })?;
    if !inserted {
        return Err(SessionError::Exists {
            path: out.to_path_buf(),
        });
    }
    let rows = kept
        .into_iter()
        .enumerate()
        .map(|(i, l)| (i64::try_from(i).unwrap_or(i64::MAX), l))
        .collect();
    Ok(parse(out, rows)?.session)
}
