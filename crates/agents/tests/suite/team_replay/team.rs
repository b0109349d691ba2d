//! A whole team run recorded to cassettes (one per agent) and replayed: the same answers, tool
//! calls and events; a changed program fails naming the agent and the model call; a cassette
//! that does not load starts nothing and stays as it was.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use troupe_agents::{AgentSpec, TeamBuildError, TeamBuilderExt};
use troupe_models::{Cassettes, DivergenceKind, ReplayError, ScriptedModel, ScriptedReply};
use troupe_protocol::{ChatModel, Event};
use troupe_runtime::Team;
use troupe_tools::{ToolError, ToolRegistry};

use crate::suite::support::events::drain;

const TASK: &str = "Ship the greeting: have the coder write it and the reviewer check it.";

#[derive(Deserialize, JsonSchema)]
struct Word {
    word: String,
}

/// Every `shout` call an agent's tool ran, by agent: the tool calls the run made.
type ToolLog = Arc<Mutex<Vec<(String, String)>>>;

/// `shout`, which upper-cases a word and adds `suffix`, logging each call under `agent`.
fn shout(agent: &'static str, suffix: &'static str, log: &ToolLog) -> ToolRegistry {
    let log = log.clone();
    let mut tools = ToolRegistry::new();
    tools
        .register_fn("shout", "Upper-case a word.", move |args: Word| {
            let log = log.clone();
            async move {
                log.lock()
                    .unwrap()
                    .push((agent.to_string(), args.word.clone()));
                Ok::<_, ToolError>(format!("{}{suffix}", args.word.to_uppercase()))
            }
        })
        .unwrap();
    tools
}

