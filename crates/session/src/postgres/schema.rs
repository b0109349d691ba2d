//! The store's tables and their migrations: each a numbered step applied once, in order, under
//! an advisory lock, so nodes starting together on an empty database create the tables once, and
//! a database migrated by a newer troupe is refused rather than written with an older schema.

use tokio_postgres::Client;

/// The schema version this troupe writes and reads.
pub(super) const SCHEMA_VERSION: i32 = 1;

/// The advisory lock migrations hold (any constant shared by every troupe: "troupe" in ASCII).
const MIGRATION_LOCK: i64 = 0x74_72_6f_75_70_65;

/// Migration `n` is `MIGRATIONS[n - 1]`.
const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 1: a log is its commits, each one row holding the commit's exact JSONL lines (its
    // `commit` line last), numbered from 0 (the header) as the log's steps are; the writer's
    // right to a log is its lease, taken with a new epoch and checked by every commit.
    "CREATE TABLE troupe_session_commits (
         log text NOT NULL,
         seq bigint NOT NULL CHECK (seq >= 0),
         epoch bigint NOT NULL,
         lines text NOT NULL,
         committed_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (log, seq)
     );
     CREATE TABLE troupe_session_leases (
         log text PRIMARY KEY,
         holder text NOT NULL,
         node text NOT NULL,
         epoch bigint NOT NULL,
         expires_at timestamptz NOT NULL
     );",
];

/// Why the schema could not be brought to [`SCHEMA_VERSION`].
#[derive(Debug)]
pub(super) enum SchemaError {
    /// A statement failed.
    Sql(tokio_postgres::Error),
    /// The database was migrated by a newer troupe.
    Newer(i32),
}

impl From<tokio_postgres::Error> for SchemaError {
    fn from(e: tokio_postgres::Error) -> Self {
        SchemaError::Sql(e)
    }
}

/// Apply the migrations the database lacks; answers the version it was at.
pub(super) async fn migrate(client: &mut Client) -> Result<i32, SchemaError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS troupe_schema_migrations (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let at: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM troupe_schema_migrations",
            &[],
        )
        .await?
        .get(0);
    if at > SCHEMA_VERSION {
        return Err(SchemaError::Newer(at));
    }
    for version in at + 1..=SCHEMA_VERSION {
        let Some(sql) = usize::try_from(version - 1)
            .ok()
            .and_then(|i| MIGRATIONS.get(i))
        else {
            break;
        };
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO troupe_schema_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(at)
}
