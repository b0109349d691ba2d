//! Durable steps and time travel (#46): every model answer and tool result is committed as it
//! completes; a request the log shows in flight resumes from its last step (no model call made
//! again, no finished tool run again, a started one answered as interrupted); a fork ends a new
//! log at any step, the original untouched.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use troupe_agents::{AgentSpec, CompactionSettings, LlmAgent, WorkAhead, spawn_agent};
use troupe_compaction::ContextPolicy;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{Event, MessageKind, Role};
use troupe_runtime::{Team, TeamConfig};
use troupe_session::{Session, SessionError, SessionRecord, StepKind, load, steps};
use troupe_tools::ToolRegistry;

#[derive(Deserialize, schemars::JsonSchema)]
struct RunArgs {
    command: String,
}

/// What the `run` tool ran, one entry per run.
pub(super) type Runs = Arc<std::sync::Mutex<Vec<String>>>;

pub(super) fn run_tool(runs: &Runs) -> ToolRegistry {
    let runs = runs.clone();
    let mut tools = ToolRegistry::new();
    tools
        .register_fn("run", "Run a command.", move |args: RunArgs| {
            let runs = runs.clone();
            async move {
                runs.lock().unwrap().push(args.command.clone());
                Ok(format!("ran {}", args.command))
            }
        })
        .unwrap();
    tools
}

/// The request's model answers: two tool calls, then the final answer.
fn script() -> Vec<ScriptedReply> {
    vec![
        ScriptedReply::call("run", r#"{"command": "a"}"#),
        ScriptedReply::call("run", r#"{"command": "b"}"#),
        ScriptedReply::text("done"),
    ]
}

pub(super) async fn team() -> Team {
    let config = TeamConfig {
        shutdown_grace: Duration::from_millis(200),
        ..TeamConfig::default()
    };
    Team::start(config).await.unwrap()
}

pub(super) fn spec(model: Arc<ScriptedModel>, runs: &Runs, log: &Path) -> AgentSpec {
    AgentSpec::new("coder", model)
        .tools(run_tool(runs))
        .session(log)
}

/// The records of the log at `path`, in order.
pub(super) fn records(path: &Path) -> Vec<SessionRecord> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One request, run whole, with durable steps: its log.
async fn logged_request(dir: &Path) -> std::path::PathBuf {
    let log = dir.join("coder.jsonl");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new("m", script()));
    let team = team().await;
    spawn_agent(&team, spec(model, &runs, &log)).await.unwrap();
    assert_eq!(team.ask("coder", "run a then b").await.unwrap(), "done");
    team.shutdown().await;
    log
}

#[tokio::test]
async fn every_model_answer_and_tool_result_is_its_own_commit() {
    let dir = tempfile::tempdir().unwrap();
    let log = logged_request(dir.path()).await;
    let kinds: Vec<StepKind> = steps(&log).unwrap().iter().map(|s| s.kind).collect();
    use StepKind::*;
    assert_eq!(
        kinds,
        [
            Start,
            Other, // the model's name
            Request,
            ModelCall,
            ToolsStarted,
            ToolCall,
            ToolResults,
            ModelCall,
            ToolsStarted,
            ToolCall,
            ToolResults,
            ModelCall,
            RequestEnd
        ]
    );
    // The answer's usage is in the log, beside the answer.
    let usages = records(&log)
        .iter()
        .filter(|r| matches!(r, SessionRecord::ModelAnswer { usage } if usage.output_tokens > 0))
        .count();
    assert_eq!(usages, 3);
    let session = load(&log).unwrap();
    assert!(!session.in_flight);
    assert!(session.paused.is_empty());
}

#[tokio::test]
async fn request_level_commits_write_one_commit_per_request_and_no_step_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new("m", script()));
    let team = team().await;
    spawn_agent(&team, spec(model, &runs, &log).request_commits_only())
        .await
        .unwrap();
    assert_eq!(team.ask("coder", "run a then b").await.unwrap(), "done");
    team.shutdown().await;
    let records = records(&log);
    let commits = records
        .iter()
        .filter(|r| matches!(r, SessionRecord::Commit))
        .count();
    // The header, the model's name, the request.
    assert_eq!(commits, 3);
    assert!(
        !records.iter().any(|r| matches!(
            r,
            SessionRecord::RequestOpened { .. }
                | SessionRecord::ModelAnswer { .. }
                | SessionRecord::CallResult { .. }
                | SessionRecord::RequestClosed { .. }
                | SessionRecord::CallsStarted { .. }
                | SessionRecord::Paused { .. }
        )),
        "{records:?}"
    );
}