/// The models of the recorded run.
fn scripted() -> [Arc<dyn ChatModel>; 3] {
    let lead = ScriptedModel::new(
        "lead-model",
        [
            ScriptedReply::ToolCalls(vec![
                (
                    "ask_agent".into(),
                    r#"{"agent": "coder", "message": "Write the greeting."}"#.into(),
                ),
                (
                    "ask_agent".into(),
                    r#"{"agent": "reviewer", "message": "Check the greeting."}"#.into(),
                ),
            ]),
            ScriptedReply::text("Shipped: HELLO, reviewed OK."),
        ],
    );
    let coder = ScriptedModel::new(
        "coder-model",
        [
            ScriptedReply::call("shout", r#"{"word": "hello"}"#),
            ScriptedReply::text("Wrote HELLO."),
        ],
    );
    let reviewer = ScriptedModel::new(
        "reviewer-model",
        [
            ScriptedReply::call("shout", r#"{"word": "ok"}"#),
            ScriptedReply::text("Reviewed: OK."),
        ],
    );
    [Arc::new(lead), Arc::new(coder), Arc::new(reviewer)]
}

/// Models that fail every call: a replay must never reach them.
fn unreachable_models() -> [Arc<dyn ChatModel>; 3] {
    ["lead", "coder", "reviewer"].map(|n| Arc::new(ScriptedModel::new(n, [])) as Arc<dyn ChatModel>)
}

/// The program: a lead that asks a coder and a reviewer (in parallel) through `ask_agent`, each
/// of them calling its tool once. `coder_suffix` is what the coder's tool adds to its result
/// (a program change when it differs between the runs).
fn team(
    models: [Arc<dyn ChatModel>; 3],
    coder_suffix: &'static str,
    log: &ToolLog,
) -> troupe_agents::TeamBuilder {
    team_with(models, coder_suffix, "You review code.", log)
}

/// [`team`] with the reviewer's system prompt.
fn team_with(
    models: [Arc<dyn ChatModel>; 3],
    coder_suffix: &'static str,
    reviewer_prompt: &str,
    log: &ToolLog,
) -> troupe_agents::TeamBuilder {
    let [lead, coder, reviewer] = models;
    Team::builder()
        .agent(
            AgentSpec::new("lead", lead)
                .instructions("You lead. Delegate.")
                .team_messaging(true),
        )
        .agent(
            AgentSpec::new("coder", coder)
                .instructions("You write code.")
                .tools(shout("coder", coder_suffix, log)),
        )
        .agent(
            AgentSpec::new("reviewer", reviewer)
                .instructions(reviewer_prompt)
                .tools(shout("reviewer", "", log)),
        )
}

/// What a run gave: the lead's answer (or error), the tool calls, the events.
struct Run {
    answer: Result<String, String>,
    tool_calls: Vec<(String, String)>,
    events: BTreeMap<String, Vec<Value>>,
}

async fn run(builder: troupe_agents::TeamBuilder, log: &ToolLog) -> Run {
    let team = builder.start().await.unwrap();
    let mut events = team.subscribe();
    let answer = team.ask("lead", TASK).await.map_err(|e| e.to_string());
    // Every event of the request was published before its answer.
    let events = by_agent(drain(&mut events));
    team.shutdown().await;
    let mut tool_calls = log.lock().unwrap().clone();
    tool_calls.sort();
    Run {
        answer,
        tool_calls,
        events,
    }
}

/// Each agent's events, in the order it published them, compared by kind, agent and content:
/// wall times (`ms`) are dropped, and a run of tool-call events is sorted, as calls of one
/// answer run concurrently and finish in either order. Agents run in parallel, so there is no
/// order across agents to compare.
fn by_agent(events: Vec<Event>) -> BTreeMap<String, Vec<Value>> {
    let mut agents: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for event in events {
        let mut value = serde_json::to_value(&event).unwrap();
        let object = value.as_object_mut().unwrap();
        object.remove("ms");
        let agent = object
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        agents.entry(agent).or_default().push(value);
    }
    for sequence in agents.values_mut() {
        let is_tool = |v: &Value| {
            v["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("tool_call"))
        };
        let mut start = 0;
        while start < sequence.len() {
            let end = (start..sequence.len())
                .find(|&i| !is_tool(&sequence[i]))
                .unwrap_or(sequence.len());
            sequence[start..end].sort_by_key(Value::to_string);
            start = end.max(start + 1);
        }
    }
    agents
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

#[tokio::test]
async fn team_replay_gives_the_recorded_run_back() {
    let dir = tempfile::tempdir().unwrap();
    let recording = Cassettes::record(dir.path());
    let log = ToolLog::default();
    let recorded = run(
        team(scripted(), "", &log).cassettes(recording.clone()),
        &log,
    )
    .await;
    assert_eq!(
        recorded.answer.as_deref(),
        Ok("Shipped: HELLO, reviewed OK.")
    );
    // One cassette per agent: its header and its two calls.
    for agent in ["lead", "coder", "reviewer"] {
        assert_eq!(lines(&recording.path(agent)), 3, "{agent}");
    }

    let replaying = Cassettes::replay(dir.path());
    let log = ToolLog::default();
    let replayed = run(
        team(unreachable_models(), "", &log).cassettes(replaying.clone()),
        &log,
    )
    .await;
    replaying.verify().unwrap();
    assert_eq!(replayed.answer, recorded.answer);
    assert_eq!(
        replayed.tool_calls,
        [
            ("coder".to_string(), "hello".to_string()),
            ("reviewer".to_string(), "ok".to_string())
        ]
    );
    assert_eq!(replayed.tool_calls, recorded.tool_calls);
    assert_eq!(
        replayed.events.keys().collect::<Vec<_>>(),
        ["coder", "lead", "reviewer"]
    );
    assert_eq!(replayed.events, recorded.events);
    // The models' answers streamed as recorded: the same deltas, under the recorded names.
    let deltas: String = replayed.events["coder"]
        .iter()
        .filter(|e| e["type"] == "model_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "Wrote HELLO.");
    assert!(
        replayed.events["lead"]
            .iter()
            .any(|e| e["model"] == "lead-model")
    );
}

#[tokio::test]
async fn team_replay_names_the_agent_and_model_call_where_the_program_changed() {
    let dir = tempfile::tempdir().unwrap();
    let log = ToolLog::default();
    run(
        team(scripted(), "", &log).cassettes(Cassettes::record(dir.path())),
        &log,
    )
    .await;

    // The program changed: the coder's tool answers "HELLO!" where it answered "HELLO".
    let replaying = Cassettes::replay(dir.path());
    let log = ToolLog::default();
    let replayed = run(
        team(unreachable_models(), "!", &log).cassettes(replaying.clone()),
        &log,
    )
    .await;

    let first = replaying.verify().unwrap_err();
    assert_eq!((first.agent.as_deref(), first.call), (Some("coder"), 2));
    assert!(
        matches!(first.kind, DivergenceKind::RequestDiffers(_)),
        "{first:?}"
    );
    let text = first.to_string();
    assert!(
        text.starts_with(
            "agent `coder`, model call 2: the request differs from the recorded one: \
             messages[3] (tool) content differs: "
        ),
        "{text}"
    );
    assert!(text.contains(r#"expected "HELLO", got "HELLO!""#), "{text}");
    // The coder's request failed with it, and says so in its event.
    let coder_error = replayed.events["coder"]
        .iter()
        .find(|e| e["type"] == "request_finished")
        .and_then(|e| e["error"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(coder_error.contains(&text), "{coder_error}");
    // The lead heard of it as a failed teammate, so its own next request differs in turn.
    let later = replaying.divergences();
    assert!(
        later
            .iter()
            .any(|d| d.agent.as_deref() == Some("lead") && d.call == 2),
        "{later:?}"
    );
    assert!(replayed.answer.is_err(), "{:?}", replayed.answer);
}

#[tokio::test]
async fn team_replay_of_a_changed_prompt_names_the_agent_and_its_first_call() {
    let dir = tempfile::tempdir().unwrap();
    let log = ToolLog::default();
    run(
        team(scripted(), "", &log).cassettes(Cassettes::record(dir.path())),
        &log,
    )
    .await;

    let replaying = Cassettes::replay(dir.path());
    let log = ToolLog::default();
    let program = team_with(unreachable_models(), "", "You review code strictly.", &log);
    let replayed = run(program.cassettes(replaying.clone()), &log).await;
    let first = replaying.verify().unwrap_err();
    assert_eq!(
        first.to_string(),
        "agent `reviewer`, model call 1: the request differs from the recorded one: \
         messages[0] (system) content differs: at byte 15: \
         expected \"You review code.\", got \"You review code strictly.\""
    );
    // Its tool never ran: the replay stopped at the call that would have asked for it.
    assert_eq!(
        replayed.tool_calls,
        [("coder".to_string(), "hello".to_string())]
    );
}

#[tokio::test]
async fn team_replay_refuses_a_corrupt_or_foreign_cassette_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = ToolLog::default();
    let recording = Cassettes::record(dir.path());
    run(
        team(scripted(), "", &log).cassettes(recording.clone()),
        &log,
    )
    .await;
    let before = |agent: &str| std::fs::read(recording.path(agent)).unwrap();
    let (lead, reviewer) = (before("lead"), before("reviewer"));

    // The coder's cassette lost the end of its last line.
    let coder_path = recording.path("coder");
    let coder = before("coder");
    let cut = &coder[..coder.len() - 20];
    std::fs::write(&coder_path, cut).unwrap();
    let log = ToolLog::default();
    let err = team(unreachable_models(), "", &log)
        .cassettes(Cassettes::replay(dir.path()))
        .start()
        .await
        .unwrap_err();
    match &err {
        TeamBuildError::Cassettes(ReplayError::Parse { path, line, .. }) => {
            assert_eq!((path, *line), (&coder_path, 3));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("coder.jsonl, line 3: "), "{err}");
    assert_eq!(std::fs::read(&coder_path).unwrap(), cut);
    assert_eq!(
        (before("lead"), before("reviewer")),
        (lead.clone(), reviewer.clone())
    );
    assert!(log.lock().unwrap().is_empty(), "no agent ran");

    // The coder's cassette comes from another version of the format.
    let foreign = String::from_utf8(coder.clone()).unwrap().replacen(
        "{\"cassette\":2,",
        "{\"cassette\":3,",
        1,
    );
    std::fs::write(&coder_path, &foreign).unwrap();
    let err = team(unreachable_models(), "", &log)
        .cassettes(Cassettes::replay(dir.path()))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TeamBuildError::Cassettes(ReplayError::Version { found, supported: 2, .. }) if found == "3"),
        "{err:?}"
    );
    assert_eq!(std::fs::read_to_string(&coder_path).unwrap(), foreign);

    // An agent the recording never had.
    std::fs::write(&coder_path, &coder).unwrap();
    let err = team(unreachable_models(), "", &log)
        .agent(AgentSpec::new(
            "tester",
            Arc::new(ScriptedModel::new("t", [])),
        ))
        .cassettes(Cassettes::replay(dir.path()))
        .start()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("agent `tester` has no cassette at "),
        "{err}"
    );
    assert_eq!(
        (before("lead"), before("coder"), before("reviewer")),
        (lead, coder, reviewer)
    );
}
