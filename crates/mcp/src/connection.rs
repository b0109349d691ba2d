//! One MCP server — a child process over stdio or an endpoint over streamable HTTP — started
//! (or connected), initialized, started again when its connection is gone (bounded), and the
//! `tools/call` requests sent to it.

use std::collections::HashMap;
use std::process::Stdio;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, Tool as McpToolInfo};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::Mutex;
use tokio::time::{Instant, timeout_at};

use crate::config::McpServerConfig;
use crate::error::McpError;
use crate::stderr_tail::StderrTail;

/// A started, initialized server.
struct Live {
    service: RunningService<RoleClient, ()>,
    /// Which start this is (0 the first), so a failed call retires only the process it used.
    generation: u32,
    pid: Option<u32>,
    stderr: StderrTail,
}

/// What a call to a server can run into besides the tool's own result.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The server exited before (or while) answering.
    Exited(String),
    /// The server answered with a JSON-RPC error (unknown tool, invalid params, …).
    Refused(String),
    /// The server could not be started again.
    Unavailable(String),
}

struct State {
    live: Option<Live>,
    restarts: u32,
}

/// A server troupe talks to, by name, started again on the next call after it exits.
pub(crate) struct Connection {
    name: String,
    config: McpServerConfig,
    state: Mutex<State>,
}

impl Connection {
    /// Start the server, initialize it and list its tools.
    pub(crate) async fn open(
        name: &str,
        config: McpServerConfig,
    ) -> Result<(Connection, Vec<McpToolInfo>), McpError> {
        let (live, tools) = start(name, &config, 0).await?;
        let connection = Connection {
            name: name.to_string(),
            config,
            state: Mutex::new(State {
                live: Some(live),
                restarts: 0,
            }),
        };
        Ok((connection, tools))
    }

    /// The server's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The process id of the running server, if it is running.
    pub(crate) async fn pid(&self) -> Option<u32> {
        let state = self.state.lock().await;
        state
            .live
            .as_ref()
            .filter(|live| !live.service.is_closed())
            .and_then(|live| live.pid)
    }

    /// Send `tools/call` for `tool` with `args`, starting the server again first if it exited.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<CallToolResult, CallError> {
        let (peer, generation) = self.peer().await?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        match peer.call_tool_once(params).await {
            Ok(CallToolResponse::Complete(result)) => Ok(result),
            Ok(CallToolResponse::InputRequired(_)) => Err(CallError::Refused(
                "the server asked for more input from the user, which troupe does not provide"
                    .to_string(),
            )),
            Ok(CallToolResponse::Task(_)) => Err(CallError::Refused(
                "the server answered with a long-running task, which troupe does not poll"
                    .to_string(),
            )),
            Ok(_) => Err(CallError::Refused(
                "the server answered with a kind of result troupe does not know".to_string(),
            )),
            Err(ServiceError::McpError(e)) => Err(CallError::Refused(e.message.to_string())),
            Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Err(CallError::Exited(self.exited(generation, &e).await))
            }
            // The connection is fine; this call went wrong (an answer of the wrong kind, …).
            Err(e) => Err(CallError::Refused(e.to_string())),
        }
    }

    /// The live server's peer, starting it again when it has exited (at most
    /// `max_restarts` times).
    async fn peer(&self) -> Result<(rmcp::Peer<RoleClient>, u32), CallError> {
        let mut state = self.state.lock().await;
        if let Some(live) = &state.live
            && !live.service.is_closed()
        {
            return Ok((live.service.peer().clone(), live.generation));
        }
        state.live = None;
        if state.restarts >= self.config.max_restarts {
            return Err(CallError::Unavailable(format!(
                "MCP server `{}` exited again after {} restarts, its limit; it is not started \
                 again, use another way to reach your goal",
                self.name, state.restarts
            )));
        }
        state.restarts += 1;
        tracing::warn!(server = %self.name, restart = state.restarts, "restarting MCP server");
        match start(&self.name, &self.config, state.restarts).await {
            Ok((live, _tools)) => {
                let peer = (live.service.peer().clone(), live.generation);
                state.live = Some(live);
                Ok(peer)
            }
            Err(e) => Err(CallError::Unavailable(format!(
                "MCP server `{}` exited and could not be started again: {e}",
                self.name
            ))),
        }
    }

    /// Retire the process of `generation` (its connection is gone; the next call starts a new
    /// one) and say so for the call it did not answer.
    async fn exited(&self, generation: u32, error: &ServiceError) -> String {
        let mut state = self.state.lock().await;
        let retired = match state.live.take() {
            Some(live) if live.generation == generation => Some(live),
            other => {
                // A concurrent call already started a new process; keep it.
                state.live = other;
                None
            }
        };
        let stderr = match &retired {
            Some(live) => live.stderr.describe_after_exit().await,
            None => String::new(),
        };
        let left = self.config.max_restarts.saturating_sub(state.restarts);
        let next = if left == 0 {
            "it will not be started again".to_string()
        } else {
            format!("it will be started again on the next call ({left} restarts left)")
        };
        format!(
            "MCP server `{}` stopped before answering ({error}){stderr}; {next}",
            self.name
        )
    }
}

