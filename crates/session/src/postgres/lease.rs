//! Leases: the right to write one log, held by one store at a time.
//!
//! A claim inserts or takes over the log's row in `troupe_session_leases` — only when it is
//! free or its lease expired, by the database's clock — with the epoch one past the last, and
//! holds it ([`PgClaim`]) until dropped, which releases it at once. While held, the store thread
//! renews every lease of its store each third of the lease's length, in one statement; a lease
//! the renewal no longer finds (another store took it over after it expired: this process was
//! frozen, or cut off from the database) is lost, and [`Lease::lost`] says so to whoever waits.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use super::{Shared, name_of, sql_reason};
use crate::error::SessionError;
use crate::records::Session;
use crate::store::{Claimed, CommitLog};

/// One held lease.
#[derive(Debug)]
pub(super) struct Lease {
    /// The log's name.
    pub(super) log: String,
    /// The epoch it was taken with: every commit under it checks that the row still has it.
    pub(super) epoch: i64,
    /// Set once the lease is known to be lost.
    lost: watch::Sender<bool>,
}

impl Lease {
    /// Mark the lease lost (a renewal or a commit found it taken over).
    pub(super) fn lose(&self) {
        self.lost.send_replace(true);
    }

    /// Whether the lease is known to be lost, and the means to wait for it.
    pub(super) fn lost(&self) -> watch::Receiver<bool> {
        self.lost.subscribe()
    }
}

/// This store's token in the lease table: the process and a counter, unique per store.
pub(super) fn holder_token() -> String {
    static STORES: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{nanos:08x}-{}",
        std::process::id(),
        STORES.fetch_add(1, Ordering::Relaxed)
    )
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A held claim: the log's lease, released when dropped.
#[derive(Debug)]
pub(crate) struct PgClaim {
    shared: Arc<Shared>,
    path: PathBuf,
    lease: Arc<Lease>,
}

/// Take the lease of `log` for `shared`'s store.
pub(super) fn claim(shared: &Arc<Shared>, log: &Path) -> Result<PgClaim, SessionError> {
    let name = name_of(log);
    // One claim per log in this store, as one flock per log in a process. (Not held across the
    // call: the renewal takes this lock on the store thread.)
    if troupe_protocol::sync::lock(&shared.held).contains_key(&name) {
        return Err(SessionError::Leased {
            path: log.to_path_buf(),
            node: format!("{} (this process)", shared.node),
            expires_in_ms: None,
        });
    }
    let (holder, node, lease_ms) = (
        shared.holder.clone(),
        shared.node.clone(),
        millis(shared.lease),
    );
    let key = name.clone();
    let taken = shared.call(log, move |pool| async move {
        let client = pool.get().await.map_err(|e| e.to_string())?;
        let row = client
            .query_opt(
                "INSERT INTO troupe_session_leases AS l (log, holder, node, epoch, expires_at)
                 VALUES ($1, $2, $3, 1, now() + $4::bigint * interval '1 millisecond')
                 ON CONFLICT (log) DO UPDATE
                   SET holder = EXCLUDED.holder, node = EXCLUDED.node, epoch = l.epoch + 1,
                       expires_at = EXCLUDED.expires_at
                   WHERE l.expires_at <= now()
                 RETURNING epoch",
                &[&key, &holder, &node, &lease_ms],
            )
            .await
            .map_err(|e| sql_reason(&e))?;
        if let Some(row) = row {
            return Ok(Ok(row.get::<_, i64>(0)));
        }
        let by = client
            .query_opt(
                "SELECT node, greatest(0, (extract(epoch FROM expires_at - now()) * 1000)::bigint)
                 FROM troupe_session_leases WHERE log = $1",
                &[&key],
            )
            .await
            .map_err(|e| sql_reason(&e))?;
        Ok(Err(by.map(|row| {
            (row.get::<_, String>(0), row.get::<_, i64>(1))
        })))
    });
    match taken? {
        Ok(epoch) => {
            let lease = Arc::new(Lease {
                log: name.clone(),
                epoch,
                lost: watch::channel(false).0,
            });
            troupe_protocol::sync::lock(&shared.held).insert(name, lease.clone());
            Ok(PgClaim {
                shared: shared.clone(),
                path: log.to_path_buf(),
                lease,
            })
        }
        Err(by) => Err(SessionError::Leased {
            path: log.to_path_buf(),
            node: by
                .as_ref()
                .map_or_else(|| "another store".into(), |(n, _)| n.clone()),
            expires_in_ms: by.map(|(_, ms)| u64::try_from(ms).unwrap_or(0)),
        }),
    }
}

