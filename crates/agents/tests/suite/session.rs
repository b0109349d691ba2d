//! Agents that keep their conversation in a session log: resume, compaction records, a torn
//! tail, a corrupt log.

use std::path::Path;
use std::sync::Arc;

use troupe_agents::{AgentSpec, CompactionSettings, LlmAgent, WorkAhead, spawn_agent};
use troupe_compaction::{Archive, ContextPolicy, expand};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::FileLedger;
use troupe_protocol::MessageKind;
use troupe_runtime::{Checkpoint, Team};
use troupe_session::{SessionRecord, load};
use troupe_tools::ToolRegistry;

use super::support::compression::team;

fn state_of(checkpoint: &Checkpoint) -> (FileLedger, Archive) {
    let state = checkpoint
        .state
        .get::<troupe_agents::LlmAgentState>()
        .unwrap();
    (state.ledger.clone(), state.archive.clone())
}

fn reader(root: &Path, model: Arc<ScriptedModel>, log: &Path) -> AgentSpec {
    AgentSpec::new("coder", model)
        .tools(ToolRegistry::with_file_tools())
        .workspace_root(root)
        .session(log)
}

#[tokio::test]
async fn a_resumed_agent_continues_its_logged_conversation() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let log = dir.path().join("sessions/coder.jsonl");

    let first = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("read_file", r#"{"path": "a.txt"}"#),
            ScriptedReply::text("it says alpha"),
        ],
    ));
    let team1 = team().await;
    spawn_agent(&team1, reader(dir.path(), first, &log))
        .await
        .unwrap();
    team1.ask("coder", "what is in a.txt?").await.unwrap();
    let before = team1.checkpoint("coder").unwrap();
    team1.shutdown().await;

    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert_eq!(logged.conversation, before.conversation);
    assert_eq!(logged.agent.as_deref(), Some("coder"));
    assert_eq!(logged.model.as_deref(), Some("m"));

    // A new process, with another model: the agent comes back with its conversation and ledger.
    let second = Arc::new(ScriptedModel::new(
        "m2",
        [ScriptedReply::text("still alpha")],
    ));
    let team2 = team().await;
    spawn_agent(&team2, reader(dir.path(), second.clone(), &log))
        .await
        .unwrap();
    let restored = team2.checkpoint("coder").unwrap();
    assert_eq!(restored.conversation, before.conversation);
    let (ledger, _) = state_of(&restored);
    assert!(ledger.all_files().contains("a.txt"), "{ledger:?}");

    team2.ask("coder", "and now?").await.unwrap();
    let sent = &second.requests()[0].messages;
    assert_eq!(sent.len(), before.conversation.len() + 1);
    assert_eq!(
        &sent[..before.conversation.len()],
        before.conversation.messages()
    );
    let after = team2.checkpoint("coder").unwrap();
    team2.shutdown().await;

    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert_eq!(logged.conversation, after.conversation);
    assert_eq!(
        logged.model.as_deref(),
        Some("m2"),
        "the model change is logged"
    );
}

fn big(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i}: some file content with several words in it\n"))
        .collect()
}