/// The log cut at every step (a process killed there) resumes the request from that step: the
/// model is asked only for the answers the log does not hold, a tool whose result is logged
/// never runs again, one that started without a result is answered as interrupted, and the
/// request ends with the same answer, published for its gone caller.
#[tokio::test]
async fn a_request_cut_at_any_step_resumes_from_it_without_redoing_a_step() {
    let dir = tempfile::tempdir().unwrap();
    let log = logged_request(dir.path()).await;
    let all = steps(&log).unwrap();
    for step in &all {
        let cut = dir.path().join(format!("cut{}.jsonl", step.id));
        Session::fork(&log, step.id, &cut).unwrap();
        let cut_records = records(&cut);
        let answered = cut_records
            .iter()
            .filter(|r| matches!(r, SessionRecord::ModelAnswer { .. }))
            .count();
        let started: Vec<String> = cut_records
            .iter()
            .filter_map(|r| match r {
                SessionRecord::CallsStarted { call_ids } => Some(call_ids.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        let finished = cut_records
            .iter()
            .filter(|r| matches!(r, SessionRecord::CallResult { .. }))
            .count();
        let in_flight = load(&cut).unwrap().in_flight;

        let runs = Runs::default();
        let model = Arc::new(ScriptedModel::new("m", script().into_iter().skip(answered)));
        let team = team().await;
        let mut events = team.subscribe();
        spawn_agent(&team, spec(model.clone(), &runs, &cut))
            .await
            .unwrap();
        let resumed = team
            .agent::<LlmAgent>("coder")
            .resume_request()
            .await
            .unwrap();
        let conversation = team.checkpoint("coder").unwrap().conversation;
        team.shutdown().await;
        let what = format!("cut at step {} ({:?})", step.id, step.kind);
        if !in_flight {
            assert!(resumed.is_none(), "{what}");
            assert!(model.requests().is_empty(), "{what}");
            continue;
        }
        assert_eq!(resumed.unwrap().unwrap(), "done", "{what}");
        assert_eq!(
            model.requests().len(),
            3 - answered,
            "{what}: a logged answer was asked for again"
        );
        // Only calls that had not started run ("a" then "b"): a call the log shows started
        // never runs again, finished or not.
        let expected: Vec<String> = ["a", "b"]
            .iter()
            .skip(started.len())
            .map(|c| c.to_string())
            .collect();
        assert_eq!(*runs.lock().unwrap(), expected, "{what}");
        let interrupted = conversation
            .messages()
            .iter()
            .filter(|m| m.role == Role::Tool && m.text().contains("not run again"))
            .count();
        assert_eq!(
            interrupted,
            started.len() - finished,
            "{what}: a started call without a result is answered as interrupted"
        );
        let mut told = None;
        while let Ok(record) = events.try_recv() {
            if let Event::RequestResumed { answer, .. } = record.event {
                told = answer;
            }
        }
        assert_eq!(told.as_deref(), Some("done"), "{what}: no RequestResumed");
        let reloaded = load(&cut).unwrap();
        assert!(!reloaded.in_flight, "{what}");
        assert!(reloaded.warnings.is_empty(), "{what}");
    }
}

#[tokio::test]
async fn a_fork_leaves_its_original_alone_and_refuses_an_unknown_step_or_an_existing_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = logged_request(dir.path()).await;
    let original = std::fs::read(&log).unwrap();
    let count = steps(&log).unwrap().len();

    let out = dir.path().join("fork.jsonl");
    let err = Session::fork(&log, count + 5, &out).unwrap_err();
    assert!(matches!(err, SessionError::UnknownStep { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("has no step {}", count + 5)),
        "{err}"
    );
    assert!(!out.exists() || std::fs::read(&out).unwrap().is_empty());

    let forked = Session::fork(&log, 3, &out).unwrap();
    assert!(forked.in_flight, "step 3 is the model's first answer");
    assert_eq!(steps(&out).unwrap().len(), 4);
    let err = Session::fork(&log, 2, &out).unwrap_err();
    assert!(matches!(err, SessionError::Exists { .. }), "{err}");
    assert_eq!(std::fs::read(&log).unwrap(), original);

    // A log its agent holds is not read mid-commit: the fork is refused.
    let team = team().await;
    let runs = Runs::default();
    let idle = Arc::new(ScriptedModel::new("m", []));
    spawn_agent(&team, spec(idle, &runs, &log)).await.unwrap();
    let err = Session::fork(&log, 2, &dir.path().join("other.jsonl")).unwrap_err();
    assert!(matches!(err, SessionError::InUse { .. }), "{err}");
    team.shutdown().await;
}

fn big(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i}: some file content with several words in it\n"))
        .collect()
}

#[tokio::test]
async fn a_fork_before_a_compaction_holds_the_conversation_as_it_was_then() {
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
        work_ahead: WorkAhead::Off,
        ..CompactionSettings::default()
    };
    let team = super::support::compression::team().await;
    let coder = AgentSpec::new("coder", model.clone())
        .tools(ToolRegistry::with_file_tools())
        .workspace_root(dir.path())
        .session(&log)
        .compaction(settings)
        .max_turns(12);
    spawn_agent(&team, coder).await.unwrap();
    assert_eq!(team.ask("coder", "read them all").await.unwrap(), "done");
    team.shutdown().await;

    let all = steps(&log).unwrap();
    let compaction = all
        .iter()
        .find(|s| s.kind == StepKind::Compaction)
        .expect("a compaction step");
    let out = dir.path().join("before.jsonl");
    let forked = Session::fork(&log, compaction.id - 1, &out).unwrap();
    assert_eq!(forked.compactions, 0);
    assert!(forked.in_flight);
    let messages = forked.conversation.messages();
    assert!(
        messages.iter().all(|m| m.kind == MessageKind::Normal),
        "no summary or stub before the compaction"
    );
    // Exactly what the model was sent at its last call before the compaction, with that call's
    // answer and its tool result.
    let answers = std::fs::read_to_string(&out)
        .unwrap()
        .matches(r#""type":"model_answer""#)
        .count();
    let sent = &model.requests()[answers - 1].messages;
    assert_eq!(messages.len(), sent.len() + 2);
    for (kept, sent) in messages.iter().zip(sent) {
        assert_eq!((kept.role, kept.text()), (sent.role, sent.text()));
    }
    assert!(load(&log).unwrap().compactions >= 1);
}

/// A log of format 2, cut while the second tool call ran: the request is in flight, the first
/// call answered from the log, the second started without a result.
const FORMAT_2_LOG: &str = include_str!("../fixtures/session_format_2.jsonl");

#[tokio::test]
async fn a_log_of_format_2_loads_is_written_the_same_and_resumes_its_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    std::fs::write(&log, FORMAT_2_LOG).unwrap();
    let logged = load(&log).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert!(logged.in_flight);
    assert_eq!(logged.paused.len(), 1);
    assert!(logged.paused[0].started && logged.paused[0].result.is_none());
    for (i, line) in FORMAT_2_LOG.lines().enumerate() {
        let record: SessionRecord = serde_json::from_str(line).unwrap();
        let written = serde_json::to_string(&record).unwrap();
        assert!(
            written == line,
            "line {} changed:\n{line}\n{written}",
            i + 1
        );
    }

    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("done")]));
    let team = team().await;
    spawn_agent(&team, spec(model.clone(), &runs, &log))
        .await
        .unwrap();
    let resumed = team.agent::<LlmAgent>("coder").resume_request().await;
    team.shutdown().await;
    assert_eq!(resumed.unwrap().unwrap().unwrap(), "done");
    assert_eq!(model.requests().len(), 1);
    assert!(runs.lock().unwrap().is_empty(), "a started call ran again");
    let sent = &model.requests()[0].messages;
    let results: Vec<String> = sent
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .collect();
    assert_eq!(results[0], "ran a");
    assert!(results[1].contains("not run again"), "{results:?}");
    assert!(!load(&log).unwrap().in_flight);
}

