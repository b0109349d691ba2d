//! Scripted teams, a fake A2A peer speaking the real wire format (A2A 1.0 JSON-RPC over HTTP,
//! SSE for streams, as a2a-sdk 1.3.0 writes them), and JSON-RPC over plain HTTP.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use troupe_a2a::{A2aRemote, ServerAuth};
use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::{AgentSpec, TeamBuilderExt as _, shared_counter};
use troupe_models::ScriptedModel;
use troupe_runtime::{Team, TeamConfig};

/// A team whose `coder` answers every request with `answer` (streamed in chunks).
pub async fn team_answering(answer: &str) -> Team {
    let model = Arc::new(ScriptedModel::new("scripted", []).with_fallback(answer));
    Team::builder()
        .config(TeamConfig::default())
        .compression(CompressionConfig {
            model: CompressorModel::None,
            ..CompressionConfig::new(shared_counter())
        })
        .agent(
            AgentSpec::new("coder", model)
                .instructions("You write and review Rust code for the team."),
        )
        .agent(AgentSpec::new("sleeper", Arc::new(Stuck)))
        .start()
        .await
        .unwrap()
}

/// An empty team (a supervisor, no agents) to add remote agents to.
pub async fn empty_team() -> Team {
    Team::start(TeamConfig::default()).await.unwrap()
}

/// An HTTP client (the process's TLS provider installed first, as troupe does).
pub fn http() -> reqwest::Client {
    troupe_host::tls::install_crypto_provider();
    reqwest::Client::new()
}

/// The key of the tests' servers ([`auth`]).
pub const KEY: &str = "test-key-of-the-tester";

/// The callers of the tests' servers: one, `tester`, holding [`KEY`].
pub fn auth() -> ServerAuth {
    ServerAuth::bearer("tester", KEY)
}

/// A remote agent at `url` asked with [`KEY`] (kept in the process's credentials).
pub fn remote(url: impl Into<String>) -> A2aRemote {
    troupe_host::credentials::keep("TROUPE_TEST_A2A_KEY", KEY);
    A2aRemote::new(url).key_env("TROUPE_TEST_A2A_KEY")
}