#[tokio::test]
async fn compactions_are_logged_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..8 {
        std::fs::write(dir.path().join(format!("f{i}.txt")), big(40)).unwrap();
    }
    let log = dir.path().join("coder.jsonl");
    let script = (0..8)
        .map(|i| ScriptedReply::call("read_file", format!(r#"{{"path": "f{i}.txt"}}"#)))
        .chain([ScriptedReply::text("done")]);
    let model = Arc::new(ScriptedModel::new("m", script));
    let settings = CompactionSettings {
        policy: Some(ContextPolicy {
            tool_output_limit_tokens: 100_000,
            ..ContextPolicy::for_window(4_000)
        }),
        // The blocking road: every compaction is done when the request ends, so the checkpoint
        // and the log describe the same conversation, ids to hand out included (a job still in
        // flight holds a loan of ids the log knows nothing of; the background road's log is
        // `work_ahead.rs: a_spliced_compaction_is_logged_as_one_and_loads_back`).
        work_ahead: WorkAhead::Off,
        ..CompactionSettings::default()
    };
    let team1 = team().await;
    spawn_agent(
        &team1,
        reader(dir.path(), model, &log)
            .compaction(settings.clone())
            .max_turns(12),
    )
    .await
    .unwrap();
    assert_eq!(team1.ask("coder", "read them all").await.unwrap(), "done");
    let before = team1.checkpoint("coder").unwrap();
    let stats_before = team1
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap();
    assert!(stats_before.last_compaction.is_some(), "no compaction ran");
    team1.shutdown().await;

    let logged = load(&log).unwrap();
    assert!(
        logged.compactions >= 1,
        "{} compactions",
        logged.compactions
    );
    assert_eq!(logged.conversation, before.conversation);
    let summary = before
        .conversation
        .messages()
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Summary)
        .map(|m| m.text());
    assert_eq!(logged.previous_summary, summary);
    assert!(
        logged.read_files.iter().any(|f| f == "f0.txt"),
        "{:?}",
        logged.read_files
    );

    let team2 = team().await;
    let idle = Arc::new(ScriptedModel::new("m", []));
    spawn_agent(&team2, reader(dir.path(), idle, &log).compaction(settings))
        .await
        .unwrap();
    let restored = team2.checkpoint("coder").unwrap();
    assert_eq!(restored.conversation, before.conversation);
    let (ledger, archive) = state_of(&restored);
    let (ledger_before, archive_before) = state_of(&before);
    assert_eq!(ledger, ledger_before);
    assert_eq!(archive, archive_before);
    // The archive still expands the compacted history back to every original message.
    let originals = expand(&restored.conversation.to_messages(), &archive).unwrap();
    assert_ne!(originals, restored.conversation.to_messages());
    assert_eq!(originals[0].text(), "read them all");
    let full_results = originals
        .iter()
        .filter(|m| m.tool_call_id.is_some() && m.text().contains("line 39:"))
        .count();
    assert_eq!(full_results, 8, "every read's full result is back");
    // The report comes back (its float timing only to JSON precision).
    let without_timing = |r: Option<troupe_protocol::CompactionReport>| {
        r.map(|r| troupe_protocol::CompactionReport {
            duration_ms: 0.0,
            ..r
        })
    };
    let restored_report = team2
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap()
        .last_compaction;
    assert!(restored_report.is_some());
    assert_eq!(
        without_timing(restored_report),
        without_timing(stats_before.last_compaction)
    );
    team2.shutdown().await;
}

#[tokio::test]
async fn a_torn_last_line_costs_only_that_turn() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("one")]));
    let team1 = team().await;
    spawn_agent(&team1, reader(dir.path(), model, &log))
        .await
        .unwrap();
    team1.ask("coder", "first").await.unwrap();
    let before = team1.checkpoint("coder").unwrap();
    team1.shutdown().await;

    // A writer killed mid-line.
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(br#"{"type":"message","id":"m9","kind":"normal","role":"user","con"#);
    std::fs::write(&log, &bytes).unwrap();

    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("two")]));
    let team2 = team().await;
    spawn_agent(&team2, reader(dir.path(), model, &log))
        .await
        .unwrap();
    assert_eq!(
        team2.checkpoint("coder").unwrap().conversation,
        before.conversation
    );
    team2.ask("coder", "second").await.unwrap();
    let after = team2.checkpoint("coder").unwrap();
    team2.shutdown().await;

    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert_eq!(logged.conversation, after.conversation);
    assert_eq!(logged.conversation.len(), before.conversation.len() + 2);
}

/// Spawn an agent on a log holding `text`: the spawn error, after checking the file is untouched.
async fn refused_log(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    std::fs::write(&log, text).unwrap();
    let team = team().await;
    let model = Arc::new(ScriptedModel::new("m", []));
    let error = spawn_agent(&team, reader(dir.path(), model, &log))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(std::fs::read_to_string(&log).unwrap(), text);
    team.shutdown().await;
    error
}

#[tokio::test]
async fn a_corrupt_log_is_a_clear_error_and_is_left_alone() {
    let error = refused_log(concat!(
        r#"{"type":"session","version":1,"agent":"coder","created_ms":1}"#,
        "\n",
        r#"{"type":"commit"}"#,
        "\n",
        "this is not a record\n",
        r#"{"type":"commit"}"#,
        "\n",
    ))
    .await;
    assert!(error.contains("coder.jsonl:3"), "{error}");
    assert!(error.contains("corrupt"), "{error}");
}

#[tokio::test]
async fn a_log_whose_ledger_has_the_wrong_shape_is_refused() {
    let error = refused_log(concat!(
        r#"{"type":"session","version":1,"agent":"coder","created_ms":1}"#,
        "\n",
        r#"{"type":"message","id":"m1","kind":"normal","message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"type":"ledger","ledger":"not a ledger"}"#,
        "\n",
        r#"{"type":"commit"}"#,
        "\n",
    ))
    .await;
    // Refused when the log is read, at the line of the record of the wrong shape.
    assert!(error.contains("coder.jsonl:3"), "{error}");
    assert!(error.contains("FileLedger"), "{error}");
}

