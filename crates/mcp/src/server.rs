//! A [`ToolRegistry`] served as an MCP server: `tools/list` gives the registry's definitions,
//! `tools/call` goes through its dispatch — every failure a tool result with `isError` set.
//!
//! Over stdio every incoming message is answered, also one the SDK would drop without a word
//! (too large, nested too deep, a request id already in flight): see [`guarded_stdio`].

mod guarded_stdio;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::sync::mpsc;
use troupe_protocol::ToolCall;
use troupe_tools::{ToolContext, ToolRegistry};

use crate::error::McpError;
use guarded_stdio::{GuardedReader, InFlight, Limits, LineWriter, write_lines};

/// The limits on one incoming message: the SDK's own line limit (so each line handed on
/// reaches it), and a nesting depth well below serde_json's recursion limit of 128.
const LIMITS: Limits = Limits {
    max_line: DEFAULT_MAX_LINE_LENGTH,
    max_depth: 100,
};
/// How long the replies still queued for stdout may take to go out once the client has gone.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the tools of a registry to one MCP client.
#[derive(Clone)]
pub struct RegistryServer {
    tools: Arc<ToolRegistry>,
    context: ToolContext,
    info: Implementation,
    instructions: Option<String>,
}

impl RegistryServer {
    /// Serve `tools`, calling them with `context` (its agent name, workspace root, ledger), and
    /// introduce the server to clients as `name` `version`.
    pub fn new(
        tools: ToolRegistry,
        context: ToolContext,
        name: impl Into<String>,
        version: impl Into<String>,
    ) -> Self {
        RegistryServer {
            tools: Arc::new(tools),
            context,
            info: Implementation::new(name, version),
            instructions: None,
        }
    }

    /// With instructions for the client's model, sent in the `initialize` answer.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Serve over this process's stdin and stdout until the client closes them.
    ///
    /// # Errors
    /// [`McpError::Serve`] when the client's `initialize` fails or the connection breaks.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        self.serve_io(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serve over `input` and `output` (stdio's streams, or a test's pipes) until the client
    /// closes `input`.
    ///
    /// # Errors
    /// As [`RegistryServer::serve_stdio`].
    pub async fn serve_io<R, W>(self, input: R, output: W) -> Result<(), McpError>
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let fail = |reason: String| McpError::Serve { reason };
        let (lines, outbox) = mpsc::channel(guarded_stdio::OUTBOX_LINES);
        let writer = tokio::spawn(write_lines(outbox, output));
        let in_flight = Arc::new(InFlight::default());
        let reader = GuardedReader::new(input, LIMITS, lines.clone(), in_flight.clone());
        let served = match self
            .serve((reader, LineWriter::new(lines, in_flight)))
            .await
        {
            Ok(running) => running
                .waiting()
                .await
                .map(drop)
                .map_err(|e| fail(e.to_string())),
            Err(e) => Err(fail(e.to_string())),
        };
        // The transport is gone with the service, and with it every sender: the writer ends
        // once what is queued is out (or stdout has stopped taking it).
        match tokio::time::timeout(DRAIN_TIMEOUT, writer).await {
            Ok(Ok(Err(e))) => tracing::debug!(error = %e, "writing to the client failed"),
            Ok(Err(e)) => tracing::debug!(error = %e, "stdout's writer failed"),
            Ok(Ok(Ok(()))) | Err(_) => {}
        }
        served
    }

    fn definitions(&self) -> Vec<Tool> {
        self.tools
            .definitions()
            .into_iter()
            .map(|d| {
                let schema = match d.parameters {
                    serde_json::Value::Object(schema) => schema,
                    _ => serde_json::Map::new(),
                };
                Tool::new_with_raw(d.name, Some(d.description.into()), schema)
            })
            .collect()
    }
}

impl ServerHandler for RegistryServer {
    fn get_info(&self) -> ServerConfig {
        let config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(self.info.clone());
        match &self.instructions {
            Some(text) => config.with_instructions(text.clone()),
            None => config,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.definitions()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let call = ToolCall::new(
            format!("mcp-{}", context.id),
            request.name.to_string(),
            arguments.to_string(),
        );
        // A client that cancels the request cancels the tool through its token.
        let ctx = self.context.clone().with_cancel(context.ct.clone());
        let result = self.tools.dispatch(&call, &ctx).await;
        let content = vec![ContentBlock::text(result.content.clone())];
        Ok(if result.is_error() {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}
