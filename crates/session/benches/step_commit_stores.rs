//! What a durable step's commit costs on each session store — the JSONL files (write + fsync)
//! and Postgres (one transaction that checks the lease's epoch) — interleaved in one run (#55).
//!
//! Run (a Postgres that syncs its writes, as a real one does):
//! `. .ci/postgres.sh && TROUPE_PG_FSYNC=on troupe_postgres_start &&
//! cargo bench -p troupe-session --bench step_commit_stores`.
//! The database is `TROUPE_BENCH_POSTGRES`, else `TROUPE_TEST_POSTGRES`; without either the
//! Postgres rows say skipped. `TROUPE_BENCH_STEPS` sets the steps per round (default 40),
//! `TROUPE_BENCH_ROUNDS` the rounds (default 5). The files are written under `target/` (a real
//! disk: a tmpfs would make fsync free).
//!
//! A step here is what an agent commits for one tool call with durable steps on: the model's
//! answer naming the call, then the call's 2 KB result, each one commit through the agent's own
//! road (`SessionSync::persist_with` under a `SessionClaim`), each timed on its own. Every round
//! opens a fresh log on each store, the stores' order alternating from round to round.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use troupe_compaction::Archive;
use troupe_protocol::{ChatMessage, Conversation, FileLedger, ToolCall};
use troupe_session::{PostgresOptions, SessionClaim, SessionStore, SessionSync};

/// One store under test.
struct Store {
    name: &'static str,
    store: SessionStore,
    /// Where this store's logs of this run go (a directory, or a name prefix).
    place: String,
    /// Each commit's duration, in milliseconds.
    commits_ms: Vec<f64>,
}

impl Store {
    fn log(&self, round: usize) -> PathBuf {
        PathBuf::from(format!("{}/round-{round}.jsonl", self.place))
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// One round on `store`: a fresh log, `steps` steps of two commits each.
fn round(
    store: &mut Store,
    round: usize,
    steps: usize,
    result: &str,
) -> Result<(), Box<dyn Error>> {
    let claim = SessionClaim::new(store.store.clone());
    let (mut sync, session) = SessionSync::open(&store.log(round), "bench", Some(&claim))?;
    let mut conversation: Conversation = session.conversation;
    let archive = Archive::default();
    let ledger = FileLedger::new();
    conversation.push(ChatMessage::user(
        "read every module and say what each one does",
    ));
    sync.persist_with(&conversation, &archive, &ledger, None, Vec::new())?;
    for n in 0..steps {
        let id = format!("call_{n}");
        let arguments = format!(r#"{{"path": "src/module_{n}.rs"}}"#);
        conversation.push(ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(&id, "read_file", &arguments)],
        ));
        let started = Instant::now();
        sync.persist_with(&conversation, &archive, &ledger, None, Vec::new())?;
        store
            .commits_ms
            .push(started.elapsed().as_secs_f64() * 1000.0);
        conversation.push(ChatMessage::tool_result(&id, result));
        let started = Instant::now();
        sync.persist_with(&conversation, &archive, &ledger, None, Vec::new())?;
        store
            .commits_ms
            .push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let steps = env_number("TROUPE_BENCH_STEPS", 40);
    let rounds = env_number("TROUPE_BENCH_ROUNDS", 5);
    let result = "fn handler() { /* a module's text */ }\n".repeat(2048 / 40);
    let run = format!(
        "step-commit-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis()
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&run);
    std::fs::create_dir_all(&dir)?;
    let mut stores = vec![Store {
        name: "files",
        store: SessionStore::files(),
        place: dir.display().to_string(),
        commits_ms: Vec::new(),
    }];
    let url = std::env::var("TROUPE_BENCH_POSTGRES")
        .or_else(|_| std::env::var("TROUPE_TEST_POSTGRES"))
        .ok()
        .filter(|u| !u.is_empty());
    match &url {
        Some(url) => stores.push(Store {
            name: "postgres",
            store: SessionStore::postgres(url, PostgresOptions::default().node("bench"))?,
            place: run.clone(),
            commits_ms: Vec::new(),
        }),
        None => println!(
            "postgres: skipped (neither TROUPE_BENCH_POSTGRES nor TROUPE_TEST_POSTGRES is set)"
        ),
    }
    for r in 0..rounds {
        let order: Vec<usize> = if r % 2 == 0 {
            (0..stores.len()).collect()
        } else {
            (0..stores.len()).rev().collect()
        };
        for i in order {
            round(&mut stores[i], r, steps, &result)?;
        }
    }
    println!(
        "{rounds} rounds × {steps} steps × 2 commits per store (a step: the answer naming a tool \
         call, then its {} B result)",
        result.len()
    );
    println!(
        "{:<10} {:>8} {:>11} {:>8} {:>8}",
        "store", "commits", "median ms", "p90 ms", "max ms"
    );
    let mut medians = Vec::new();
    for store in &mut stores {
        store.commits_ms.sort_by(f64::total_cmp);
        let median = percentile(&store.commits_ms, 0.5);
        medians.push(median);
        println!(
            "{:<10} {:>8} {:>11.2} {:>8.2} {:>8.2}",
            store.name,
            store.commits_ms.len(),
            median,
            percentile(&store.commits_ms, 0.9),
            store.commits_ms.last().copied().unwrap_or(f64::NAN)
        );
    }
    if let [files, postgres] = medians[..] {
        println!(
            "a step (two commits), median: files {:.2} ms, postgres {:.2} ms ({:.2}× the files')",
            2.0 * files,
            2.0 * postgres,
            postgres / files
        );
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