/// A log written before the records were typed (format 1, by the agent as of `ce1cd2d`): a turn
/// of eight `read_file` calls, one compaction (archive entries, ledger, report) and a ledger.
const FORMAT_1_LOG: &str = include_str!("../fixtures/session_format_1.jsonl");

#[tokio::test]
async fn a_log_written_before_typed_records_resumes_and_is_written_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    std::fs::write(&log, FORMAT_1_LOG).unwrap();

    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert_eq!(logged.compactions, 1);
    let report = logged.last_report.clone().unwrap();
    assert_eq!((report.tokens_before, report.tokens_after), (3676, 1424));
    assert_eq!(report.tiers.masked, 4);
    assert_eq!(logged.archive_entries.len(), logged.archived.len());
    assert!(!logged.archive_entries.is_empty());
    assert_eq!(logged.ledger.as_ref().unwrap().entries().len(), 8);

    // Every record, read typed and written again, is the same line: the format is unchanged.
    for (i, line) in FORMAT_1_LOG.lines().enumerate() {
        let record: SessionRecord = serde_json::from_str(line).unwrap();
        let written = serde_json::to_string(&record).unwrap();
        assert!(
            written == line,
            "line {} changed:\n{line}\n{written}",
            i + 1
        );
    }

    // An agent resumes from it: conversation, ledger, archive and last report.
    let team = team().await;
    let model = Arc::new(ScriptedModel::new("m", []));
    spawn_agent(&team, reader(dir.path(), model, &log))
        .await
        .unwrap();
    let resumed = team.checkpoint("coder").unwrap();
    assert_eq!(resumed.conversation, logged.conversation);
    let (ledger, archive) = state_of(&resumed);
    assert_eq!(Some(ledger), logged.ledger);
    assert_eq!(archive.entries(), &logged.archive_entries[..]);
    let stats = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap();
    assert_eq!(stats.last_compaction, Some(report));
    team.shutdown().await;
    // Opening it added nothing: the model it names is the one it logged.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), FORMAT_1_LOG);
}

/// A model that panics when asked about `boom` (the agent actor dies and is restarted) and
/// otherwise answers from its script.
struct PanickyModel(ScriptedModel);

#[async_trait::async_trait]
impl troupe_protocol::ChatModel for PanickyModel {
    fn info(&self) -> troupe_protocol::ModelInfo {
        troupe_protocol::ChatModel::info(&self.0)
    }

    async fn chat_stream(
        &self,
        request: troupe_protocol::ChatRequest,
    ) -> Result<troupe_protocol::ChatStream, troupe_protocol::ModelError> {
        if request.messages.iter().any(|m| m.text() == "boom") {
            panic!("the model blew up");
        }
        troupe_protocol::ChatModel::chat_stream(&self.0, request).await
    }
}

#[tokio::test]
async fn a_restarted_agent_keeps_its_session_and_a_second_owner_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let model = Arc::new(PanickyModel(ScriptedModel::new(
        "m",
        [ScriptedReply::text("one"), ScriptedReply::text("two")],
    )));
    let team1 = team().await;
    spawn_agent(&team1, AgentSpec::new("coder", model).session(&log))
        .await
        .unwrap();
    team1.ask("coder", "first").await.unwrap();

    // Another owner of the same log, in this process or another, is refused while the agent
    // lives, and changes nothing.
    let before = std::fs::read(&log).unwrap();
    let other = Arc::new(ScriptedModel::new("m", []));
    let error = spawn_agent(&team1, AgentSpec::new("intruder", other).session(&log))
        .await
        .unwrap_err()
        .to_string();
    let holder = format!("is in use by process {}", std::process::id());
    assert!(error.contains(&holder), "{error}");
    let second = team().await;
    let other = Arc::new(ScriptedModel::new("m", []));
    let error = spawn_agent(&second, AgentSpec::new("coder", other).session(&log))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains(&holder), "{error}");
    second.shutdown().await;
    assert_eq!(std::fs::read(&log).unwrap(), before);

    // A panic restarts the agent in this process: it must not lock itself out of its own log.
    let failed = team1.ask("coder", "boom").await.unwrap_err().to_string();
    assert!(failed.contains("restarted"), "{failed}");
    // The rebuilt agent resumes the request in flight once (durable steps): the model blows up
    // again, so the request is rolled back and never resumed a second time.
    let resumed = team1.agent::<LlmAgent>("coder").resume_request().await;
    assert!(!matches!(resumed, Ok(Some(Ok(_)))), "{resumed:?}");
    assert_eq!(team1.ask("coder", "second").await.unwrap(), "two");
    let after = team1.checkpoint("coder").unwrap();
    team1.shutdown().await;

    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert_eq!(logged.conversation, after.conversation);
    let texts: Vec<String> = logged
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["first", "one", "second", "two"]);

    // Once the team is gone, the log is free again.
    let team3 = team().await;
    let idle = Arc::new(ScriptedModel::new("m", []));
    spawn_agent(&team3, AgentSpec::new("coder", idle).session(&log))
        .await
        .unwrap();
    team3.shutdown().await;
}

