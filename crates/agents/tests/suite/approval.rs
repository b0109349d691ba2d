//! Tool approval (#33): a call the policy asks about pauses the turn until the team approves
//! (possibly with edited arguments) or denies it; a denial, a timeout and a policy's deny are
//! the tool results the model sees; a paused turn survives the process (the session log) and
//! is asked again, and a call that started is never run twice.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use troupe_agents::{AgentSpec, spawn_agent};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::ApprovalId;
use troupe_protocol::{ChatRequest, Event, EventRecord, Role};
use troupe_runtime::approval::ApprovalError;
use troupe_runtime::{Team, TeamConfig};
use troupe_session::load;
use troupe_tools::ToolRegistry;
use troupe_tools::approval::{ApprovalPolicy, ApprovalRule, Permission};

#[derive(Deserialize, schemars::JsonSchema)]
struct RunArgs {
    command: String,
}

/// What the `run` tool saw: one entry per call that ran.
type Runs = Arc<std::sync::Mutex<Vec<String>>>;

/// A `run` tool that records each command it runs; `hold` makes it wait forever (a call in
/// flight when the process stops).
fn tools(runs: &Runs, hold: bool) -> ToolRegistry {
    let runs = runs.clone();
    let mut tools = ToolRegistry::new();
    tools
        .register_fn("run", "Run a command.", move |args: RunArgs| {
            let runs = runs.clone();
            async move {
                runs.lock().unwrap().push(args.command.clone());
                if hold {
                    std::future::pending::<()>().await;
                }
                Ok(format!("ran {}", args.command))
            }
        })
        .unwrap();
    tools
}

fn ask_rm() -> ApprovalPolicy {
    ApprovalPolicy::new([
        ApprovalRule::argument_prefix("run", "command", "rm ", Permission::Ask),
        ApprovalRule::argument_prefix("run", "command", "sudo ", Permission::Deny),
    ])
}

fn spec(model: Arc<ScriptedModel>, runs: &Runs, policy: ApprovalPolicy) -> AgentSpec {
    AgentSpec::new("coder", model)
        .tools(tools(runs, false))
        .approval(policy)
}

async fn team() -> Team {
    let config = TeamConfig {
        shutdown_grace: Duration::from_millis(200),
        ..TeamConfig::default()
    };
    Team::start(config).await.unwrap()
}

/// The next approval request on the bus.
async fn requested(
    events: &mut tokio::sync::broadcast::Receiver<EventRecord>,
) -> (ApprovalId, String) {
    loop {
        let record = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("an approval request within 30 s")
            .unwrap();
        if let Event::ApprovalRequested { id, arguments, .. } = record.event {
            return (id, arguments);
        }
    }
}

/// The tool message the model was sent in `request`.
fn tool_result(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .expect("a tool result")
}

fn script(command: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("run", format!(r#"{{"command": "{command}"}}"#)),
            ScriptedReply::text("done"),
        ],
    ))
}

#[tokio::test]
async fn a_denial_is_the_tool_result_the_model_sees() {
    let runs = Runs::default();
    let model = script("rm -rf build");
    let team = team().await;
    spawn_agent(&team, spec(model.clone(), &runs, ask_rm()))
        .await
        .unwrap();
    let mut events = team.subscribe();
    let asking = tokio::spawn({
        let team_ask = team.directory().clone();
        async move {
            team_ask
                .ask(
                    "coder",
                    troupe_runtime::AgentRequest::from_user("clean up"),
                    Duration::from_secs(60),
                )
                .await
        }
    });
    let (id, arguments) = requested(&mut events).await;
    assert!(
        id.to_string().starts_with("coder:call_1#"),
        "the agent, the model's call id and the opening: {id}"
    );
    assert!(arguments.contains("rm -rf build"), "{arguments}");
    assert_eq!(team.approvals().waiting(), vec![id.clone()]);
    team.deny(&id, "not the build dir").unwrap();
    assert_eq!(asking.await.unwrap().unwrap(), "done");
    assert!(runs.lock().unwrap().is_empty(), "a denied call never runs");
    let seen = tool_result(&model.requests()[1]);
    assert!(
        seen.contains("denied") && seen.contains("not the build dir"),
        "{seen}"
    );
    // Answered once: the id is gone.
    assert_eq!(team.approve(&id), Err(ApprovalError::Unknown(id.clone())));
    team.shutdown().await;
}

