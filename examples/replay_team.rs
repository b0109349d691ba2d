//! Regression tests for a multi-agent program: record every agent's model calls of one run to
//! cassettes (one file per agent), then run the same program against them — same answers, same
//! tool calls, same events, no model called — and see a changed program fail, naming the agent
//! and the model call where it left the recording.
//!
//! Run it:
//!
//! ```text
//! cargo run --example replay_team -- --scripted   # record a scripted run, replay it, replay a changed program
//! cargo run --example replay_team                 # the same on the default model (embedded llama.cpp offline)
//! cargo run --example replay_team -- --scripted --record cassettes/release   # record once, keep the folder
//! cargo run --example replay_team -- --replay cassettes/release              # replay it (CI): exit 1 on a divergence
//! cargo run --example replay_team -- --replay cassettes/release --change     # … after the program changed
//! TROUPE_CASSETTES=record:DIR cargo run --example team -- --scripted         # any Team::builder() program,
//! TROUPE_CASSETTES=replay:DIR cargo run --example team -- --scripted         # with no change to its code
//! ```
//!
//! The program: a `coder` and a `tester` work in parallel, each calling a tool, then an `editor`
//! writes the release note from both answers. `--change` makes the tester's tool report a failed
//! test, as a regression in the code under test would: the replay stops at the tester's second
//! model call, whose request (holding the tool's result) is not the recorded one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use troupe::agents::TeamBuilder;
use troupe::models::{Cassettes, ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::{AgentSpec, Event, Team, ToolRegistry};

/// What one run of the program gave, in a form two runs can be compared by.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Each agent's answer (or error), by agent.
    answers: BTreeMap<String, Result<String, String>>,
    /// Every tool call: agent, tool, arguments.
    tool_calls: Vec<(String, String, String)>,
    /// Each agent's events, in its order, by kind, agent and content (see [`by_agent`]).
    events: BTreeMap<String, Vec<Value>>,
}

type ToolLog = Arc<Mutex<Vec<(String, String, String)>>>;

#[derive(Deserialize, JsonSchema)]
struct Suite {
    /// The test suite to run.
    suite: String,
}

#[derive(Deserialize, JsonSchema)]
struct Since {
    /// The tag to list commits since.
    since: String,
}

/// The program's tools: deterministic stand-ins for `git log` and a test runner, each call
/// logged. `failing` is the change a regression test exists to catch.
fn tools(log: &ToolLog, failing: bool) -> anyhow::Result<(ToolRegistry, ToolRegistry)> {
    let mut coder = ToolRegistry::new();
    let coder_log = log.clone();
    coder.register_fn(
        "git_log",
        "List the commits since a tag.",
        move |args: Since| {
            log_call(&coder_log, "coder", "git_log", &args.since);
            async move {
                Ok::<_, troupe::ToolError>(
                    "a1f3 fix: login no longer times out\nb7c2 perf: search is 2x faster",
                )
            }
        },
    )?;
    let mut tester = ToolRegistry::new();
    let tester_log = log.clone();
    tester.register_fn("run_tests", "Run a test suite.", move |args: Suite| {
        log_call(&tester_log, "tester", "run_tests", &args.suite);
        async move {
            Ok::<_, troupe::ToolError>(if failing {
                "41 passed, 1 failed: login_times_out_after_30s"
            } else {
                "42 passed, 0 failed"
            })
        }
    })?;
    Ok((coder, tester))
}

fn log_call(log: &ToolLog, agent: &str, tool: &str, args: &str) {
    if let Ok(mut calls) = log.lock() {
        calls.push((agent.into(), tool.into(), args.into()));
    }
}