/// The next approval request on the bus.
async fn requested(
    events: &mut tokio::sync::broadcast::Receiver<troupe_protocol::EventRecord>,
) -> troupe_protocol::ApprovalId {
    loop {
        let record = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("an approval request within 30 s")
            .unwrap();
        if let Event::ApprovalRequested { id, .. } = record.event {
            return id;
        }
    }
}

#[tokio::test]
async fn a_request_paused_for_approval_survives_the_process_and_finishes_before_the_next() {
    use troupe_tools::approval::{ApprovalPolicy, ApprovalRule, Permission};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let ask = || {
        ApprovalPolicy::new([ApprovalRule::argument_prefix(
            "run",
            "command",
            "rm ",
            Permission::Ask,
        )])
    };
    let first = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedReply::call("run", r#"{"command": "rm a"}"#)],
    ));
    let team1 = team().await;
    let mut events = team1.subscribe();
    spawn_agent(&team1, spec(first, &runs, &log).approval(ask()))
        .await
        .unwrap();
    let directory = team1.directory().clone();
    let asking = tokio::spawn(async move {
        let request = troupe_runtime::AgentRequest::from_user("tidy");
        directory
            .ask("coder", request, Duration::from_secs(60))
            .await
    });
    requested(&mut events).await;
    asking.abort();
    team1.shutdown().await;
    assert!(load(&log).unwrap().in_flight);

    // The next process: its next request asks again, runs the call once, finishes the request
    // in flight (its answer told on the bus), then answers the new one.
    let second = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedReply::text("tidied"), ScriptedReply::text("fine")],
    ));
    let team2 = team().await;
    let mut events = team2.subscribe();
    spawn_agent(&team2, spec(second.clone(), &runs, &log).approval(ask()))
        .await
        .unwrap();
    let directory = team2.directory().clone();
    let asking = tokio::spawn(async move {
        let request = troupe_runtime::AgentRequest::from_user("status?");
        directory
            .ask("coder", request, Duration::from_secs(60))
            .await
    });
    let id = requested(&mut events).await;
    team2.approve(&id).unwrap();
    assert_eq!(asking.await.unwrap().unwrap(), "fine");
    let mut told = None;
    while let Ok(record) = events.try_recv() {
        if let Event::RequestResumed { answer, .. } = record.event {
            told = answer;
        }
    }
    assert_eq!(told.as_deref(), Some("tidied"));
    assert_eq!(*runs.lock().unwrap(), ["rm a"]);
    let sent = second.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].messages.last().unwrap().role, Role::Tool);
    assert_eq!(sent[1].messages.last().unwrap().text(), "status?");
    team2.shutdown().await;
    assert!(!load(&log).unwrap().in_flight);
}