#[tokio::test]
async fn an_approval_with_edited_arguments_runs_those() {
    let runs = Runs::default();
    let model = script("rm -rf /");
    let team = team().await;
    spawn_agent(&team, spec(model.clone(), &runs, ask_rm()))
        .await
        .unwrap();
    let mut events = team.subscribe();
    let directory = team.directory().clone();
    let asking = tokio::spawn(async move {
        let request = troupe_runtime::AgentRequest::from_user("clean up");
        directory
            .ask("coder", request, Duration::from_secs(60))
            .await
    });
    let (id, _) = requested(&mut events).await;
    // Not an object: refused, and the call still waits.
    assert!(matches!(
        team.approve_with(&id, "rm -rf build"),
        Err(ApprovalError::InvalidArguments { .. })
    ));
    team.approve_with(&id, r#"{"command": "rm -rf build"}"#)
        .unwrap();
    assert_eq!(asking.await.unwrap().unwrap(), "done");
    assert_eq!(*runs.lock().unwrap(), vec!["rm -rf build".to_string()]);
    let seen = tool_result(&model.requests()[1]);
    assert!(
        seen.contains("edited") && seen.contains("ran rm -rf build"),
        "{seen}"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn no_answer_within_the_timeout_is_a_denial() {
    let runs = Runs::default();
    let model = script("rm x");
    let team = team().await;
    let policy = ask_rm().timeout(Duration::from_millis(50));
    spawn_agent(&team, spec(model.clone(), &runs, policy))
        .await
        .unwrap();
    assert_eq!(team.ask("coder", "remove x").await.unwrap(), "done");
    assert!(runs.lock().unwrap().is_empty());
    let seen = tool_result(&model.requests()[1]);
    assert!(seen.contains("no approval came within"), "{seen}");
    assert!(
        team.approvals().waiting().is_empty(),
        "the request is withdrawn"
    );
    team.shutdown().await;
}

#[tokio::test]
async fn allowed_calls_run_and_denied_ones_do_not_without_asking() {
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("run", r#"{"command": "ls"}"#),
            ScriptedReply::call("run", r#"{"command": "sudo reboot"}"#),
            ScriptedReply::text("done"),
        ],
    ));
    let team = team().await;
    spawn_agent(&team, spec(model.clone(), &runs, ask_rm()))
        .await
        .unwrap();
    assert_eq!(team.ask("coder", "go").await.unwrap(), "done");
    assert_eq!(*runs.lock().unwrap(), vec!["ls".to_string()]);
    assert!(tool_result(&model.requests()[1]).contains("ran ls"));
    let seen = tool_result(&model.requests()[2]);
    assert!(seen.contains("approval policy denies"), "{seen}");
    team.shutdown().await;
}

#[tokio::test]
async fn an_unknown_approval_id_is_a_typed_error() {
    let team = team().await;
    let id = ApprovalId("coder:call_9".to_string());
    assert_eq!(team.approve(&id), Err(ApprovalError::Unknown(id.clone())));
    assert_eq!(
        team.deny(&id, "no"),
        Err(ApprovalError::Unknown(id.clone()))
    );
    assert_eq!(
        team.approve_with(&id, "{}"),
        Err(ApprovalError::Unknown(id))
    );
    team.shutdown().await;
}

/// Start a team with the agent on `log`, ask it `text` in the background.
async fn start_on_log(
    log: &Path,
    model: Arc<ScriptedModel>,
    tools: ToolRegistry,
    text: &str,
) -> (
    Team,
    tokio::task::JoinHandle<Result<String, troupe_runtime::AskError>>,
) {
    let team = team().await;
    // Request-level commits: the pause is the commit inside the request (the road of an agent
    // that opts out of durable steps); a paused request with durable steps resumes whole
    // (`durable_steps.rs`).
    let spec = AgentSpec::new("coder", model)
        .tools(tools)
        .approval(ask_rm())
        .session(log)
        .request_commits_only();
    spawn_agent(&team, spec).await.unwrap();
    let directory = team.directory().clone();
    let request = troupe_runtime::AgentRequest::from_user(text);
    let asking = tokio::spawn(async move {
        directory
            .ask("coder", request, Duration::from_secs(60))
            .await
    });
    (team, asking)
}

#[tokio::test]
async fn a_paused_turn_survives_the_process_and_is_asked_again_then_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();

    // The first process pauses on the call and stops without an answer.
    let (team1, asking) =
        start_on_log(&log, script("rm old.txt"), tools(&runs, false), "tidy").await;
    let mut events = team1.subscribe();
    let (first_id, _) = requested(&mut events).await;
    let logged = load(&log).unwrap();
    assert_eq!(logged.paused.len(), 1, "the pause is committed to the log");
    asking.abort();
    team1.shutdown().await;
    assert!(runs.lock().unwrap().is_empty());

    // The next process: the turn is still paused; its next request asks again first.
    let second = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("tidied")]));
    let (team2, asking) = start_on_log(&log, second.clone(), tools(&runs, false), "go on").await;
    let mut events = team2.subscribe();
    let (again, arguments) = requested(&mut events).await;
    assert_eq!(again, first_id, "the same call, under the same id");
    assert!(arguments.contains("rm old.txt"));
    team2.approve(&again).unwrap();
    assert_eq!(asking.await.unwrap().unwrap(), "tidied");
    assert_eq!(*runs.lock().unwrap(), vec!["rm old.txt".to_string()]);
    // The model sees the result, then the new request.
    let sent = &second.requests()[0].messages;
    let n = sent.len();
    assert_eq!(sent[n - 2].role, Role::Tool);
    assert!(sent[n - 2].text().contains("ran rm old.txt"));
    assert_eq!(sent[n - 1].text(), "go on");
    team2.shutdown().await;

    // A third start finds nothing paused and runs nothing.
    let logged = load(&log).unwrap();
    assert!(logged.paused.is_empty());
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    let third = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("ok")]));
    let (team3, asking) = start_on_log(&log, third, tools(&runs, false), "anything else?").await;
    assert_eq!(asking.await.unwrap().unwrap(), "ok");
    assert_eq!(
        runs.lock().unwrap().len(),
        1,
        "the approved call ran exactly once"
    );
    team3.shutdown().await;
}

