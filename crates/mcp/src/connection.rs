//! One MCP server — a child process over stdio or an endpoint over streamable HTTP — started
//! (or connected), initialized, started again when its connection is gone (bounded), the
//! `tools/call` requests sent to it, and its tool list kept current: re-listed when the server
//! sends `notifications/tools/list_changed`, when it is started again, and after a call it
//! refused or answered with an error (how servers answer for a tool they dropped without
//! telling).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, Tool as McpToolInfo};
use rmcp::service::{MaybeSendFuture, NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::{Mutex, watch};
use tokio::time::{Instant, timeout, timeout_at};

use crate::config::McpServerConfig;
use crate::error::McpError;
use crate::frames::{CappedLines, MAX_MESSAGE_BYTES, TOO_LARGE_CODE, TOO_LARGE_MARK};
use crate::http_client::WatchedClient;
use crate::list_pages::{ListError, list_tools};
use crate::process::ServerProcess;
use crate::stderr_tail::StderrTail;
use crate::tool_list::{BadTool, ServerTools};

/// The client side of a session: answers the server's requests as rmcp's defaults do, and
/// passes on `notifications/tools/list_changed`.
///
/// rmcp calls [`ClientHandler::on_tool_list_changed`] for every such notification not sent on
/// a `subscriptions/listen` stream; troupe opens none (and `serve` negotiates a protocol with
/// the `initialize` handshake, where servers send the notification unscoped), so every one
/// arrives here.
#[derive(Clone)]
struct ListChanged(watch::Sender<u64>);

impl ClientHandler for ListChanged {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.0.send_modify(|count| *count = count.wrapping_add(1));
        std::future::ready(())
    }
}

/// A started, initialized server.
struct Live {
    /// First, so the session ends (closing the server's stdin) before the process is killed.
    service: RunningService<RoleClient, ListChanged>,
    /// Which start this is (0 the first), so a failed call retires only the process it used.
    generation: u32,
    /// A stdio server's process; dropping it kills the server and whatever it started.
    process: Option<ServerProcess>,
    stderr: StderrTail,
    /// Bumped when the server sent a message too large to read that could not be matched to a
    /// request: the calls waiting then fail rather than wait for their timeout.
    unanswered: watch::Receiver<u64>,
}

/// How long a call the server refused waits for the tools to be listed again before it
/// answers anyway (the listing goes on in the background): a server that hangs on
/// `tools/list` must not turn the refusal into a timeout.
const RELIST_WAIT: Duration = Duration::from_secs(2);

/// What a call to a server can run into besides the tool's own result.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The server exited before (or while) answering.
    Exited(String),
    /// The server answered with a JSON-RPC error (unknown tool, invalid params, …).
    Refused(String),
    /// The server could not be started again.
    Unavailable(String),
    /// The server's answer was over the size troupe reads.
    TooLarge(String),
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
    tools: ServerTools,
    /// Bumped by each `tools/list_changed` the server sends; a task re-lists on every change.
    list_changed: watch::Sender<u64>,
    /// One re-listing at a time, so the last one applied is the newest.
    relisting: Mutex<()>,
}

impl Connection {
    /// Start the server, initialize it and list its tools, naming them around `reserved` (the
    /// names the registry's other tools have). A task re-lists them whenever the server says
    /// they changed, for as long as the connection lives.
    pub(crate) async fn open(
        name: &str,
        config: McpServerConfig,
        reserved: HashSet<String>,
    ) -> Result<Arc<Connection>, McpError> {
        let (list_changed, notified) = watch::channel(0);
        let (live, infos) = start(name, &config, 0, &list_changed).await?;
        let connection = Arc::new(Connection {
            name: name.to_string(),
            tools: ServerTools::new(name, config.call_timeout, reserved),
            config,
            state: Mutex::new(State {
                live: Some(live),
                restarts: 0,
            }),
            list_changed,
            relisting: Mutex::new(()),
        });
        connection
            .tools
            .replace(infos, &Arc::downgrade(&connection), BadTool::Refuse)?;
        tokio::spawn(relist_on_change(Arc::downgrade(&connection), notified));
        Ok(connection)
    }

    /// The server's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its tools as listed last.
    /// The sandbox policy its process runs under, when it runs in one.
    pub(crate) fn sandbox_policy(&self) -> Option<troupe_tools::sandbox::SandboxPolicy> {
        self.config.sandbox.as_ref().map(|s| s.policy)
    }

    pub(crate) fn tools(&self) -> &ServerTools {
        &self.tools
    }