/// A JSON-RPC call of A2A 1.0 to `url`: the HTTP status and the answer. It carries
/// `A2A-Version: 1.0` and [`KEY`] unless `headers` set their own.
pub async fn rpc(url: &str, method: &str, params: Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = http()
        .post(url)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    {
        request = request.bearer_auth(KEY);
    }
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("A2A-Version"))
    {
        request = request.header("A2A-Version", "1.0");
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// A user message of `text`.
pub fn user_message(text: &str) -> Value {
    json!({"messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// What the fake peer does with a request.
#[derive(Clone)]
pub enum PeerScript {
    /// A card of this many bytes (padding in the description).
    HugeCard(usize),
    /// A card whose interface is on another host.
    CardElsewhere,
    /// Streams artifact chunks of task `t1` forever.
    EndlessStream,
    /// Starts task `t1`, then says nothing.
    SilentStream,
    /// Starts task `t1`, then sends a status update of task `t2`.
    ForeignTask,
    /// Answers a send with a body of this many bytes (a text artifact).
    HugeAnswer(usize),
    /// Asks for input on `t1`; completes it with the answer's text.
    InputRequired,
    /// Streams a draft in chunks, then replaces the artifact with the final text.
    Replacing,
    /// As `InputRequired`, but the first answer on `t1` gets an HTTP 503.
    InputRequiredFlaky,
    /// Starts task `t1`, then streams one artifact event of this many bytes of text.
    HugeEvent(usize),
}

/// What the fake peer saw.
#[derive(Default)]
pub struct PeerLog {
    /// Methods called, in order.
    pub methods: Vec<String>,
    /// Each call's params.
    pub params: Vec<Value>,
    /// Each call's `traceparent`, if any.
    pub traceparents: Vec<Option<String>>,
}

/// A fake A2A peer on loopback: its base URL and its log.
pub async fn fake_peer(script: PeerScript, streaming: bool) -> (String, Arc<Mutex<PeerLog>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let base = format!("http://{addr}");
    let log = Arc::new(Mutex::new(PeerLog::default()));
    let card = {
        let base = base.clone();
        let script = script.clone();
        move || {
            let url = match script {
                PeerScript::CardElsewhere => "http://169.254.169.254/".to_string(),
                _ => format!("{base}/"),
            };
            let description = match script {
                PeerScript::HugeCard(bytes) => "x".repeat(bytes),
                _ => "a fake peer".into(),
            };
            json!({"name": "peer", "description": description, "version": "1",
                "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                "capabilities": {"streaming": streaming},
                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []})
            .to_string()
        }
    };
    let rpc_log = log.clone();
    let app = Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || {
                let card = card.clone();
                async move { ([("content-type", "application/json")], card()) }
            }),
        )
        .route(
            "/",
            post(move |headers: HeaderMap, body: axum::Json<Value>| {
                let log = rpc_log.clone();
                let script = script.clone();
                async move { peer_rpc(script, log, headers, body.0) }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, log)
}

fn sse(events: impl futures::Stream<Item = Value> + Send + 'static) -> Response {
    use futures::StreamExt as _;
    let body = events.map(|result| {
        let data = json!({"jsonrpc": "2.0", "id": 1, "result": result});
        Ok::<_, std::convert::Infallible>(format!("data: {data}\n\n"))
    });
    (
        [("content-type", "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

fn task(id: &str, state: &str) -> Value {
    json!({"task": {"id": id, "contextId": "ctx", "status": {"state": state}}})
}

fn status(id: &str, state: &str, text: Option<&str>) -> Value {
    let mut status = json!({"state": state});
    if let Some(text) = text {
        status["message"] =
            json!({"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": text}]});
    }
    json!({"statusUpdate": {"taskId": id, "contextId": "ctx", "status": status}})
}

fn artifact(id: &str, text: &str) -> Value {
    chunk(id, text, true)
}

fn chunk(id: &str, text: &str, append: bool) -> Value {
    json!({"artifactUpdate": {"taskId": id, "contextId": "ctx", "append": append,
        "artifact": {"artifactId": "a", "parts": [{"text": text}]}}})
}

fn peer_rpc(
    script: PeerScript,
    log: Arc<Mutex<PeerLog>>,
    headers: HeaderMap,
    body: Value,
) -> Response {
    let method = body["method"].as_str().unwrap_or_default().to_string();
    let params = body["params"].clone();
    {
        let mut log = log.lock().unwrap();
        log.methods.push(method.clone());
        log.params.push(params.clone());
        log.traceparents.push(
            headers
                .get("traceparent")
                .map(|v| v.to_str().unwrap().to_string()),
        );
    }
    let result = |value: Value| {
        axum::Json(json!({"jsonrpc": "2.0", "id": body["id"], "result": value})).into_response()
    };
    match (method.as_str(), script) {
        ("CancelTask", _) => result(
            json!({"id": params["id"], "contextId": "ctx", "status": {"state": "TASK_STATE_CANCELED"}}),
        ),
        ("SendStreamingMessage", PeerScript::EndlessStream) => {
            let first = futures::stream::iter([task("t1", "TASK_STATE_WORKING")]);
            let rest = futures::stream::repeat_with(|| artifact("t1", "tick "));
            use futures::StreamExt as _;
            sse(first.chain(rest))
        }
        ("SendStreamingMessage", PeerScript::SilentStream) => {
            use futures::StreamExt as _;
            sse(futures::stream::iter([task("t1", "TASK_STATE_WORKING")])
                .chain(futures::stream::pending()))
        }
        ("SendStreamingMessage", PeerScript::HugeEvent(bytes)) => sse(futures::stream::iter([
            task("t1", "TASK_STATE_WORKING"),
            artifact("t1", &"x".repeat(bytes)),
        ])),
        ("SendStreamingMessage", PeerScript::ForeignTask) => sse(futures::stream::iter([
            task("t1", "TASK_STATE_WORKING"),
            status("t2", "TASK_STATE_COMPLETED", Some("not yours")),
        ])),
        ("SendStreamingMessage", PeerScript::Replacing) => sse(futures::stream::iter([
            task("t1", "TASK_STATE_WORKING"),
            chunk("t1", "draft ", false),
            chunk("t1", "more", true),
            chunk("t1", "final answer", false),
            status("t1", "TASK_STATE_COMPLETED", None),
        ])),
        ("SendStreamingMessage", PeerScript::InputRequiredFlaky)
            if params["message"]["taskId"].as_str() == Some("t1")
                && log.lock().unwrap().methods.len() == 2 =>
        {
            (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response()
        }
        ("SendStreamingMessage", PeerScript::InputRequired | PeerScript::InputRequiredFlaky) => {
            let answering = params["message"]["taskId"].as_str() == Some("t1");
            if answering {
                let city = params["message"]["parts"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                sse(futures::stream::iter([
                    task("t1", "TASK_STATE_WORKING"),
                    artifact("t1", &format!("sunny in {city}")),
                    status("t1", "TASK_STATE_COMPLETED", None),
                ]))
            } else {
                sse(futures::stream::iter([
                    task("t1", "TASK_STATE_SUBMITTED"),
                    status("t1", "TASK_STATE_INPUT_REQUIRED", Some("Which city?")),
                ]))
            }
        }
        ("SendMessage", PeerScript::HugeAnswer(bytes)) => {
            // Streamed out without holding it: the client must stop reading at its cap.
            let head = r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","contextId":"ctx","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a","parts":[{"text":""#.to_string();
            let chunk = "y".repeat(64 * 1024);
            let chunks = bytes / chunk.len();
            let body = futures::stream::iter(
                std::iter::once(head)
                    .chain(std::iter::repeat_n(chunk, chunks))
                    .chain(std::iter::once(r#""}]}]}}}"#.to_string()))
                    .map(Ok::<_, std::convert::Infallible>),
            );
            (
                StatusCode::OK,
                [("content-type", "application/json")],
                Body::from_stream(body),
            )
                .into_response()
        }
        _ => result(
            json!({"task": {"id": "t9", "contextId": "ctx", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "fine"}]}]}}),
        ),
    }
}

/// A model that never answers: a request to it runs until cancelled.
pub struct Stuck;

#[async_trait::async_trait]
impl troupe_protocol::ChatModel for Stuck {
    fn info(&self) -> troupe_protocol::ModelInfo {
        ScriptedModel::new("stuck", []).info()
    }

    async fn chat_stream(
        &self,
        _request: troupe_protocol::ChatRequest,
    ) -> Result<troupe_protocol::ChatStream, troupe_protocol::ModelError> {
        std::future::pending().await
    }
}

/// A team whose `sleeper` never answers.
pub async fn team_stuck() -> Team {
    Team::builder()
        .compression(CompressionConfig {
            model: CompressorModel::None,
            ..CompressionConfig::new(shared_counter())
        })
        .agent(AgentSpec::new("sleeper", Arc::new(Stuck)))
        .start()
        .await
        .unwrap()
}

/// The commands the `run` tool ran.
pub type Runs = Arc<Mutex<Vec<String>>>;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct RunArgs {
    command: String,
}

/// A team whose `ops` runs `rm -rf build` through a `run` tool its policy asks about, then
/// answers `removed`; the commands run are recorded in `runs`.
pub async fn team_asking_approval(runs: &Runs) -> Team {
    team_asking_approval_for(runs, &["rm -rf build"]).await
}

/// As [`team_asking_approval`], with one `run` call per command, one after the other.
pub async fn team_asking_approval_for(runs: &Runs, commands: &[&str]) -> Team {
    use troupe_models::ScriptedReply;
    use troupe_tools::approval::{ApprovalPolicy, ApprovalRule, Permission};
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
    let model = Arc::new(ScriptedModel::new(
        "scripted-ops",
        commands
            .iter()
            .map(|command| {
                ScriptedReply::ToolCalls(vec![(
                    "run".into(),
                    json!({ "command": command }).to_string(),
                )])
            })
            .chain([ScriptedReply::text("removed")]),
    ));
    let policy = ApprovalPolicy::new([ApprovalRule::argument_prefix(
        "run",
        "command",
        "rm ",
        Permission::Ask,
    )]);
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

/// A team whose `spender` calls `run`, then would answer — but its one-token request budget
/// pauses it before the second model call, for `pause` before it ends.
pub async fn team_over_budget(pause: std::time::Duration) -> Team {
    use troupe_agents::spend::{AgentBudget, OnExceeded};
    use troupe_models::ScriptedReply;
    let mut tools = troupe_tools::ToolRegistry::new();
    tools
        .register_fn("run", "Run a command.", |args: RunArgs| async move {
            Ok(format!("ran {}", args.command))
        })
        .unwrap();
    let model = Arc::new(ScriptedModel::new(
        "scripted-spender",
        [
            ScriptedReply::ToolCalls(vec![("run".into(), r#"{"command": "ls"}"#.into())]),
            ScriptedReply::text("listed"),
        ],
    ));
    let budget = AgentBudget {
        request: troupe_protocol::SpendLimit {
            input_tokens: Some(1),
            ..troupe_protocol::SpendLimit::default()
        },
        on_exceeded: OnExceeded::Pause { timeout: pause },
        ..AgentBudget::default()
    };
    Team::builder()
        .compression(CompressionConfig {
            model: CompressorModel::None,
            ..CompressionConfig::new(shared_counter())
        })
        .agent(AgentSpec::new("spender", model).tools(tools).budget(budget))
        .start()
        .await
        .unwrap()
}