#[tokio::test]
async fn a_rolled_back_request_leaves_a_log_that_loads_as_the_conversation_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::text("one"),
            ScriptedReply::call("run", r#"{"command": "a"}"#),
            ScriptedReply::Error(troupe_protocol::ModelError::Unavailable(
                "the provider is down".to_string(),
            )),
            ScriptedReply::text("two"),
        ],
    ));
    let team = team().await;
    spawn_agent(&team, spec(model, &runs, &log)).await.unwrap();
    team.ask("coder", "first").await.unwrap();
    // Its steps are committed, then the provider fails: the request is rolled back.
    assert!(team.ask("coder", "run a").await.is_err());
    assert_eq!(team.ask("coder", "second").await.unwrap(), "two");
    let after = team.checkpoint("coder").unwrap().conversation;
    team.shutdown().await;
    let logged = load(&log).unwrap();
    assert_eq!(logged.conversation, after);
    let texts: Vec<String> = logged
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["first", "one", "second", "two"]);
    assert!(!logged.in_flight);
    // A rollback is no compaction: it is written as what it is.
    assert_eq!(
        logged.compactions, 0,
        "the rollback counted as a compaction"
    );
    let written = records(&log);
    assert!(
        written
            .iter()
            .any(|r| matches!(r, SessionRecord::RolledBack { .. }))
    );
    assert!(
        !written
            .iter()
            .any(|r| matches!(r, SessionRecord::Compaction(_)))
    );
    assert!(
        steps(&log)
            .unwrap()
            .iter()
            .any(|s| s.kind == StepKind::RolledBack)
    );
}

#[derive(Deserialize, schemars::JsonSchema)]
#[allow(dead_code)] // only its schema is used
struct Verdict {
    ok: bool,
}

/// A typed ask cut after its first model answer resumes with its schema: every model call of
/// the resumed request carries the answer format the first ones did (it is in the log's
/// `request_opened`), not free text.
#[tokio::test]
async fn a_resumed_typed_ask_keeps_its_answer_format() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let format = troupe_protocol::ResponseFormat::of::<Verdict>();
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("run", r#"{"command": "a"}"#),
            ScriptedReply::text(r#"{"ok": true}"#),
        ],
    ));
    let first = team().await;
    spawn_agent(&first, spec(model.clone(), &runs, &log))
        .await
        .unwrap();
    let request = troupe_runtime::AgentRequest {
        response_format: Some(format.clone()),
        ..troupe_runtime::AgentRequest::from_user("check a")
    };
    first
        .directory()
        .ask("coder", request, Duration::from_secs(60))
        .await
        .unwrap();
    first.shutdown().await;
    assert!(
        model
            .requests()
            .iter()
            .all(|r| r.response_format.as_ref() == Some(&format))
    );

    // Cut after the model's first answer: the resumed request makes the second call.
    let first_answer = steps(&log)
        .unwrap()
        .into_iter()
        .find(|s| s.kind == StepKind::ModelCall)
        .unwrap();
    let cut = dir.path().join("cut.jsonl");
    Session::fork(&log, first_answer.id, &cut).unwrap();
    let resumed_model = Arc::new(ScriptedModel::new(
        "m",
        [ScriptedReply::text(r#"{"ok": true}"#)],
    ));
    let team = team().await;
    spawn_agent(&team, spec(resumed_model.clone(), &runs, &cut))
        .await
        .unwrap();
    let resumed = team.agent::<LlmAgent>("coder").resume_request().await;
    team.shutdown().await;
    assert_eq!(resumed.unwrap().unwrap().unwrap(), r#"{"ok": true}"#);
    let sent = resumed_model.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].response_format.as_ref(),
        Some(&format),
        "the resumed call went without the typed ask's schema"
    );
}