/// How a server is reached.
enum Transport {
    Child(TokioChildProcess),
    Http(StreamableHttpClientTransport<reqwest::Client>),
}

/// Start the server's process with its arguments, environment and directory.
fn spawn(
    name: &str,
    config: &McpServerConfig,
) -> Result<(TokioChildProcess, Option<tokio::process::ChildStderr>), McpError> {
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(&config.env);
    if let Some(dir) = &config.cwd {
        command.current_dir(dir);
    }
    TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|cause| McpError::Spawn {
            server: name.to_string(),
            command: config.command_line(),
            cause,
        })
}

/// A streamable HTTP client for `url` sending the configured headers.
fn http_transport(
    name: &str,
    url: &str,
    config: &McpServerConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let mut headers = HashMap::new();
    for (key, value) in &config.headers {
        let invalid = |reason: String| McpError::InvalidHeader {
            server: name.to_string(),
            header: key.clone(),
            reason,
        };
        let key = HeaderName::from_bytes(key.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let value = HeaderValue::from_str(value).map_err(|e| invalid(e.to_string()))?;
        headers.insert(key, value);
    }
    let transport_config =
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(headers);
    Ok(StreamableHttpClientTransport::from_config(transport_config))
}

/// The variables a server inherits from troupe (as MCP's reference SDKs do): enough to find
/// programs and a home, never the API keys troupe itself may hold. `env` adds the rest.
const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR",
];

/// Spawn the process, run `initialize` and `tools/list`, all within the init timeout.
async fn start(
    name: &str,
    config: &McpServerConfig,
    generation: u32,
) -> Result<(Live, Vec<McpToolInfo>), McpError> {
    let (transport, pid, stderr) = match &config.url {
        Some(url) => (
            Transport::Http(http_transport(name, url, config)?),
            None,
            StderrTail::default(),
        ),
        None => {
            let (child, stderr) = spawn(name, config)?;
            let pid = child.id();
            (Transport::Child(child), pid, StderrTail::follow(stderr))
        }
    };
    let deadline = Instant::now() + config.init_timeout;
    let timed_out = |stderr: &StderrTail| McpError::InitializeTimeout {
        server: name.to_string(),
        command: config.command_line(),
        timeout: config.init_timeout,
        stderr: stderr.describe(),
    };
    let serving = async {
        match transport {
            Transport::Child(child) => ().serve(child).await,
            Transport::Http(http) => ().serve(http).await,
        }
    };
    let service = match timeout_at(deadline, serving).await {
        Ok(Ok(service)) => service,
        Ok(Err(e)) => {
            return Err(McpError::Initialize {
                server: name.to_string(),
                command: config.command_line(),
                reason: e.to_string(),
                stderr: stderr.describe_after_exit().await,
            });
        }
        Err(_) => return Err(timed_out(&stderr)),
    };
    let tools = match timeout_at(deadline, service.list_all_tools()).await {
        Ok(Ok(tools)) => tools,
        Ok(Err(e)) => {
            return Err(McpError::ListTools {
                server: name.to_string(),
                reason: format!("{e}{}", stderr.describe_after_exit().await),
            });
        }
        Err(_) => return Err(timed_out(&stderr)),
    };
    Ok((
        Live {
            service,
            generation,
            pid,
            stderr,
        },
        tools,
    ))
}