    /// List the server's tools again and offer the new list (starting the server again first
    /// if it exited). On failure the previous list stays.
    pub(crate) async fn relist(self: &Arc<Self>) -> Result<(), McpError> {
        let _one_at_a_time = self.relisting.lock().await;
        let failed = |reason: String| McpError::ListTools {
            server: self.name.clone(),
            reason,
        };
        let (peer, _, _) = self.peer().await.map_err(|e| failed(e.into_message()))?;
        let infos = match timeout(self.config.init_timeout, list_tools(&peer)).await {
            Ok(Ok(infos)) => infos,
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Err(_) => {
                return Err(failed(format!(
                    "no answer to `tools/list` within {}s",
                    self.config.init_timeout.as_secs_f64()
                )));
            }
        };
        self.tools
            .replace(infos, &Arc::downgrade(self), BadTool::Skip)
    }

    /// The process id of the running server, if it is running.
    pub(crate) async fn pid(&self) -> Option<u32> {
        let state = self.state.lock().await;
        state
            .live
            .as_ref()
            .filter(|live| !live.service.is_closed())
            .and_then(|live| live.process.as_ref())
            .and_then(ServerProcess::pid)
    }

    /// Stop the server now (killing its process group) rather than when the last registry
    /// holding it is dropped; a later call starts it again, as after an exit.
    pub(crate) async fn shutdown(&self) {
        let live = self.state.lock().await.live.take();
        drop(live);
    }