#[tokio::test]
async fn a_call_that_started_before_the_stop_is_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    // The approved call never finishes: the process stops while it runs.
    let (team1, asking) = start_on_log(&log, script("rm big"), tools(&runs, true), "tidy").await;
    let mut events = team1.subscribe();
    let (id, _) = requested(&mut events).await;
    team1.approve(&id).unwrap();
    let started = async {
        while runs.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), started)
        .await
        .unwrap();
    let records = std::fs::read_to_string(&log).unwrap();
    assert!(records.contains("calls_started"), "{records}");
    asking.abort();
    team1.shutdown().await;
    let logged = load(&log).unwrap();
    assert!(logged.paused[0].started);

    let second = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("noted")]));
    let (team2, asking) = start_on_log(&log, second.clone(), tools(&runs, false), "status?").await;
    assert_eq!(asking.await.unwrap().unwrap(), "noted");
    assert_eq!(runs.lock().unwrap().len(), 1, "never run a second time");
    let seen = tool_result(&second.requests()[0]);
    assert!(seen.contains("not run again"), "{seen}");
    team2.shutdown().await;
}

#[tokio::test]
async fn a_log_whose_pause_names_no_open_call_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let (team, asking) = start_on_log(&log, script("rm a"), tools(&runs, false), "tidy").await;
    let mut events = team.subscribe();
    requested(&mut events).await;
    asking.abort();
    team.shutdown().await;
    let good = std::fs::read_to_string(&log).unwrap();
    let lines = good.lines().count();
    for (bad, why) in [
        (
            r#"{"type":"paused","calls":[{"call_id":"nope","tool":"run","arguments":"{}","ask":true}]}"#,
            "paused call `nope`",
        ),
        (
            r#"{"type":"calls_started","call_ids":["nope"]}"#,
            "started call `nope`",
        ),
    ] {
        std::fs::write(&log, format!("{good}{bad}\n{{\"type\":\"commit\"}}\n")).unwrap();
        match load(&log) {
            Err(troupe_session::SessionError::Invalid { line, reason, .. }) => {
                assert_eq!(line, lines + 1);
                assert!(reason.contains(why), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_log_cut_anywhere_around_a_pause_loads_with_the_pause_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let (team, asking) = start_on_log(&log, script("rm a"), tools(&runs, false), "tidy").await;
    let mut events = team.subscribe();
    let (id, _) = requested(&mut events).await;
    team.approve(&id).unwrap();
    assert_eq!(asking.await.unwrap().unwrap(), "done");
    team.shutdown().await;
    let whole = std::fs::read(&log).unwrap();
    let cut_log = dir.path().join("cut.jsonl");
    let (mut paused_seen, mut started_seen) = (false, false);
    // A kill can stop the process at any byte of a write: every prefix must load, and what it
    // shows of the pause is a whole commit's.
    for cut in 0..=whole.len() {
        std::fs::write(&cut_log, &whole[..cut]).unwrap();
        let Ok(session) = load(&cut_log) else {
            // Only a prefix too short to hold the header may fail.
            assert!(!whole[..cut].contains(&b'\n'), "cut at {cut} did not load");
            continue;
        };
        match session.paused.as_slice() {
            [] => {}
            [call] => {
                assert_eq!(call.call_id, "call_1");
                assert!(call.ask);
                paused_seen = true;
                started_seen |= call.started;
            }
            more => panic!("cut at {cut}: {more:?}"),
        }
    }
    assert!(
        paused_seen && started_seen,
        "the cuts saw the pause and the start"
    );
    assert!(
        load(&log).unwrap().paused.is_empty(),
        "the whole log finished the turn"
    );
}

/// A scripted model whose `panic_at`-th call (from 1) panics: the agent's actor fails and its
/// supervisor restarts it from its checkpoint.
struct PanicsOnce {
    inner: ScriptedModel,
    calls: std::sync::atomic::AtomicUsize,
    panic_at: usize,
}

#[async_trait::async_trait]
impl troupe_protocol::ChatModel for PanicsOnce {
    fn info(&self) -> troupe_protocol::ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(
        &self,
        request: ChatRequest,
    ) -> Result<troupe_protocol::ChatStream, troupe_protocol::ModelError> {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        assert_ne!(n, self.panic_at, "the model broke");
        self.inner.chat_stream(request).await
    }
}

#[tokio::test]
async fn an_agent_restarted_after_its_approved_call_started_does_not_run_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let model = Arc::new(PanicsOnce {
        inner: ScriptedModel::new(
            "m",
            [
                ScriptedReply::call("run", r#"{"command": "rm a"}"#),
                ScriptedReply::text("after the restart"),
            ],
        ),
        calls: Default::default(),
        panic_at: 2,
    });
    let team = team().await;
    let spec = AgentSpec::new("coder", model)
        .tools(tools(&runs, false))
        .approval(ask_rm())
        .session(&log)
        .request_commits_only();
    spawn_agent(&team, spec).await.unwrap();
    let mut events = team.subscribe();
    let directory = team.directory().clone();
    let asking = tokio::spawn(async move {
        let request = troupe_runtime::AgentRequest::from_user("tidy");
        directory
            .ask("coder", request, Duration::from_secs(60))
            .await
    });
    let (id, _) = requested(&mut events).await;
    team.approve(&id).unwrap();
    // The call runs, then the next model call panics: the request fails, the agent restarts.
    assert!(asking.await.unwrap().is_err());
    assert_eq!(runs.lock().unwrap().len(), 1);
    // The rebuilt agent took the paused turn from the log, which is newer than its checkpoint.
    let paused = team
        .with_agent::<troupe_agents::LlmAgent, _, _>("coder", |a| a.paused_calls().to_vec())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paused.len(), 1);
    assert!(paused[0].started);
    assert_eq!(
        team.ask("coder", "status?").await.unwrap(),
        "after the restart"
    );
    assert_eq!(runs.lock().unwrap().len(), 1, "never run a second time");
    team.shutdown().await;
}

#[tokio::test]
async fn a_resumed_turn_abandoned_while_its_call_runs_does_not_run_it_again() {
    use futures::StreamExt as _;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let (team1, asking) = start_on_log(&log, script("rm a"), tools(&runs, false), "tidy").await;
    let mut events = team1.subscribe();
    requested(&mut events).await;
    asking.abort();
    team1.shutdown().await;

    // The next process asks again; the approved call hangs and its caller goes away.
    let second = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("fine")]));
    let team2 = team().await;
    let spec = AgentSpec::new("coder", second.clone())
        .tools(tools(&runs, true))
        .approval(ask_rm())
        .session(&log)
        .request_commits_only();
    spawn_agent(&team2, spec).await.unwrap();
    let mut stream = team2.ask_stream("coder", "go on");
    let id = loop {
        match stream.next().await {
            Some(Ok(troupe_runtime::AskItem::Event(Event::ApprovalRequested { id, .. }))) => {
                break id;
            }
            Some(_) => {}
            None => panic!("the stream ended before the approval request"),
        }
    };
    team2.approve(&id).unwrap();
    let started = async {
        while runs.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), started)
        .await
        .unwrap();
    drop(stream);
    assert_eq!(team2.ask("coder", "again").await.unwrap(), "fine");
    assert_eq!(runs.lock().unwrap().len(), 1, "never run a second time");
    let seen = tool_result(&second.requests()[0]);
    assert!(seen.contains("not run again"), "{seen}");
    team2.shutdown().await;
}

