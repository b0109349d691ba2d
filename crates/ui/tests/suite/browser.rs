//! The page in a real browser (Debian's chromium and chromium-driver, driven by the PyPI
//! `selenium` package: `tests/browser/view_check.py`), against a scripted team: it sees an agent
//! change state, a compaction appear with its receipt, approves one waiting call and denies
//! another (the agent does what was chosen), renders a model answer with `<script>` and
//! `<img onerror>` as text, and is refused without the token or from another origin; it sees a
//! context meter cross its trigger, opens an agent's conversation (the pin, the summary where
//! it sits, tool calls and results) and an archived original, and reads a request's waterfall.
//! Then it times the page taking in 10,000 events, and opening a finished run of 1,000 messages.
//!
//! The python is `TROUPE_SELENIUM_PYTHON` (`.ci/run` sets it to its venv's), else that venv's
//! when it exists, else `python3` (`selenium_python.rs`).
//! Without chromium, chromedriver or selenium the test fails under CI (`CI` set) and is
//! skipped, loudly, elsewhere.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;
use troupe_protocol::Event;
use troupe_runtime::AgentRequest;
use troupe_ui::{UiConfig, serve, serve_session};

use super::selenium_python::{missing, python};
use super::support::{Runs, WRITER_ANSWERS, session_log, team_buffering};

/// Events the page takes in for the measurement.
const LOAD_EVENTS: u64 = 10_000;
/// Requests of the session log the page opens for the measurement: four messages each.
const SESSION_ASKS: usize = 250;

fn screenshots() -> PathBuf {
    // Under target/: kept as CI artifacts, never committed.
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_a_real_browser() {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the browser test cannot run under CI: {why}"
        );
        eprintln!("SKIPPED the_page_in_a_real_browser: {why}");
        return;
    }
    // A finished run of 1,000 messages, opened read-only at the end.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("writer.jsonl");
    session_log(&log, SESSION_ASKS).await;
    let finished = serve_session(
        &troupe_session::SessionStore::files(),
        &log,
        UiConfig::default(),
    )
    .await
    .unwrap();
    let runs = Runs::default();
    // The bus holds the whole load: it is published at once.
    let (team, _) = team_buffering(&runs, LOAD_EVENTS as usize + 1024).await;
    let ui = serve(&team, UiConfig::default()).await.unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/view_check.py");
    let shots = screenshots();
    std::fs::create_dir_all(&shots).unwrap();
    let mut child = Command::new(python())
        .arg(&script)
        .arg(ui.url())
        .arg(&shots)
        .arg(LOAD_EVENTS.to_string())
        .arg(finished.url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The script's lines, echoed as they come (so a failure shows how far it got).
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (said, mut heard) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            println!("browser: {line}");
            let _ = said.send(line);
        }
    });
    let mut next_line = async || -> String {
        tokio::time::timeout(Duration::from_secs(120), heard.recv())
            .await
            .expect("the browser script says something within 120 s")
            .expect("the browser script is still running")
    };
    // The page is open and live before the team works, so it sees everything happen.
    while next_line().await != "OPEN" {}
    assert!(ui.viewers() >= 1);
    for i in 0..WRITER_ANSWERS {
        team.ask("writer", format!("part {i}, please"))
            .await
            .unwrap();
    }
    // The first question is pinned: compaction keeps it, and the page marks it.
    let writer = team.agent::<troupe_agents::LlmAgent>("writer");
    let copy = writer.conversation().await.unwrap();
    let first = copy
        .conversation
        .messages()
        .iter()
        .find(|m| m.role == troupe_protocol::Role::User)
        .unwrap()
        .id;
    writer.pin(first, true).await.unwrap();
    let compacted = writer.compact(None).await.unwrap();
    assert!(compacted.report.receipt.is_some());
    team.ask("writer", "and the last part").await.unwrap();
    let coder = {
        let directory = team.directory().clone();
        tokio::spawn(async move {
            directory
                .ask(
                    "coder",
                    AgentRequest::from_user("clean up"),
                    Duration::from_secs(120),
                )
                .await
        })
    };
    // The page answers the two calls; the coder goes on with what it chose.
    let answer = tokio::select! {
        answer = tokio::time::timeout(Duration::from_secs(120), coder) => {
            answer.expect("the page answered both calls").unwrap().unwrap()
        }
        status = child.wait() => panic!("the browser script ended first: {status:?}"),
    };
    assert_eq!(answer, "done");
    assert_eq!(
        *runs.lock().unwrap(),
        ["rm -rf build"],
        "approved ran, denied did not"
    );
    while next_line().await != "LOAD" {}
    // In bulk, no pause: the view folds them as fast as it can, the page takes what its
    // bounded queue holds and re-syncs from a snapshot when it falls behind.
    for i in 0..LOAD_EVENTS {
        team.events().publish(
            None,
            Event::ToolCallFinished {
                agent: format!("load{}", i % 20),
                tool: "read_file".into(),
                call_id: format!("c{i}"),
                is_error: false,
                ms: i,
            },
        );
    }
    let status = tokio::time::timeout(Duration::from_secs(180), child.wait())
        .await
        .expect("the browser script ends")
        .unwrap();
    assert!(status.success(), "the browser script failed: {status}");
    ui.shutdown().await;
    finished.shutdown().await;
    team.shutdown().await;
}
