//! What the suites share: a scripted team, a subscriber writing a trace file, the corpus, the
//! `troupe` binary, fake chat servers, a live chat and node processes. A suite takes its helpers
//! from here, never from another suite.

pub(crate) mod a2a_process;
/// The session suite's backends: a fresh Postgres database per test, the SQL helper.
#[path = "../../../crates/session/tests/suite/backends.rs"]
#[allow(dead_code, unused_imports, unused_macros)]
pub(crate) mod backends;
pub(crate) mod binary;
pub(crate) mod chat;
pub(crate) mod chat_live;
pub(crate) mod chat_server;
pub(crate) mod compact;
pub(crate) mod live_view;
pub(crate) mod node_process;
pub(crate) mod ten_steps;
pub(crate) mod trace;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing_subscriber::Registry;
use tracing_subscriber::layer::SubscriberExt;
use troupe::models::{ScriptedModel, ScriptedReply};
use troupe::telemetry::{TelemetryConfig, trace_file_layer};
use troupe::{AgentSpec, Team, TeamConfig, spawn_agent};

/// A coordinator that asks two workers (one of whose models fails once) and combines the
/// answers. Returns the coordinator's answer.
pub async fn run_scripted_team() -> String {
    let coordinator = ScriptedModel::new(
        "scripted-coordinator",
        [
            ScriptedReply::ToolCalls(vec![
                (
                    "ask_agent".into(),
                    r#"{"agent": "namer", "message": "A bakery name?"}"#.into(),
                ),
                (
                    "ask_agent".into(),
                    r#"{"agent": "copywriter", "message": "A slogan?"}"#.into(),
                ),
            ]),
            ScriptedReply::text("Crumb & Co.: fresh every morning."),
        ],
    );
    let namer = ScriptedModel::new("scripted-namer", [ScriptedReply::text("Crumb & Co.")]);
    let copywriter = ScriptedModel::new(
        "scripted-copywriter",
        [ScriptedReply::text("Fresh every morning.")],
    );
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(
        &team,
        AgentSpec::new("coordinator", Arc::new(coordinator)).team_messaging(true),
    )
    .await
    .unwrap();
    spawn_agent(&team, AgentSpec::new("namer", Arc::new(namer)))
        .await
        .unwrap();
    spawn_agent(&team, AgentSpec::new("copywriter", Arc::new(copywriter)))
        .await
        .unwrap();
    let answer = team
        .ask("coordinator", "Name and slogan, please.")
        .await
        .unwrap();
    team.shutdown().await;
    answer
}

/// Run `f` with a thread-local subscriber writing a trace file at `path`.
///
/// `#[tokio::test]` runs on one thread, so actor tasks see the thread-local subscriber too.
pub fn with_trace_file<T>(path: &Path, record_content: bool, f: impl FnOnce() -> T) -> T {
    let config = TelemetryConfig {
        trace_file: Some(path.to_path_buf()),
        record_content,
        ..TelemetryConfig::default()
    };
    let (layer, file) = trace_file_layer::<Registry>(&config).unwrap().unwrap();
    let out = tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
    file.flush();
    out
}

/// The corpus transcripts, or `None` (with a notice) when the corpus is absent.
pub fn corpus_files() -> Option<Vec<PathBuf>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("corpus not found at {}: skipping", dir.display());
        return None;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Some(files)
}