/// A model that numbers the calls of each answer from `call_0`, as many do: every answer but the
/// last is one `run` call under the id `call_0`, with the next of its commands.
struct ReusesCallIds {
    answers: std::sync::Mutex<std::collections::VecDeque<troupe_protocol::ChatResponse>>,
}

impl ReusesCallIds {
    fn new(commands: &[&str]) -> Self {
        use troupe_protocol::{ChatMessage, ChatResponse, FinishReason, ToolCall, Usage};
        let mut answers: std::collections::VecDeque<ChatResponse> = commands
            .iter()
            .map(|command| ChatResponse {
                message: ChatMessage::assistant_tool_calls(
                    None,
                    vec![ToolCall::new(
                        "call_0",
                        "run",
                        format!(r#"{{"command": "{command}"}}"#),
                    )],
                ),
                usage: Usage::default(),
                finish_reason: FinishReason::ToolCalls,
            })
            .collect();
        answers.push_back(ChatResponse {
            message: ChatMessage::assistant("done"),
            usage: Usage::default(),
            finish_reason: FinishReason::Stop,
        });
        ReusesCallIds {
            answers: std::sync::Mutex::new(answers),
        }
    }
}

#[async_trait::async_trait]
impl troupe_protocol::ChatModel for ReusesCallIds {
    fn info(&self) -> troupe_protocol::ModelInfo {
        troupe_protocol::ModelInfo {
            name: "m".to_string(),
            context_window: 32_768,
            supports_tools: true,
        }
    }