/// A log cut at every byte offset (a process or disk that stopped anywhere, not only between
/// commits) loads: the torn tail is dropped with a warning, every step committed before the
/// cut is kept, and the conversation is the one the fork at the last kept step holds. Opening
/// it for writing cuts the tail off, and the next commit follows the last whole one.
#[tokio::test]
async fn a_log_cut_at_any_byte_loads_with_every_step_committed_before_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("run", r#"{"command": "é → ✓"}"#),
            ScriptedReply::call("run", r#"{"command": "b"}"#),
            ScriptedReply::text("done: ünïcode ✓"),
        ],
    ));
    let team = team().await;
    spawn_agent(&team, spec(model, &runs, &log)).await.unwrap();
    team.ask("coder", "run é then b — 🚀").await.unwrap();
    team.shutdown().await;
    let bytes = std::fs::read(&log).unwrap();
    let all = steps(&log).unwrap();
    assert!(all.len() > 10, "{all:?}");
    // The conversation each whole step leaves, by its fork.
    let at_step: Vec<Session> = all
        .iter()
        .map(|s| Session::fork(&log, s.id, &dir.path().join(format!("s{}.jsonl", s.id))).unwrap())
        .collect();
    // Where each step's commit ends: its commit line's newline.
    let ends: Vec<usize> = bytes
        .split_inclusive(|b| *b == b'\n')
        .scan(0, |at, line| {
            *at += line.len();
            Some((*at, line))
        })
        .filter(|(_, line)| line.starts_with(br#"{"type":"commit"}"#))
        .map(|(at, _)| at)
        .collect();
    assert_eq!(ends.len(), all.len());
    let cut = dir.path().join("cut.jsonl");
    for len in 0..=bytes.len() {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let what = format!("cut at byte {len} of {}", bytes.len());
        let loaded = load(&cut).unwrap_or_else(|e| panic!("{what}: {e}"));
        // A commit line missing only its newline still counts.
        let kept = ends
            .iter()
            .filter(|end| **end <= len || (**end - 1 == len))
            .count();
        if len % 7 == 0 {
            let listed = steps(&cut).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(listed.len(), kept, "{what}: a committed step was lost");
        }
        if kept > 0 {
            let expected = &at_step[kept - 1];
            assert_eq!(
                loaded.records, expected.records,
                "{what}: a committed record was lost"
            );
            assert_eq!(loaded.conversation, expected.conversation, "{what}");
            assert_eq!(loaded.in_flight, expected.in_flight, "{what}");
            assert_eq!(loaded.paused, expected.paused, "{what}");
        }
        let whole = ends.contains(&len) || ends.contains(&(len + 1)) || len == 0;
        assert_eq!(
            loaded.warnings.is_empty(),
            whole,
            "{what}: {:?}",
            loaded.warnings
        );
    }
    // Opened for writing, a torn log is cut back to its last commit and goes on from there.
    for len in [ends[3] + 1, ends[6] + 17, bytes.len() - 3] {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let (mut open, session) = troupe_session::SessionLog::open(&cut).unwrap();
        assert!(!session.warnings.is_empty());
        open.append(SessionRecord::ModelChange {
            model: "other".to_string(),
        });
        open.flush().unwrap();
        drop(open);
        let reloaded = load(&cut).unwrap();
        assert!(reloaded.warnings.is_empty(), "{:?}", reloaded.warnings);
        assert_eq!(reloaded.conversation, session.conversation);
        assert_eq!(reloaded.model.as_deref(), Some("other"));
    }
}

/// Answers every approval request on `team`'s bus with `decide(arguments)` (`Err`: deny with
/// that reason, `Ok(Some)`: approve with edited arguments, `Ok(None)`: approve as written);
/// counts the requests.
fn approver(
    team: &Team,
    decide: impl Fn(&str) -> Result<Option<String>, String> + Send + 'static,
) -> (
    tokio::task::JoinHandle<()>,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    use troupe_protocol::ApprovalDecision;
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = asked.clone();
    let approvals = team.approvals().clone();
    let mut events = team.subscribe();
    let task = tokio::spawn(async move {
        while let Ok(record) = events.recv().await {
            if let Event::ApprovalRequested { id, arguments, .. } = record.event {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let decision = match decide(&arguments) {
                    Ok(arguments) => ApprovalDecision::Approve { arguments },
                    Err(reason) => ApprovalDecision::Deny { reason },
                };
                let _ = approvals.decide(&id, decision);
            }
        }
    });
    (task, asked)
}

fn ask_about_rm() -> troupe_tools::approval::ApprovalPolicy {
    use troupe_tools::approval::{ApprovalPolicy, ApprovalRule, Permission};
    ApprovalPolicy::new([ApprovalRule::argument_prefix(
        "run",
        "command",
        "rm ",
        Permission::Ask,
    )])
}

/// One request whose answer calls `rm a` and `rm b` (both asked about), answered by `decide`;
/// its log, and what ran.
async fn asked_batch(
    dir: &Path,
    decide: impl Fn(&str) -> Result<Option<String>, String> + Send + 'static,
) -> (std::path::PathBuf, Vec<String>) {
    let log = dir.join("coder.jsonl");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::ToolCalls(vec![
                ("run".to_string(), r#"{"command": "rm a"}"#.to_string()),
                ("run".to_string(), r#"{"command": "rm b"}"#.to_string()),
            ]),
            ScriptedReply::text("done"),
        ],
    ));
    let team = team().await;
    let (answering, _) = approver(&team, decide);
    spawn_agent(&team, spec(model, &runs, &log).approval(ask_about_rm()))
        .await
        .unwrap();
    assert_eq!(team.ask("coder", "tidy").await.unwrap(), "done");
    answering.abort();
    team.shutdown().await;
    let ran = runs.lock().unwrap().clone();
    (log, ran)
}

