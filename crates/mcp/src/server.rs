//! A [`ToolRegistry`] served as an MCP server: `tools/list` gives the registry's definitions,
//! `tools/call` goes through its dispatch — every failure a tool result with `isError` set.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use troupe_runtime::ToolCall;
use troupe_tools::{ToolContext, ToolRegistry};

use crate::error::McpError;

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
        let fail = |reason: String| McpError::Serve { reason };
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| fail(e.to_string()))?;
        running.waiting().await.map_err(|e| fail(e.to_string()))?;
        Ok(())
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