    async fn chat_stream(
        &self,
        _request: ChatRequest,
    ) -> Result<troupe_protocol::ChatStream, troupe_protocol::ModelError> {
        let answer = self.answers.lock().unwrap().pop_front().ok_or_else(|| {
            troupe_protocol::ModelError::Unavailable("script exhausted".to_string())
        })?;
        Ok(troupe_protocol::stream_response(answer, 4))
    }
}

/// Models reuse call ids across turns: an answer given for a call that was decided already (a
/// person's late answer, another surface's, an API caller racing the next turn) never decides
/// the next call asked under the same model call id.
#[tokio::test]
async fn a_late_answer_never_decides_a_later_call_under_the_same_model_call_id() {
    let runs = Runs::default();
    let model = Arc::new(ReusesCallIds::new(&["rm a", "rm b"]));
    let team = team().await;
    let spec = AgentSpec::new("coder", model)
        .tools(tools(&runs, false))
        .approval(ask_rm());
    spawn_agent(&team, spec).await.unwrap();
    let mut events = team.subscribe();
    let directory = team.directory().clone();
    let asking = tokio::spawn(async move {
        let request = troupe_runtime::AgentRequest::from_user("clean up");
        directory
            .ask("coder", request, Duration::from_secs(60))
            .await
    });
    let (first, arguments) = requested(&mut events).await;
    assert!(arguments.contains("rm a"), "{arguments}");
    team.deny(&first, "not a").unwrap();
    let (second, arguments) = requested(&mut events).await;
    assert!(arguments.contains("rm b"), "{arguments}");
    // Answers under the id the person was shown for the first call decide nothing.
    let unknown = Err(ApprovalError::Unknown(first.clone()));
    assert_eq!(team.approve(&first), unknown, "a late yes for `rm a`");
    assert_ne!(first, second, "each opening has an id of its own");
    assert_eq!(team.approve_with(&first, r#"{"command": "rm b"}"#), unknown);
    assert_eq!(team.deny(&first, "late"), unknown);
    assert_eq!(team.approvals().waiting(), vec![second.clone()]);
    team.deny(&second, "not b either").unwrap();
    assert_eq!(asking.await.unwrap().unwrap(), "done");
    assert!(runs.lock().unwrap().is_empty(), "nothing was approved");
    team.shutdown().await;
}

/// A resumed pause is asked under the id its log recorded, and no call opened after it in the
/// new process gets that id — though the new process's model numbers its calls from the start
/// again.
#[tokio::test]
async fn a_resumed_pause_keeps_its_logged_id_and_no_later_call_is_given_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let (team1, asking) = start_on_log(&log, script("rm a"), tools(&runs, false), "tidy").await;
    let mut events = team1.subscribe();
    let (logged_id, _) = requested(&mut events).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(&format!(r#""approval":"{logged_id}""#)),
        "the pause records the id: {text}"
    );
    asking.abort();
    team1.shutdown().await;

    // The next process: the resumed call is denied, then its model asks for `call_1` again.
    let second = Arc::new(ScriptedModel::new(
        "m",
        [
            ScriptedReply::call("run", r#"{"command": "rm b"}"#),
            ScriptedReply::text("tidied"),
        ],
    ));
    let (team2, asking) = start_on_log(&log, second, tools(&runs, false), "go on").await;
    let mut events = team2.subscribe();
    let (resumed, arguments) = requested(&mut events).await;
    assert_eq!(
        resumed, logged_id,
        "the same call, under the id it was shown with"
    );
    assert!(arguments.contains("rm a"), "{arguments}");
    team2.deny(&resumed, "not a").unwrap();
    let (next, arguments) = requested(&mut events).await;
    assert!(arguments.contains("rm b"), "{arguments}");
    assert_ne!(next, resumed);
    assert_eq!(
        team2.approve(&resumed),
        Err(ApprovalError::Unknown(resumed.clone()))
    );
    team2.deny(&next, "not b").unwrap();
    assert_eq!(asking.await.unwrap().unwrap(), "tidied");
    assert!(runs.lock().unwrap().is_empty());
    team2.shutdown().await;
}

/// A log written before pauses recorded their approval ids still loads, and its paused call is
/// asked again under an id of its own.
#[tokio::test]
async fn an_old_pause_record_without_an_approval_id_is_asked_under_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("coder.jsonl");
    let runs = Runs::default();
    let (team1, asking) = start_on_log(&log, script("rm a"), tools(&runs, false), "tidy").await;
    let mut events = team1.subscribe();
    let (logged_id, _) = requested(&mut events).await;
    asking.abort();
    team1.shutdown().await;
    // As an older troupe wrote it: the pause names its calls, not their approval ids.
    let text = std::fs::read_to_string(&log).unwrap();
    let field = format!(r#","approval":"{logged_id}""#);
    assert!(text.contains(&field), "{text}");
    std::fs::write(&log, text.replace(&field, "")).unwrap();
    let logged = load(&log).unwrap();
    assert_eq!(logged.paused.len(), 1);

    let second = Arc::new(ScriptedModel::new("m", [ScriptedReply::text("tidied")]));
    let (team2, asking) = start_on_log(&log, second, tools(&runs, false), "go on").await;
    let mut events = team2.subscribe();
    let (resumed, arguments) = requested(&mut events).await;
    assert!(arguments.contains("rm a"), "{arguments}");
    assert!(
        resumed.to_string().starts_with("coder:call_1#"),
        "{resumed}"
    );
    team2.approve(&resumed).unwrap();
    assert_eq!(asking.await.unwrap().unwrap(), "tidied");
    assert_eq!(*runs.lock().unwrap(), vec!["rm a".to_string()]);
    team2.shutdown().await;
}

/// A hostile or careless model gives two calls of one answer the same id (`call_0` twice): each
/// asking has an id of its own, an answer decides only the call it names, and what runs is
/// exactly what was approved.
#[tokio::test]
async fn two_calls_of_one_answer_under_one_model_id_are_asked_and_decided_apart() {
    use troupe_protocol::{ChatMessage, ChatResponse, FinishReason, ToolCall, Usage};
    let runs = Runs::default();
    let both = ChatResponse {
        message: ChatMessage::assistant_tool_calls(
            None,
            vec![
                ToolCall::new("call_0", "run", r#"{"command": "rm a"}"#),
                ToolCall::new("call_0", "run", r#"{"command": "rm b"}"#),
            ],
        ),
        usage: Usage::default(),
        finish_reason: FinishReason::ToolCalls,
    };
    let done = ChatResponse {
        message: ChatMessage::assistant("done"),
        usage: Usage::default(),
        finish_reason: FinishReason::Stop,
    };
    let model = Arc::new(ReusesCallIds {
        answers: std::sync::Mutex::new([both, done].into_iter().collect()),
    });
    let team = team().await;
    let spec = AgentSpec::new("coder", model)
        .tools(tools(&runs, false))
        .approval(ask_rm());
    spawn_agent(&team, spec).await.unwrap();
    let mut events = team.subscribe();
    let directory = team.directory().clone();
    let asking = tokio::spawn(async move {
        let request = troupe_runtime::AgentRequest::from_user("clean up");
        directory
            .ask("coder", request, Duration::from_secs(60))
            .await
    });
    let answer = tokio::time::timeout(Duration::from_secs(30), async {
        let mut asked = Vec::new();
        while asked.len() < 2 {
            let (id, arguments) = requested(&mut events).await;
            if arguments.contains("rm a") {
                team.approve(&id).unwrap();
            } else {
                team.deny(&id, "not b").unwrap();
            }
            assert!(!asked.contains(&id), "one id per asking: {id} twice");
            asked.push(id);
        }
        asking.await.unwrap()
    })
    .await;
    assert_eq!(answer.expect("both asked and decided").unwrap(), "done");
    let ran = runs.lock().unwrap().clone();
    assert_eq!(ran.len(), 1, "only the approved call ran: {ran:?}");
    assert!(ran[0].contains("rm a"), "{ran:?}");
    team.shutdown().await;
}