/// The log cut right after its batch's calls were recorded started (the process died as they
/// began), resumed in a new process whose approver says yes to everything: what ran there,
/// how many approvals it asked, and the tool results the model was sent.
async fn resumed_after_start(dir: &Path, log: &Path) -> (Vec<String>, usize, Vec<String>) {
    let started = steps(log)
        .unwrap()
        .into_iter()
        .find(|s| s.kind == StepKind::ToolsStarted)
        .expect("a tools-started step");
    let cut = dir.join("cut.jsonl");
    Session::fork(log, started.id, &cut).unwrap();
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("done")]));
    let team = team().await;
    let (answering, asked) = approver(&team, |_| Ok(None));
    spawn_agent(
        &team,
        spec(model.clone(), &runs, &cut).approval(ask_about_rm()),
    )
    .await
    .unwrap();
    let resumed = team.agent::<LlmAgent>("coder").resume_request().await;
    answering.abort();
    team.shutdown().await;
    assert_eq!(resumed.unwrap().unwrap().unwrap(), "done");
    let sent = model.requests()[0]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .collect();
    let ran = runs.lock().unwrap().clone();
    (ran, asked.load(std::sync::atomic::Ordering::SeqCst), sent)
}

/// A call a person denied before the process died stays denied after the restart: it is
/// answered from the log (the denial is committed with the batch's start), never asked about
/// again — so an approver of the new process cannot let it run — and never run.
#[tokio::test]
async fn a_call_denied_before_a_crash_never_runs_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (log, ran) = asked_batch(dir.path(), |arguments| {
        if arguments.contains("rm a") {
            Err("not that one".to_string())
        } else {
            Ok(None)
        }
    })
    .await;
    assert_eq!(ran, ["rm b"]);
    let (ran, asked, sent) = resumed_after_start(dir.path(), &log).await;
    assert!(ran.is_empty(), "ran after the restart: {ran:?}");
    assert_eq!(
        asked, 0,
        "a call answered before the crash was asked about again"
    );
    assert!(sent[0].contains("not that one"), "{sent:?}");
    assert!(sent[1].contains("not run again"), "{sent:?}");
}

