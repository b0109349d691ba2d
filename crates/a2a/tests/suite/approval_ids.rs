//! A served agent whose model reuses tool call ids across turns (many number each answer's calls
//! from `call_0`): a caller's answer to the call its task showed never decides a later call the
//! model asked for under the same id.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::json;
use troupe_a2a::{A2aServeConfig, ServedAgent, serve};
use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::{AgentSpec, TeamBuilderExt as _, shared_counter};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, Event, FinishReason, ModelError,
    ModelInfo, ToolCall, Usage, stream_response,
};
use troupe_runtime::Team;
use troupe_tools::approval::{ApprovalPolicy, ApprovalRule, Permission};

use super::support::{Runs, rpc, user_message};

/// Every answer but the last is one `run` call under the id `call_0`, with the next command.
struct ReusesCallIds {
    answers: Mutex<VecDeque<ChatResponse>>,
}

impl ReusesCallIds {
    fn new(commands: &[&str]) -> Self {
        let call = |command: &&str| ChatResponse {
            message: ChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new(
                    "call_0",
                    "run",
                    json!({ "command": command }).to_string(),
                )],
            ),
            usage: Usage::default(),
            finish_reason: FinishReason::ToolCalls,
        };
        let mut answers: VecDeque<ChatResponse> = commands.iter().map(call).collect();
        answers.push_back(ChatResponse {
            message: ChatMessage::assistant("removed"),
            usage: Usage::default(),
            finish_reason: FinishReason::Stop,
        });
        ReusesCallIds {
            answers: Mutex::new(answers),
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for ReusesCallIds {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: "reuses-call-ids".to_string(),
            context_window: 32_768,
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, _request: ChatRequest) -> Result<ChatStream, ModelError> {
        let answer = self.answers.lock().unwrap().pop_front();
        let answer = answer.ok_or_else(|| ModelError::Unavailable("script exhausted".into()))?;
        Ok(stream_response(answer, 4))
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct RunArgs {
    command: String,
}

async fn team(runs: &Runs, commands: &[&str]) -> Team {
    let runs = runs.clone();
    let mut tools = troupe_tools::ToolRegistry::new();
    tools
        .register_fn("run", "Run a command.", move |args: RunArgs| {
            let runs = runs.clone();
            async move {
                runs.lock().unwrap().push(args.command.clone());
                Ok(format!("ran {}", args.command))
            }
        })
        .unwrap();
    let policy = ApprovalPolicy::new([ApprovalRule::argument_prefix(
        "run",
        "command",
        "rm ",
        Permission::Ask,
    )]);
    let model = Arc::new(ReusesCallIds::new(commands));
    Team::builder()
        .compression(CompressionConfig {
            model: CompressorModel::None,
            ..CompressionConfig::new(shared_counter())
        })
        .agent(AgentSpec::new("ops", model).tools(tools).approval(policy))
        .start()
        .await
        .unwrap()
}

async fn next_approval(
    events: &mut tokio::sync::broadcast::Receiver<troupe_protocol::EventRecord>,
) -> (troupe_protocol::ApprovalId, String) {
    loop {
        if let Event::ApprovalRequested { id, arguments, .. } = events.recv().await.unwrap().event {
            return (id, arguments);
        }
    }
}

#[tokio::test]
async fn a_callers_yes_never_decides_a_later_call_under_the_same_model_call_id() {
    let runs = Runs::default();
    let team = team(&runs, &["rm -rf build", "rm -rf dist"]).await;
    let mut events = team.subscribe();
    let config = A2aServeConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![ServedAgent::new("ops", "runs commands")],
        super::support::auth(),
    );
    let server = serve(&team, config).await.unwrap();
    let url = server.agent_url("ops");
    let message = json!({"message": user_message("clean up")});
    let (_, asked) = rpc(&url, "SendMessage", message, &[]).await;
    let task = asked["result"]["task"].clone();
    let shown = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(shown.contains("rm -rf build"), "{shown}");
    // The operator approves the shown call; the model asks for the next under the same call id.
    let (first, _) = next_approval(&mut events).await;
    team.approve(&first).unwrap();
    let (second, arguments) = next_approval(&mut events).await;
    assert!(arguments.contains("rm -rf dist"), "{arguments}");
    // The caller's yes, for the call it was shown, decides nothing else.
    let yes = json!({"messageId": "m-yes", "role": "ROLE_USER", "taskId": task["id"],
        "contextId": task["contextId"], "parts": [{"text": "yes"}]});
    let (_, after) = rpc(&url, "SendMessage", json!({"message": yes}), &[]).await;
    assert_eq!(*runs.lock().unwrap(), ["rm -rf build"], "{after}");
    assert_ne!(first, second);
    let status = &after["result"]["task"]["status"];
    assert_eq!(status["state"], "TASK_STATE_INPUT_REQUIRED", "{after}");
    let now = status["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(now.contains("rm -rf dist"), "{now}");
    assert_eq!(team.approvals().waiting(), vec![second]);
    let no = json!({"messageId": "m-no", "role": "ROLE_USER", "taskId": task["id"],
        "contextId": task["contextId"], "parts": [{"text": "not that one"}]});
    let (_, done) = rpc(&url, "SendMessage", json!({"message": no}), &[]).await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    assert_eq!(*runs.lock().unwrap(), ["rm -rf build"]);
    server.shutdown().await;
    team.shutdown().await;
}