/// The models: scripted, the default model (shared by the three agents), or — replaying — any
/// model at all, as none is called.
async fn models(source: Models) -> anyhow::Result<[Arc<dyn ChatModel>; 3]> {
    match source {
        Models::Scripted => Ok([
            Arc::new(ScriptedModel::new(
                "scripted-coder",
                [
                    ScriptedReply::call("git_log", r#"{"since": "v1.1"}"#),
                    ScriptedReply::text("Login no longer times out; search is twice as fast."),
                ],
            )),
            Arc::new(ScriptedModel::new(
                "scripted-tester",
                [
                    ScriptedReply::call("run_tests", r#"{"suite": "login"}"#),
                    ScriptedReply::text("All 42 tests pass."),
                ],
            )),
            Arc::new(ScriptedModel::new(
                "scripted-editor",
                [ScriptedReply::text(
                    "Release 1.2: login no longer times out, search is twice as fast; all 42 tests pass.",
                )],
            )),
        ]),
        Models::Default => {
            let model = default_model().await.context("loading the default model")?;
            Ok([model.clone(), model.clone(), model])
        }
        Models::None => Ok(["coder", "tester", "editor"]
            .map(|n| Arc::new(ScriptedModel::new(n, [])) as Arc<dyn ChatModel>)),
    }
}

#[derive(Clone, Copy)]
enum Models {
    Scripted,
    Default,
    None,
}

/// The program under test, run once with `cassettes`.
async fn run_program(
    models: [Arc<dyn ChatModel>; 3],
    cassettes: Cassettes,
    failing: bool,
) -> anyhow::Result<Outcome> {
    let log = ToolLog::default();
    let (coder_tools, tester_tools) = tools(&log, failing)?;
    let [coder, tester, editor] = models;
    let builder: TeamBuilder = Team::builder()
        .cassettes(cassettes)
        .agent(
            AgentSpec::new("coder", coder)
                .instructions("You summarize commits in one line. Use git_log.")
                .tools(coder_tools)
                .max_turns(3)
                .max_tokens(64),
        )
        .agent(
            AgentSpec::new("tester", tester)
                .instructions("You report test results in one line. Use run_tests.")
                .tools(tester_tools)
                .max_turns(3)
                .max_tokens(64),
        )
        .agent(
            AgentSpec::new("editor", editor)
                .instructions("You write one-line release notes.")
                .max_turns(1)
                .max_tokens(64),
        );
    let team = builder.start().await?;
    let mut events = team.subscribe();
    // The coder and the tester run in parallel: their cassettes are their own, so the order
    // their calls happen to interleave in does not matter to the replay.
    let (changes, tests) = tokio::join!(
        team.ask("coder", "What changed since v1.1?"),
        team.ask("tester", "Do the login tests pass?")
    );
    let changes = changes.map_err(|e| e.to_string());
    let tests = tests.map_err(|e| e.to_string());
    let note = team
        .ask(
            "editor",
            format!(
                "Changes: {}\nTests: {}\nWrite the release note.",
                changes.as_deref().unwrap_or("unknown"),
                tests.as_deref().unwrap_or("unknown")
            ),
        )
        .await
        .map_err(|e| e.to_string());
    let mut heard = Vec::new();
    while let Ok(record) = events.try_recv() {
        heard.push(record.event);
    }
    team.shutdown().await;
    let mut tool_calls = log.lock().map(|l| l.clone()).unwrap_or_default();
    tool_calls.sort();
    Ok(Outcome {
        answers: BTreeMap::from([
            ("coder".into(), changes),
            ("tester".into(), tests),
            ("editor".into(), note),
        ]),
        tool_calls,
        events: by_agent(heard),
    })
}

/// Each agent's events in the order it published them, by kind, agent and content: wall times
/// (`ms`) are left out, and a run of tool-call events is sorted (one answer's tool calls run
/// concurrently and finish in either order). Agents run in parallel: there is no order across
/// agents to compare.
fn by_agent(events: Vec<Event>) -> BTreeMap<String, Vec<Value>> {
    let mut agents: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for event in events {
        let Ok(mut value) = serde_json::to_value(&event) else {
            continue;
        };
        if let Some(object) = value.as_object_mut() {
            object.remove("ms");
        }
        let agent = value["agent"].as_str().unwrap_or_default().to_string();
        agents.entry(agent).or_default().push(value);
    }
    let is_tool = |v: &Value| {
        v["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("tool_call"))
    };
    for sequence in agents.values_mut() {
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

fn print_outcome(outcome: &Outcome) {
    for (agent, answer) in &outcome.answers {
        match answer {
            Ok(text) => println!("{agent}> {text}"),
            Err(e) => println!("{agent}> error: {e}"),
        }
    }
    for (agent, tool, args) in &outcome.tool_calls {
        println!("tool call: {agent} {tool}({args})");
    }
}

/// Replay `dir`; the first divergence, if any, as the error.
async fn replay(dir: &Path, failing: bool) -> anyhow::Result<Outcome> {
    let cassettes = Cassettes::replay(dir);
    let outcome = run_program(models(Models::None).await?, cassettes.clone(), failing).await?;
    cassettes.verify()?;
    Ok(outcome)
}

fn flag_value(args: &[String], flag: &str) -> Option<PathBuf> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(PathBuf::from)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut telemetry = troupe::telemetry::TelemetryConfig::from_env();
    // The changed program's failed model calls are this demo's point, printed below as one
    // divergence: not warnings to show (RUST_LOG still shows them).
    telemetry
        .console_filter
        .get_or_insert_with(|| "warn,troupe_agents::traced=error".into());
    let _telemetry = troupe::telemetry::init_with(telemetry)?;
    let args: Vec<String> = std::env::args().collect();
    let source = if args.iter().any(|a| a == "--scripted") {
        Models::Scripted
    } else {
        Models::Default
    };
    let failing = args.iter().any(|a| a == "--change");

    // The two halves a regression test uses: record once, replay on every change.
    if let Some(dir) = flag_value(&args, "--record") {
        let outcome = run_program(models(source).await?, Cassettes::record(&dir), false).await?;
        print_outcome(&outcome);
        println!("recorded: one cassette per agent under {}", dir.display());
        return Ok(());
    }
    if let Some(dir) = flag_value(&args, "--replay") {
        match replay(&dir, failing).await {
            Ok(outcome) => {
                print_outcome(&outcome);
                println!("replay: every model call matched the recording");
                return Ok(());
            }
            Err(e) => {
                println!("replay diverged: {e}");
                std::process::exit(1);
            }
        }
    }

    // Both halves in one run, in a folder of its own.
    let dir = tempfile::tempdir()?;
    let recorded = run_program(models(source).await?, Cassettes::record(dir.path()), false).await?;
    println!("recorded run:");
    print_outcome(&recorded);
    for agent in ["coder", "tester", "editor"] {
        let cassette = Cassettes::record(dir.path()).path(agent);
        let calls = std::fs::read_to_string(&cassette)?.lines().count() - 1;
        println!("cassette {agent}.jsonl: {calls} model call(s)");
    }

    let replayed = replay(dir.path(), false).await?;
    let events: usize = replayed.events.values().map(Vec::len).sum();
    anyhow::ensure!(
        replayed == recorded,
        "the replay differs from the recording:\n{replayed:#?}\n{recorded:#?}"
    );
    println!(
        "replay: identical — {} answers, {} tool calls, {events} events (per agent, by kind, agent and content)",
        replayed.answers.len(),
        replayed.tool_calls.len()
    );

    match replay(dir.path(), true).await {
        Err(e) => println!("changed program: {e}"),
        // A small model may answer without calling the tool: then the change is not seen.
        Ok(_)
            if !recorded
                .tool_calls
                .iter()
                .any(|(_, tool, _)| tool == "run_tests") =>
        {
            println!("changed program: replayed as recorded (the tester never called run_tests)")
        }
        Ok(_) => anyhow::bail!("the changed program replayed without a divergence"),
    }
    Ok(())
}