    /// Send `tools/call` for `tool` with `args`, starting the server again first if it exited.
    ///
    /// When the server refuses the call or answers with an error, its tools are listed again
    /// (servers answer a call to a tool they no longer have that way, and a server may drop a
    /// tool without sending `tools/list_changed`), before this returns when the listing takes
    /// at most [`RELIST_WAIT`] (or a quarter of the call's timeout), else in the background: the
    /// refusal is the answer either way.
    pub(crate) async fn call(
        self: &Arc<Self>,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<CallToolResult, CallError> {
        let outcome = self.call_once(tool, args).await;
        let refused = match &outcome {
            Ok(result) => result.is_error == Some(true),
            Err(CallError::Refused(_)) => true,
            Err(CallError::Exited(_) | CallError::Unavailable(_) | CallError::TooLarge(_)) => false,
        };
        if refused {
            let connection = self.clone();
            let relisting = tokio::spawn(async move {
                if let Err(e) = connection.relist().await {
                    tracing::warn!(server = %connection.name, error = %e,
                        "re-listing MCP tools after a refused call failed");
                }
            });
            let wait = self
                .config
                .call_timeout
                .map_or(RELIST_WAIT, |t| (t / 4).min(RELIST_WAIT));
            if timeout(wait, relisting).await.is_err() {
                tracing::debug!(server = %self.name, "re-listing goes on in the background");
            }
        }
        outcome
    }

    async fn call_once(
        self: &Arc<Self>,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<CallToolResult, CallError> {
        let (peer, generation, mut unanswered) = self.peer().await?;
        unanswered.mark_unchanged();
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let answer = tokio::select! {
            answer = peer.call_tool_once(params) => answer,
            Ok(()) = unanswered.changed() => {
                return Err(CallError::TooLarge(crate::frames::too_large_message(
                    MAX_MESSAGE_BYTES,
                )));
            }
        };
        match answer {
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
            Err(ServiceError::McpError(e))
                if e.code.0 == TOO_LARGE_CODE
                    && e.data.as_ref().and_then(Value::as_str) == Some(TOO_LARGE_MARK) =>
            {
                Err(CallError::TooLarge(e.message.to_string()))
            }
            Err(ServiceError::McpError(e)) => Err(CallError::Refused(e.message.to_string())),
            Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                let exited = self.exited(generation, &e).await;
                // Over HTTP, rmcp closes the connection on an answer over its size limit.
                if unanswered.has_changed().unwrap_or(false) {
                    Err(CallError::TooLarge(crate::frames::too_large_message(
                        MAX_MESSAGE_BYTES,
                    )))
                } else {
                    Err(CallError::Exited(exited))
                }
            }
            // The connection is fine; this call went wrong (an answer of the wrong kind, …).
            Err(e) => Err(CallError::Refused(e.to_string())),
        }
    }

    /// The live server's peer, starting it again when it has exited (at most
    /// `max_restarts` times).
    async fn peer(
        self: &Arc<Self>,
    ) -> Result<(rmcp::Peer<RoleClient>, u32, watch::Receiver<u64>), CallError> {
        let mut state = self.state.lock().await;
        if let Some(live) = &state.live
            && !live.service.is_closed()
        {
            return Ok((
                live.service.peer().clone(),
                live.generation,
                live.unanswered.clone(),
            ));
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
        match start(&self.name, &self.config, state.restarts, &self.list_changed).await {
            Ok((live, infos)) => {
                let peer = (
                    live.service.peer().clone(),
                    live.generation,
                    live.unanswered.clone(),
                );
                state.live = Some(live);
                // The new process may serve other tools than the one that exited.
                if let Err(e) = self
                    .tools
                    .replace(infos, &Arc::downgrade(self), BadTool::Skip)
                {
                    tracing::warn!(server = %self.name, error = %e, "MCP tools not updated");
                }
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

impl CallError {
    /// What to tell the model.
    fn into_message(self) -> String {
        match self {
            CallError::Exited(m)
            | CallError::Refused(m)
            | CallError::Unavailable(m)
            | CallError::TooLarge(m) => m,
        }
    }
}

/// Re-list `connection`'s tools each time `notified` changes, until the connection is gone.
/// Holds the connection only while re-listing, so it never keeps a server running.
async fn relist_on_change(connection: Weak<Connection>, mut notified: watch::Receiver<u64>) {
    while notified.changed().await.is_ok() {
        let Some(connection) = connection.upgrade() else {
            return;
        };
        match connection.relist().await {
            Ok(()) => tracing::debug!(server = %connection.name, "MCP tools re-listed"),
            Err(e) => tracing::warn!(server = %connection.name, error = %e,
                "re-listing MCP tools after tools/list_changed failed"),
        }
    }
}

/// How a server is reached.
enum Transport {
    /// A child's stdout (its messages capped in size) and stdin.
    Child(
        CappedLines<tokio::process::ChildStdout>,
        tokio::process::ChildStdin,
    ),
    Http(StreamableHttpClientTransport<WatchedClient>),
}

/// A streamable HTTP client for `url` sending the configured headers.
fn http_transport(
    name: &str,
    url: &str,
    config: &McpServerConfig,
    too_large: watch::Sender<u64>,
) -> Result<StreamableHttpClientTransport<WatchedClient>, McpError> {
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
    Ok(StreamableHttpClientTransport::with_client(
        WatchedClient::new(too_large),
        transport_config,
    ))
}

/// Spawn the process, run `initialize` and `tools/list`, all within the init timeout.
async fn start(
    name: &str,
    config: &McpServerConfig,
    generation: u32,
    list_changed: &watch::Sender<u64>,
) -> Result<(Live, Vec<McpToolInfo>), McpError> {
    let (unanswered_tx, unanswered) = watch::channel(0);
    let (transport, process, stderr) = match &config.url {
        Some(url) => (
            Transport::Http(http_transport(name, url, config, unanswered_tx)?),
            None,
            StderrTail::default(),
        ),
        None => {
            let (process, pipes) = ServerProcess::spawn(name, config)?;
            let stdout = CappedLines::new(pipes.stdout, MAX_MESSAGE_BYTES, unanswered_tx);
            (
                Transport::Child(stdout, pipes.stdin),
                Some(process),
                StderrTail::follow(pipes.stderr),
            )
        }
    };
    let deadline = Instant::now() + config.init_timeout;
    let timed_out = |stderr: &StderrTail| McpError::InitializeTimeout {
        server: name.to_string(),
        command: config.command_line(),
        timeout: config.init_timeout,
        stderr: stderr.describe(),
    };
    let handler = ListChanged(list_changed.clone());
    let serving = async {
        match transport {
            Transport::Child(stdout, stdin) => handler.serve((stdout, stdin)).await,
            Transport::Http(http) => handler.serve(http).await,
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
    let tools = match timeout_at(deadline, list_tools(service.peer())).await {
        Ok(Ok(tools)) => tools,
        Ok(Err(e)) => {
            let stderr = match e {
                ListError::Service(_) => stderr.describe_after_exit().await,
                ListError::Unbounded(_) => String::new(),
            };
            return Err(McpError::ListTools {
                server: name.to_string(),
                reason: format!("{e}{stderr}"),
            });
        }
        Err(_) => {
            return Err(McpError::ListToolsTimeout {
                server: name.to_string(),
                command: config.command_line(),
                timeout: config.init_timeout,
                stderr: stderr.describe(),
            });
        }
    };
    Ok((
        Live {
            service,
            generation,
            process,
            stderr,
            unanswered,
        },
        tools,
    ))
}
