//! What only a shared store has: leases between stores (nodes) with epoch fencing, versioned
//! migrations, and clear errors for a store that cannot be used. On the database `.ci/run`
//! starts (`TROUPE_TEST_POSTGRES`; under `CI=true` its absence fails these tests).

use std::time::Duration;

use troupe_compaction::Archive;
use troupe_protocol::{ChatMessage, Conversation, FileLedger};
use troupe_session::{PostgresOptions, SessionClaim, SessionError, SessionStore, SessionSync};

use super::backends::{Backend, Database, sql};

fn commit(sync: &mut SessionSync, c: &Conversation) -> Result<(), SessionError> {
    sync.persist_with(c, &Archive::default(), &FileLedger::new(), None, Vec::new())
}

fn texts(c: &Conversation) -> Vec<String> {
    c.messages().iter().map(|m| m.text()).collect()
}

/// Make `log`'s lease run out now, behind its holder's back (as if it froze past its lease).
fn expire(url: &str, log: &std::path::Path) {
    let name = log.to_string_lossy().into_owned();
    sql(url, move |client| {
        Box::pin(async move {
            client
                .execute(
                    "UPDATE troupe_session_leases SET expires_at = now() - interval '1 second'
                     WHERE log = $1",
                    &[&name],
                )
                .await
                .unwrap();
        })
    });
}

/// Claim `log` in `store` once its lease ran out (expired by the test, retried in case the
/// holder's renewal came between the two).
fn take_over(
    url: &str,
    store: &SessionStore,
    log: &std::path::Path,
) -> (SessionSync, SessionClaim) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        expire(url, log);
        let claim = SessionClaim::new(store.clone());
        match SessionSync::open(log, "solo", Some(&claim)) {
            Ok((sync, _)) => return (sync, claim),
            Err(SessionError::Leased { .. }) if std::time::Instant::now() < deadline => {}
            Err(e) => panic!("{e:?}"),
        }
    }
}

#[test]
fn a_live_lease_is_refused_to_another_node_naming_its_holder() {
    let Some(backend) = Backend::postgres() else {
        return;
    };
    let log = backend.log("held");
    let claim = SessionClaim::new(backend.store.clone());
    let (_sync, _) = SessionSync::open(&log, "solo", Some(&claim)).unwrap();
    let other = backend.another("node-b", Duration::from_secs(10));
    let refused = SessionSync::open(&log, "solo", Some(&SessionClaim::new(other))).unwrap_err();
    let SessionError::Leased {
        node,
        expires_in_ms,
        ..
    } = &refused
    else {
        panic!("{refused:?}");
    };
    assert_eq!(node, "suite");
    assert!(expires_in_ms.is_some_and(|ms| ms <= 10_000), "{refused:?}");
    assert!(
        refused.to_string().contains("is in use by suite"),
        "{refused}"
    );
}

#[test]
fn a_writer_whose_lease_was_taken_over_is_fenced_and_the_log_keeps_one_history() {
    let Some(backend) = Backend::postgres() else {
        return;
    };
    let url = backend.url().to_string();
    let log = backend.log("fenced");
    // Node A writes a step, then freezes past its lease (a long one: its renewal rarely runs).
    let a = backend.another("node-a", Duration::from_secs(60));
    let a_claim = SessionClaim::new(a);
    let (mut a_sync, _) = SessionSync::open(&log, "solo", Some(&a_claim)).unwrap();
    let mut c = Conversation::new();
    c.push(ChatMessage::user("from a"));
    commit(&mut a_sync, &c).unwrap();
    // Node B takes the log over (a new epoch) and goes on from A's last commit.
    let b = backend.another("node-b", Duration::from_secs(60));
    let (mut b_sync, _b_claim) = take_over(&url, &b, &log);
    let mut from_b = backend.store.load(&log).unwrap().conversation;
    assert_eq!(texts(&from_b), ["from a"]);
    from_b.push(ChatMessage::user("from b"));
    commit(&mut b_sync, &from_b).unwrap();
    // A comes back: its commit is refused by the epoch, naming who holds the log now.
    c.push(ChatMessage::user("a again"));
    let fenced = commit(&mut a_sync, &c).unwrap_err();
    assert!(fenced.is_fenced(), "{fenced:?}");
    let SessionError::Fenced { epoch, by, .. } = &fenced else {
        panic!("{fenced:?}");
    };
    let (holder, new_epoch) = by.clone().unwrap();
    assert_eq!(holder, "node-b");
    assert!(new_epoch > *epoch, "{fenced:?}");
    assert!(fenced.to_string().contains("no longer held"), "{fenced}");
    // And stays refused: a fenced writer never writes again.
    assert!(commit(&mut a_sync, &c).unwrap_err().is_fenced());
    // One history: A's step, then B's; nothing of A's after B began.
    let session = backend.store.load(&log).unwrap();
    assert_eq!(texts(&session.conversation), ["from a", "from b"]);
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    // A letting go of its claim does not free B's lease.
    drop(a_sync);
    drop(a_claim);
    let refused = SessionSync::open(
        &log,
        "solo",
        Some(&SessionClaim::new(
            backend.another("node-c", Duration::from_secs(10)),
        )),
    )
    .unwrap_err();
    assert!(
        matches!(refused, SessionError::Leased { ref node, .. } if node == "node-b"),
        "{refused:?}"
    );
}