/// A call approved with edited arguments whose process died as it started is never run after
/// the restart — neither as edited nor as the model wrote it: it is answered as interrupted.
/// Cut before the batch started (the approvals not yet committed), each call is asked about
/// again and runs exactly as the new answer says.
#[tokio::test]
async fn a_call_approved_before_a_crash_runs_as_approved_or_is_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let (log, ran) = asked_batch(dir.path(), |arguments| {
        Ok(Some(arguments.replace("rm ", "rm -i ")))
    })
    .await;
    assert_eq!(ran, ["rm -i a", "rm -i b"]);
    let (ran, asked, sent) = resumed_after_start(dir.path(), &log).await;
    assert!(ran.is_empty(), "ran after the restart: {ran:?}");
    assert_eq!(asked, 0);
    assert!(sent.iter().all(|s| s.contains("not run again")), "{sent:?}");

    // Cut at the pause: nothing was approved in the log, so both are asked again, and run as
    // this process's approver answers (here: as the model wrote them).
    let paused = steps(&log)
        .unwrap()
        .into_iter()
        .rfind(|s| s.kind == StepKind::Paused)
        .expect("a paused step");
    let cut = dir.path().join("paused.jsonl");
    Session::fork(&log, paused.id, &cut).unwrap();
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("done")]));
    let asking = team().await;
    let (answering, asked) = approver(&asking, |_| Ok(None));
    spawn_agent(&asking, spec(model, &runs, &cut).approval(ask_about_rm()))
        .await
        .unwrap();
    let resumed = asking.agent::<LlmAgent>("coder").resume_request().await;
    answering.abort();
    asking.shutdown().await;
    assert_eq!(resumed.unwrap().unwrap().unwrap(), "done");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(*runs.lock().unwrap(), ["rm a", "rm b"]);

    // Cut after the first edited call's result: the resumed model is told, as the live one
    // was, that it ran with the person's arguments, not its own.
    let result = steps(&log)
        .unwrap()
        .into_iter()
        .find(|s| s.kind == StepKind::ToolCall)
        .expect("a tool call step");
    let cut = dir.path().join("result.jsonl");
    Session::fork(&log, result.id, &cut).unwrap();
    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("done")]));
    let team = team().await;
    spawn_agent(
        &team,
        spec(model.clone(), &runs, &cut).approval(ask_about_rm()),
    )
    .await
    .unwrap();
    let resumed = team.agent::<LlmAgent>("coder").resume_request().await;
    team.shutdown().await;
    assert_eq!(resumed.unwrap().unwrap().unwrap(), "done");
    let answered = model.requests()[0]
        .messages
        .iter()
        .find(|m| m.role == Role::Tool && m.text().contains("ran rm -i"))
        .map(|m| m.text())
        .expect("the logged result");
    assert!(
        answered.contains("edited by the person approving"),
        "{answered}"
    );
}

/// A request paused for approval and resumed by another process is judged by that process's
/// deny rules on exactly the call that runs — the logged assistant message's — even when the
/// pause record's copy of the arguments says something else (a log edited or damaged there).
#[tokio::test]
async fn a_resumed_pause_is_judged_by_the_deny_rules_on_the_call_that_runs() {
    use troupe_tools::approval::{ApprovalPolicy, ApprovalRule, Permission};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("run", r#"{"command": "sudo rm -rf /"}"#),
            ScriptedReply::text("done"),
        ],
    ));
    // The first process allows everything.
    let team1 = team().await;
    spawn_agent(&team1, spec(model, &runs, &log)).await.unwrap();
    team1.ask("coder", "go").await.unwrap();
    team1.shutdown().await;
    let answer = steps(&log)
        .unwrap()
        .into_iter()
        .find(|s| s.kind == StepKind::ModelCall)
        .unwrap();
    let cut = dir.path().join("cut.jsonl");
    Session::fork(&log, answer.id, &cut).unwrap();
    // The pause record's copy of the call says something harmless.
    let text = std::fs::read_to_string(&cut).unwrap();
    let edited = text.replace(
        r#""arguments":"{\"command\": \"sudo rm -rf /\"}","ask":false"#,
        r#""arguments":"{\"command\": \"ls\"}","ask":false"#,
    );
    assert_ne!(edited, text, "the pause record was not found");
    std::fs::write(&cut, edited).unwrap();

    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("done")]));
    let deny_sudo = ApprovalPolicy::new([ApprovalRule::argument_prefix(
        "run",
        "command",
        "sudo",
        Permission::Deny,
    )]);
    let team2 = team().await;
    spawn_agent(&team2, spec(model.clone(), &runs, &cut).approval(deny_sudo))
        .await
        .unwrap();
    let resumed = team2.agent::<LlmAgent>("coder").resume_request().await;
    team2.shutdown().await;
    assert_eq!(resumed.unwrap().unwrap().unwrap(), "done");
    assert!(
        runs.lock().unwrap().is_empty(),
        "{:?}",
        runs.lock().unwrap()
    );
    let sent = &model.requests()[0].messages;
    assert!(
        sent.last().unwrap().text().contains("denies"),
        "{:?}",
        sent.last()
    );
}

