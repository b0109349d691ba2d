//! `troupe node` as a second process: a config's agent asked by name from this process's node,
//! one trace across both processes' trace files, and compactions through another node's
//! compression agent.

use std::process::Command;
use std::time::Duration;

use troupe::cluster::{ClusterNode, NodeConfig};
use troupe::{AgentRequest, Team, TeamConfig};

use super::support::chat_server::ChatServer;
use super::support::node_process::{
    COOKIE, attr, one_node_at_a_time, spans, start_node, write_config,
};
use super::support::with_trace_file;

#[test]
fn a_config_agent_on_troupe_node_is_asked_by_name_in_one_trace_across_processes() {
    let _one = one_node_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let server = ChatServer::start();
    let config = write_config(dir.path(), &server.url);
    let node_trace = dir.path().join("node.jsonl");
    let local_trace = dir.path().join("local.jsonl");
    let (mut child, addr) = start_node(&config, &node_trace);

    let request = AgentRequest::from_user("hello over the wire");
    let trace_id = request.trace.id().to_string();
    let answer = with_trace_file(&local_trace, false, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let node = ClusterNode::start(&team, NodeConfig::new("local", COOKIE))
                .await
                .unwrap();
            assert_eq!(node.connect(addr).await.unwrap(), "remote");
            let answer = team
                .ask_with("helper", request, Duration::from_secs(60))
                .await;
            node.shutdown().await;
            team.shutdown().await;
            answer
        })
    });
    assert_eq!(answer.unwrap(), "reply 1");

    // SIGTERM: the node leaves the cluster and flushes its trace file.
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());

    let local = spans(&local_trace);
    let remote = spans(&node_trace);
    let asking = local
        .iter()
        .find(|s| s.name == "remote_ask")
        .expect("a remote_ask span here");
    assert_eq!(asking.trace_id, trace_id);
    let taking = remote
        .iter()
        .find(|s| s.name == "remote_request")
        .expect("a remote_request span there");
    assert_eq!(taking.trace_id, trace_id, "one trace id in both files");
    assert_eq!(
        taking.parent_span_id.as_deref(),
        Some(asking.span_id.as_str())
    );
    assert_eq!(attr(taking, "troupe.node"), Some("local"));
    let agent = remote
        .iter()
        .find(|s| s.name == "invoke_agent")
        .expect("the agent's span there");
    assert_eq!(agent.trace_id, trace_id);
    assert_eq!(
        agent.parent_span_id.as_deref(),
        Some(taking.span_id.as_str())
    );
    let chat = remote
        .iter()
        .find(|s| s.name == "chat")
        .expect("a model call");
    assert_eq!(chat.trace_id, trace_id);

    // `troupe trace` over both files: one tree for the trace, the remote side under the asker.
    let merged = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("trace")
        .arg(&local_trace)
        .arg(&node_trace)
        .output()
        .unwrap();
    assert!(merged.status.success());
    let text = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(
        text.matches(&format!("trace {trace_id}")).count(),
        1,
        "{text}"
    );
    let depth = |name: &str| {
        let line = text.lines().find(|l| l.contains(name)).unwrap_or_default();
        line.find(name).unwrap_or(0)
    };
    assert!(depth("remote_request") > depth("remote_ask"), "{text}");
    assert!(depth("agent helper") > depth("remote_request"), "{text}");
    let follow_two = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["trace", "--follow"])
        .arg(&local_trace)
        .arg(&node_trace)
        .output()
        .unwrap();
    assert!(!follow_two.status.success());
    assert!(String::from_utf8_lossy(&follow_two.stderr).contains("one file"));
}

/// A long, plain answer: a few of them put a 4 000-token window over its compaction target.
const LONG_ANSWER: &str = "I read `src/parser.rs` and ran `cargo test parser` again. The \
    failing case is the nested list: the tokenizer closes the inner bracket twice, so the outer \
    list ends early and the next item lands at the top level. I kept the public API as it is and \
    changed only the bracket depth counter, then re-ran the whole suite, which passes now. Next I \
    will look at the error message for an unclosed bracket, which still points at the end of the \
    file instead of the bracket that was opened; that needs the opening position kept on a stack. ";

#[test]
fn an_agent_compacts_through_the_compression_agent_of_another_node_and_alone_when_it_is_gone() {
    let _one = one_node_at_a_time();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(compacts_through_another_node_then_alone());
}