#[test]
fn a_commit_row_damaged_behind_troupes_back_is_refused_naming_its_line() {
    let Some(backend) = Backend::postgres() else {
        return;
    };
    let log = backend.log("two-commits-in-a-row");
    let header = r#"{"type":"session","version":2,"created_ms":1}"#;
    let commit = r#"{"type":"commit"}"#;
    let user =
        r#"{"type":"message","id":"m1","kind":"normal","message":{"role":"user","content":"hi"}}"#;
    // Two commits in one row: each row must be exactly one.
    backend.write_raw(&log, &[&[header, commit, user, commit]]);
    let error = backend.store.load(&log).unwrap_err();
    assert!(
        matches!(error, SessionError::Corrupt { line: 1, .. }),
        "{error:?}"
    );
}

fn versions(url: &str) -> Vec<i32> {
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = out.clone();
    sql(url, move |client| {
        Box::pin(async move {
            let rows = client
                .query(
                    "SELECT version FROM troupe_schema_migrations ORDER BY version",
                    &[],
                )
                .await
                .unwrap();
            *into.lock().unwrap() = rows.iter().map(|r| r.get(0)).collect();
        })
    });
    out.lock().unwrap().clone()
}

#[test]
fn nodes_starting_together_migrate_an_empty_database_once_and_a_newer_schema_is_refused() {
    let Some(db) = Database::new() else {
        return;
    };
    // Four nodes connect at once to an empty database: the advisory lock lets one migrate.
    let stores: Vec<_> = (0..4)
        .map(|i| {
            let url = db.url.clone();
            std::thread::spawn(move || {
                SessionStore::postgres(&url, PostgresOptions::default().node(format!("n{i}")))
            })
        })
        .map(|t| t.join().unwrap())
        .collect();
    for store in &stores {
        assert!(store.is_ok(), "{store:?}");
    }
    assert_eq!(versions(&db.url), [1]);
    drop(stores);
    // A database a newer troupe migrated is refused, not written with this one's schema.
    sql(&db.url, |client| {
        Box::pin(async move {
            client
                .execute(
                    "INSERT INTO troupe_schema_migrations (version) VALUES (99)",
                    &[],
                )
                .await
                .unwrap();
        })
    });
    let refused = SessionStore::postgres(&db.url, PostgresOptions::default()).unwrap_err();
    assert!(
        matches!(refused, SessionError::Connect { .. }),
        "{refused:?}"
    );
    assert!(
        refused
            .to_string()
            .contains("schema is version 99, written by a newer troupe"),
        "{refused}"
    );
}

#[test]
fn a_store_that_cannot_be_used_is_a_clear_error_that_never_shows_the_password() {
    let not_a_url = SessionStore::postgres("postgres://a:b@[nope", PostgresOptions::default());
    let error = not_a_url.unwrap_err().to_string();
    assert!(error.contains("not a Postgres URL"), "{error}");
    assert!(!error.contains(":b@"), "{error}");
    // Nothing listens on port 1 of loopback.
    let unreachable = SessionStore::postgres(
        "postgres://troupe:s3cret@127.0.0.1:1/db",
        PostgresOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(unreachable, SessionError::Connect { .. }),
        "{unreachable:?}"
    );
    let error = unreachable.to_string();
    assert!(
        error.contains("postgres://troupe@127.0.0.1:1/db"),
        "{error}"
    );
    assert!(!error.contains("s3cret"), "{error}");
    // A lease too short to renew in time.
    let short = SessionStore::postgres(
        "postgres://troupe@127.0.0.1:1/db",
        PostgresOptions::default().lease(Duration::from_millis(50)),
    )
    .unwrap_err();
    assert!(short.to_string().contains("too short"), "{short}");
}