/// Hostile forks are clear errors that leave the original byte for byte as it was and create
/// nothing: a new log that is the original (by its path, a symbolic link or a hard link), one
/// in a directory that does not exist, a log that does not exist, a step only a torn tail
/// holds, or a step past the log's end (an id of another, longer log).
#[tokio::test]
async fn a_hostile_fork_is_a_clear_error_and_leaves_the_original_alone() {
    let dir = tempfile::tempdir().unwrap();
    let log = logged_request(dir.path()).await;
    let count = steps(&log).unwrap().len();
    // A torn tail: the next commit was being written when the process died.
    let whole = std::fs::read(&log).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(br#"{"type":"message","id":99,"role":"user","content":"half"#);
    std::fs::write(&log, &torn).unwrap();
    let original = std::fs::read(&log).unwrap();
    let unchanged = || {
        assert_eq!(
            std::fs::read(&log).unwrap(),
            original,
            "the original changed"
        )
    };

    let symlink = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&log, &symlink).unwrap();
    let hard = dir.path().join("hard.jsonl");
    std::fs::hard_link(&log, &hard).unwrap();
    for out in [&log, &symlink, &hard] {
        let err = Session::fork(&log, 2, out).unwrap_err();
        assert!(matches!(err, SessionError::Exists { .. }), "{err}");
        unchanged();
    }

    let missing_dir = dir.path().join("no/such/dir/fork.jsonl");
    let err = Session::fork(&log, 2, &missing_dir).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert!(
        !dir.path().join("no").exists(),
        "a fork created directories"
    );
    unchanged();

    let missing_log = dir.path().join("gone.jsonl");
    let err = Session::fork(&missing_log, 1, &dir.path().join("f.jsonl")).unwrap_err();
    assert!(matches!(err, SessionError::Io { .. }), "{err}");
    assert!(err.to_string().contains("gone.jsonl"), "{err}");
    assert!(!missing_log.exists(), "forking a missing log created it");
    assert!(!dir.path().join("f.jsonl").exists());

    // The torn tail holds no step: its id is past the end, as is one of a longer log.
    let out = dir.path().join("fork.jsonl");
    for at in [count, count + 40] {
        let err = Session::fork(&log, at, &out).unwrap_err();
        assert!(matches!(err, SessionError::UnknownStep { .. }), "{err}");
        assert!(
            err.to_string()
                .contains(&format!("its steps are 0 to {}", count - 1)),
            "{err}"
        );
        unchanged();
    }
    assert!(!out.exists() || std::fs::read(&out).unwrap().is_empty());
    // The last whole step forks without the torn bytes.
    let forked = Session::fork(&log, count - 1, &out).unwrap();
    assert!(forked.warnings.is_empty(), "{:?}", forked.warnings);
    assert_eq!(std::fs::read(&out).unwrap(), whole);
    unchanged();
}

/// A request whose emergency compaction (the provider refused the context) is followed by a
/// failed retry is rolled back: the log writes the rollback as a `rolled_back` record (not a
/// compaction, though the compaction's archive entries, which the agent keeps, go with it) and
/// loads as the live agent holds it.
#[tokio::test]
async fn a_rollback_after_an_emergency_compaction_is_no_compaction_and_keeps_its_archive() {
    use super::support::compression::{big, policy, team_with_compressor};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let mut reader = ToolRegistry::new();
    reader
        .register_fn(
            "read_big",
            "Read a big file.",
            |_: troupe_tools::NoArgs| async move { Ok::<_, troupe_tools::ToolError>(big(40)) },
        )
        .unwrap();
    let script = (0..6)
        .map(|_| ScriptedReply::call("read_big", "{}"))
        .chain([
            ScriptedReply::text("read them all"),
            ScriptedReply::Error(troupe_protocol::ModelError::ContextLengthExceeded(
                "this model's maximum context length is 4000 tokens".into(),
            )),
            ScriptedReply::Error(troupe_protocol::ModelError::Unavailable(
                "the provider is down".into(),
            )),
        ]);
    let model = Arc::new(ScriptedModel::new("coder", script));
    let team = team_with_compressor(None).await;
    let settings = CompactionSettings {
        auto: false,
        output_reserve: Some(0),
        policy: Some(policy()),
        ..CompactionSettings::default()
    };
    let coder = AgentSpec::new("coder", model)
        .tools(reader)
        .compaction(settings)
        .max_turns(10)
        .session(&log);
    spawn_agent(&team, coder).await.unwrap();
    team.ask("coder", "read everything").await.unwrap();
    assert!(team.ask("coder", "and now?").await.is_err());
    let live = team
        .agent::<LlmAgent>("coder")
        .conversation()
        .await
        .unwrap();
    let stats = team
        .agent::<LlmAgent>("coder")
        .context_stats()
        .await
        .unwrap();
    team.shutdown().await;
    assert!(!live.archive.is_empty(), "the emergency compaction ran");
    assert!(stats.last_compaction.is_some());
    let logged = load(&log).unwrap();
    assert_eq!(
        logged.compactions, 0,
        "the rollback counted as a compaction"
    );
    assert_eq!(logged.conversation, live.conversation);
    assert_eq!(logged.archive_entries, live.archive.entries());
    assert_eq!(logged.last_report, stats.last_compaction);
}