async fn compacts_through_another_node_then_alone() {
    use troupe::AgentSpec;
    use troupe::agents::{CompactionSettings, LlmAgent, spawn_agent};
    use troupe::compaction::ContextPolicy;
    use troupe::models::ScriptedModel;

    let dir = tempfile::tempdir().unwrap();
    let server = ChatServer::start();
    let config = write_config(dir.path(), &server.url);
    let (mut child, addr) = start_node(&config, &dir.path().join("node.jsonl"));

    // This node has an agent and no compression agent.
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let model = ScriptedModel::new("writer", []).with_fallback(LONG_ANSWER.repeat(3));
    let settings = CompactionSettings {
        // The target (40 % of the window less the answer's reserve) leaves the summary room
        // beside the protected messages.
        policy: Some(ContextPolicy::for_window(5_000)),
        auto: false,
        ..CompactionSettings::default()
    };
    spawn_agent(
        &team,
        AgentSpec::new("writer", std::sync::Arc::new(model)).compaction(settings),
    )
    .await
    .unwrap();
    let node = ClusterNode::start(&team, NodeConfig::new("local", COOKIE))
        .await
        .unwrap();
    node.connect(addr).await.unwrap();
    for i in 0..6 {
        team.ask("writer", format!("step {i}: go on"))
            .await
            .unwrap();
    }
    let before = server.count();
    let remote = team
        .agent::<LlmAgent>("writer")
        .compact(None)
        .await
        .unwrap();
    assert!(remote.report.reached, "{:?}", remote.report);
    assert!(remote.report.tokens_after < remote.report.tokens_before);
    assert!(
        !remote
            .report
            .fallbacks
            .iter()
            .any(|f| f.contains("own node")),
        "{:?}",
        remote.report.fallbacks
    );
    // The summary arrived as a summary (ids and kinds travel with the messages).
    assert!(
        remote.summary.is_some(),
        "no summary message after the remote compaction"
    );
    // The compressor over there asked its model (this node's agent never calls that server).
    assert!(
        server.count() > before,
        "the remote compression agent did not run"
    );

    // The compression agent's node dies: the agent compacts on its own node.
    child.kill().unwrap();
    child.wait().unwrap();
    for _ in 0..100 {
        if node.peers().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 6..10 {
        team.ask("writer", format!("step {i}: go on"))
            .await
            .unwrap();
    }
    let here = team
        .agent::<LlmAgent>("writer")
        .compact(None)
        .await
        .unwrap();
    assert!(here.report.reached, "{:?}", here.report);
    assert!(
        here.report.fallbacks.iter().any(|f| f.contains("own node")),
        "{:?}",
        here.report.fallbacks
    );
    let conversation = team.checkpoint("writer").unwrap().conversation;
    assert!(
        conversation
            .messages()
            .iter()
            .any(|m| m.text().contains("bracket"))
    );
    node.shutdown().await;
    team.shutdown().await;
}

/// Without `[compaction] model`, a node's agents compact with the configured model of lowest
/// `cost_rank` (the rule `troupe chat` shares), not with the first model the config names.
#[test]
fn a_node_compacts_with_the_cheapest_ranked_model() {
    let _one = one_node_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let agent_server = ChatServer::start();
    let cheap_server = ChatServer::start();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[models.remote]
provider = "openai"
base_url = "{}"
api_key_env = "TEST_NODE_KEY"
model = "agent-model"
context_window = 64000
cost_rank = 5

[models.zcheap]
provider = "openai"
base_url = "{}"
api_key_env = "TEST_NODE_KEY"
model = "cheap-model"
context_window = 64000
cost_rank = 1

[agents.helper]
model = "remote"
instructions = "Be brief."

[compaction]
protected_messages = 1
target = 0.2
trigger = 0.5
warning = 0.4
"#,
            agent_server.url, cheap_server.url
        ),
    )
    .unwrap();
    let (mut child, addr) = start_node(&config, &dir.path().join("node.jsonl"));
    // About 10k tokens a message: by the fourth the window needs a compaction (the minimum-gain
    // rule of #31 declines one that only the trigger asks for while the turns are this large).
    let long = |topic: &str| format!("{topic}: {}", "several words of filler text ".repeat(2000));
    let answers = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let node = ClusterNode::start(&team, NodeConfig::new("local", COOKIE))
                .await
                .unwrap();
            assert_eq!(node.connect(addr).await.unwrap(), "remote");
            let mut answers = Vec::new();
            for topic in ["one", "two", "three", "four", "five", "six"] {
                let request = AgentRequest::from_user(long(topic));
                answers.push(
                    team.ask_with("helper", request, Duration::from_secs(60))
                        .await,
                );
            }
            node.shutdown().await;
            team.shutdown().await;
            answers
        });
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
    for answer in answers {
        answer.unwrap();
    }
    assert!(
        cheap_server.count() > 0,
        "the automatic compaction never called the cheapest model: {}",
        std::fs::read_to_string(dir.path().join("node.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| l.contains("compaction"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        agent_server.count(),
        6,
        "only the six requests reach the agent's model"
    );
}

/// An agent waiting for a compaction it sent another node's compression agent tells it so: the
/// hurry travels as the compaction does, and that node takes it (nothing is queued there, so
/// nothing was re-ranked) rather than refusing a kind it does not know.
#[test]
fn a_hurry_reaches_the_compression_agent_of_another_node() {
    let _one = one_node_at_a_time();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            use troupe::agents::compression::{COMPRESSION_AGENT, Hurry};
            use troupe::protocol::TraceContext;

            let dir = tempfile::tempdir().unwrap();
            let server = ChatServer::start();
            let config = write_config(dir.path(), &server.url);
            let (_child, addr) = start_node(&config, &dir.path().join("node.jsonl"));
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let node = ClusterNode::start(&team, NodeConfig::new("local", COOKIE))
                .await
                .unwrap();
            node.connect(addr).await.unwrap();
            let hurry = Hurry {
                agent: "writer".into(),
                room: 100,
            };
            let rehurried = team
                .directory()
                .ask_wire_job(
                    COMPRESSION_AGENT,
                    hurry,
                    TraceContext::new_root(),
                    Duration::from_secs(30),
                )
                .await
                .unwrap();
            assert!(!rehurried, "nothing was queued over there");
            node.shutdown().await;
            team.shutdown().await;
        });
}