impl Claimed for PgClaim {
    fn log_path(&self) -> &Path {
        &self.path
    }

    fn open(&self, agent: Option<&str>) -> Result<(Box<dyn CommitLog>, Session), SessionError> {
        // A lease another owner took over is not reopened: whoever rebuilds the agent under
        // this claim (its supervisor) is refused, so the agent goes instead of resuming a
        // request its successor now owns.
        if *self.lease.lost().borrow() {
            return Err(SessionError::Fenced {
                path: self.path.clone(),
                epoch: u64::try_from(self.lease.epoch).unwrap_or(0),
                by: None,
            });
        }
        let (log, session) =
            super::commits::open(&self.shared, &self.path, self.lease.clone(), agent)?;
        Ok((Box::new(log), session))
    }
}

impl Drop for PgClaim {
    fn drop(&mut self) {
        troupe_protocol::sync::lock(&self.shared.held).remove(&self.lease.log);
        // Released at once, so a successor need not wait the lease out; waited for (briefly),
        // so one that claims right after this drop finds it free.
        let (log, epoch, holder) = (
            self.lease.log.clone(),
            self.lease.epoch,
            self.shared.holder.clone(),
        );
        let released = self.shared.call(&self.path, move |pool| async move {
            let client = pool.get().await.map_err(|e| e.to_string())?;
            client
                .execute(
                    "UPDATE troupe_session_leases SET holder = '', expires_at = now()
                     WHERE log = $1 AND epoch = $2 AND holder = $3",
                    &[&log, &epoch, &holder],
                )
                .await
                .map_err(|e| sql_reason(&e))?;
            Ok(())
        });
        if let Err(e) = released {
            tracing::warn!(error = %e, "could not release a session log's lease; it expires on its own");
        }
    }
}

/// Renew every lease `shared` holds each third of the lease's length, on the store thread, for
/// as long as the store lives.
pub(super) fn start_renewing(shared: &Arc<Shared>) {
    let held = shared.held.clone();
    let holder = shared.holder.clone();
    let lease = shared.lease;
    shared.worker.spawn(move |pool| async move {
        let mut every = tokio::time::interval(lease / 3);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            // Taken before the statement: a lease claimed after it is not judged by it.
            let snapshot: Vec<Arc<Lease>> =
                troupe_protocol::sync::lock(&held).values().cloned().collect();
            if snapshot.is_empty() {
                continue;
            }
            let renewed = async {
                let client = pool.get().await.map_err(|e| e.to_string())?;
                let rows = client
                    .query(
                        "UPDATE troupe_session_leases
                         SET expires_at = now() + $2::bigint * interval '1 millisecond'
                         WHERE holder = $1 RETURNING log, epoch",
                        &[&holder, &millis(lease)],
                    )
                    .await
                    .map_err(|e| sql_reason(&e))?;
                Ok::<_, String>(
                    rows.iter()
                        .map(|row| (row.get::<_, String>(0), row.get::<_, i64>(1)))
                        .collect::<HashSet<_>>(),
                )
            };
            match renewed.await {
                Ok(kept) => {
                    for lease in snapshot {
                        if !kept.contains(&(lease.log.clone(), lease.epoch)) {
                            tracing::warn!(log = %lease.log, epoch = lease.epoch, "lost the lease of a session log: another owner took it over");
                            lease.lose();
                        }
                    }
                }
                // The database may be back before the lease runs out: try again next time.
                Err(reason) => tracing::warn!(%reason, "could not renew the session logs' leases"),
            }
        }
    });
}