#[test]
fn a_rebuild_by_the_same_factory_does_not_wait_for_its_predecessor_to_go() {
    // The supervisor may rebuild a failed agent before the failed one is dropped (its state is
    // dropped on the actor's task, or handed to the supervisor with the exit event): the rebuild
    // must not find the log locked by its own predecessor.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let spec = AgentSpec::new("coder", Arc::new(ScriptedModel::new("m", []))).session(&log);
    let factory = troupe_agents::LlmAgent::factory(spec.clone());
    let failed = factory(None).unwrap();
    let rebuilt = factory(Some(failed.checkpoint())).unwrap();
    // Another factory is another owner: refused while the first one lives.
    let intruder = troupe_agents::LlmAgent::factory(spec);
    let error = intruder(None).map(|_| ()).unwrap_err().to_string();
    assert!(error.contains("is in use by process"), "{error}");
    drop((failed, rebuilt, factory));
    intruder(None).unwrap();
}

/// The checkpoint takes only a request's new ledger entries, yet follows a ledger that `/clear`
/// replaced: after the clear it holds the new entries, not the old ones plus some.
#[tokio::test]
async fn the_checkpointed_ledger_follows_the_agent_through_a_clear() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(dir.path().join(name), format!("{name}\n")).unwrap();
    }
    let log = dir.path().join("ledger.jsonl");
    let read = |path: &str| ScriptedReply::call("read_file", format!(r#"{{"path": "{path}"}}"#));
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            read("a.txt"),
            ScriptedReply::text("read a"),
            read("b.txt"),
            read("c.txt"),
            ScriptedReply::text("read b and c"),
        ],
    ));
    let team = team().await;
    spawn_agent(&team, reader(dir.path(), model, &log))
        .await
        .unwrap();
    team.ask("coder", "read a").await.unwrap();
    team.agent::<LlmAgent>("coder").clear().await.unwrap();
    team.ask("coder", "read b and c").await.unwrap();

    let (ledger, _) = state_of(&team.checkpoint("coder").unwrap());
    let live = team
        .with_agent("coder", |a: &mut troupe_agents::LlmAgent| a.ledger())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ledger, live);
    let paths: Vec<&str> = ledger.entries().iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["b.txt", "c.txt"]);
    team.shutdown().await;
}

/// `/clear` is a job the agent handles while its team keeps running: it records the fresh start
/// in its own log, and the next run resumes from there.
#[tokio::test]
async fn clearing_through_the_agent_records_a_fresh_start_its_log_resumes_from() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("clear.jsonl");
    let model = Arc::new(ScriptedModel::new("m", []).with_fallback("ok"));
    let team = team().await;
    spawn_agent(&team, reader(dir.path(), model.clone(), &log))
        .await
        .unwrap();
    team.ask("coder", "before the clear").await.unwrap();
    team.agent::<LlmAgent>("coder").clear().await.unwrap();
    assert!(team.checkpoint("coder").unwrap().conversation.is_empty());
    team.ask("coder", "after the clear").await.unwrap();
    let texts: Vec<String> = team
        .checkpoint("coder")
        .unwrap()
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["after the clear", "ok"]);
    team.shutdown().await;

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(r#""type":"clear""#), "{text}");
    let resumed = team_with_resumed(dir.path(), model, &log).await;
    let messages = resumed.checkpoint("coder").unwrap().conversation;
    assert_eq!(
        messages
            .messages()
            .iter()
            .map(|m| m.text())
            .collect::<Vec<_>>(),
        ["after the clear", "ok"]
    );
    resumed.shutdown().await;
}

async fn team_with_resumed(root: &Path, model: Arc<ScriptedModel>, log: &Path) -> Team {
    let team = team().await;
    spawn_agent(&team, reader(root, model, log)).await.unwrap();
    team
}
