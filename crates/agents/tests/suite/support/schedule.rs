//! The compression agent's queue held open: a model that gates the compactions of chosen
//! agents and logs when each starts, the requests and the team around it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Semaphore, mpsc};
use troupe_agents::compression::{
    COMPRESSION_AGENT, CompactionRequest, CompressionConfig, CompressorJob, CompressorModel,
    InProcess,
};
use troupe_agents::{shared_counter, spawn_compression_agent};
use troupe_compaction::{Compaction, CompactionError, ContextPolicy};
use troupe_protocol::CompactTrigger;
use troupe_protocol::FileLedger;
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatStream, Conversation, FinishReason,
    ModelError, ModelInfo, RequestPriority, ToolCall, TraceContext, Usage, stream_response,
};
use troupe_runtime::{Directory, Team, TeamConfig};

/// What the compression model's loop opens with; the agent's name follows in backticks.
pub(crate) const LOOP_OPENING: &str = "Compress the conversation of agent `";

/// A guard against a hang, not a timing assertion: every wait below ends long before it.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// What happened, in order: `start:<agent>` when a compaction's model loop makes its first
/// call, `end:<agent>` when that call is let through.
pub(crate) type Log = Arc<Mutex<Vec<String>>>;

/// A compression model whose loop calls for gated agents wait for a permit: it holds a
/// compaction running for as long as the test wants. Its answers are plain text, so each loop
/// ends after one call and the planner finishes the compaction.
pub(crate) struct GateModel {
    gates: HashMap<String, Arc<Semaphore>>,
    log: Log,
    started: mpsc::UnboundedSender<String>,
    pub(crate) priorities: Arc<Mutex<Vec<RequestPriority>>>,
}

impl GateModel {
    /// A model gating `gated`, the log, a receiver of started agents, and the gates.
    #[allow(clippy::type_complexity)]
    pub(crate) fn new(
        gated: &[&str],
    ) -> (
        Arc<Self>,
        Log,
        mpsc::UnboundedReceiver<String>,
        HashMap<String, Arc<Semaphore>>,
    ) {
        let gates: HashMap<String, Arc<Semaphore>> = gated
            .iter()
            .map(|a| (a.to_string(), Arc::new(Semaphore::new(0))))
            .collect();
        let log = Log::default();
        let (started, starts) = mpsc::unbounded_channel();
        let model = Arc::new(GateModel {
            gates: gates.clone(),
            log: log.clone(),
            started,
            priorities: Arc::default(),
        });
        (model, log, starts, gates)
    }
}

#[async_trait]
impl ChatModel for GateModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: "gate".into(),
            context_window: 32_000,
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        self.priorities.lock().unwrap().push(request.priority);
        let agent = request.messages.iter().find_map(|m| {
            let text = m.text();
            let rest = text.split_once(LOOP_OPENING)?.1;
            Some(rest.split('`').next()?.to_string())
        });
        if let Some(agent) = agent {
            self.log.lock().unwrap().push(format!("start:{agent}"));
            let _ = self.started.send(agent.clone());
            if let Some(gate) = self.gates.get(&agent) {
                gate.acquire().await.unwrap().forget();
                self.log.lock().unwrap().push(format!("end:{agent}"));
            }
        }
        let response = ChatResponse {
            message: ChatMessage::assistant("Done."),
            usage: Usage::default(),
            finish_reason: FinishReason::Stop,
        };
        Ok(stream_response(response, usize::MAX))
    }
}

pub(crate) fn big(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i}: some file content with several words in it\n"))
        .collect()
}

/// A conversation with `files` read results of ~500 tokens each: more files, less room.
pub(crate) fn conversation(files: usize) -> Conversation {
    let mut messages = vec![
        ChatMessage::system("You are a coder."),
        ChatMessage::user("Read the files."),
    ];
    for i in 0..files {
        let call = ToolCall::new(
            format!("c{i}"),
            "read_file",
            format!(r#"{{"path": "f{i}"}}"#),
        );
        messages.push(ChatMessage::assistant_tool_calls(None, vec![call]));
        messages.push(ChatMessage::tool_result(format!("c{i}"), big(40)));
    }
    for i in 0..3 {
        messages.push(ChatMessage::user(format!("question {i}?")));
        messages.push(ChatMessage::assistant(format!("answer {i}.")));
    }
    Conversation::from_messages(messages)
}

/// A manual compaction (never held back by the anti-thrash guard) of `agent`'s conversation of
/// `files` results in a 4,000-token window.
pub(crate) fn request(agent: &str, files: usize) -> CompactionRequest {
    let policy = ContextPolicy {
        tool_output_limit_tokens: 100_000,
        ..ContextPolicy::for_window(4_000)
    };
    CompactionRequest {
        agent: agent.into(),
        conversation: conversation(files),
        ledger: FileLedger::new(),
        policy,
        trigger: CompactTrigger::Manual,
        focus: None,
        lead: Default::default(),
        tokens: None,
        in_process: InProcess::default(),
    }
}

pub(crate) async fn team(model: Arc<GateModel>, max_concurrent: usize) -> Team {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(model as Arc<dyn ChatModel>);
    config.max_concurrent = max_concurrent;
    spawn_compression_agent(&team, config).await.unwrap();
    team
}

pub(crate) async fn compact(
    directory: &Directory,
    request: CompactionRequest,
) -> Result<Compaction, CompactionError> {
    directory
        .ask_job(
            COMPRESSION_AGENT,
            |reply| CompressorJob::Compact(Box::new(request), reply),
            TraceContext::new_root(),
            PATIENCE,
        )
        .await
        .unwrap()
}

pub(crate) async fn next_start(starts: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, starts.recv())
        .await
        .expect("a compaction should have started")
        .unwrap()
}

pub(crate) fn starts(log: &Log) -> Vec<String> {
    log.lock()
        .unwrap()
        .iter()
        .filter_map(|e| e.strip_prefix("start:").map(str::to_string))
        .collect()
}
