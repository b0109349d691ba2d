//! Registering an MCP server's tools in a [`ToolRegistry`].

use std::future::Future;
use std::sync::Arc;

use troupe_tools::ToolRegistry;

use crate::config::McpServerConfig;
use crate::connection::Connection;
use crate::error::McpError;
use crate::names::registry_name;
use crate::tool::{McpTool, parameters};

/// A registered server: its name, the registry names of its tools, its process.
///
/// The server keeps running while any of its tools is in a registry (or this handle lives);
/// it is stopped when the last one is dropped.
#[derive(Clone)]
pub struct McpServer {
    connection: Arc<Connection>,
    /// Registry names, in the order the server listed its tools.
    tools: Vec<String>,
    /// The server's own names, index for index.
    remotes: Vec<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.connection.name())
            .field("tools", &self.tools)
            .finish()
    }
}

impl McpServer {
    /// The server's name, as given at registration.
    pub fn name(&self) -> &str {
        self.connection.name()
    }

    /// The registry names of its tools (`SERVER__tool`), in the order the server listed them.
    pub fn tool_names(&self) -> &[String] {
        &self.tools
    }

    /// The registry name of the server's tool `remote`, if it has one by that name.
    pub fn registered_name(&self, remote: &str) -> Option<&str> {
        let at = self.remotes.iter().position(|r| r == remote)?;
        self.tools.get(at).map(String::as_str)
    }

    /// The server's own names of its tools, in the order it listed them.
    pub fn remote_names(&self) -> impl Iterator<Item = &str> {
        self.remotes.iter().map(String::as_str)
    }

    /// The process id of the server while it runs (`None` after it exited, until the next call
    /// starts it again).
    pub async fn pid(&self) -> Option<u32> {
        self.connection.pid().await
    }
}

/// Start the MCP server `config` describes, list its tools and add each to `registry` as
/// `NAME__tool` (made valid and unique; see [`McpServer::tool_names`]).
///
/// Nothing is added when any tool cannot be; the server is then stopped.
///
/// # Errors
/// [`McpError`] naming the server and, when it would not start or initialize, the command.
pub async fn register_mcp(
    registry: &mut ToolRegistry,
    name: &str,
    config: McpServerConfig,
) -> Result<McpServer, McpError> {
    let timeout = config.call_timeout;
    let (connection, infos) = Connection::open(name, config).await?;
    let connection = Arc::new(connection);
    let mut tools = ToolRegistry::new();
    let mut names = Vec::with_capacity(infos.len());
    let mut remotes = Vec::with_capacity(infos.len());
    for info in infos {
        let registered = registry_name(name, &info.name, |candidate| {
            registry.contains(candidate) || tools.contains(candidate)
        });
        let description = info
            .description
            .as_deref()
            .or(info.title.as_deref())
            .unwrap_or("")
            .to_string();
        let tool = McpTool {
            name: registered.clone(),
            remote: info.name.to_string(),
            description,
            parameters: parameters(&info.input_schema),
            timeout,
            connection: connection.clone(),
        };
        tools
            .register_json(tool)
            .map_err(|cause| McpError::Register {
                server: name.to_string(),
                tool: info.name.to_string(),
                cause,
            })?;
        names.push(registered);
        remotes.push(info.name.to_string());
    }
    registry.merge(&tools).map_err(|cause| McpError::Register {
        server: name.to_string(),
        tool: String::new(),
        cause,
    })?;
    Ok(McpServer {
        connection,
        tools: names,
        remotes,
    })
}

/// [`register_mcp`] as a method of [`ToolRegistry`].
pub trait RegisterMcp {
    /// See [`register_mcp`].
    fn register_mcp(
        &mut self,
        name: &str,
        config: McpServerConfig,
    ) -> impl Future<Output = Result<McpServer, McpError>> + Send;
}

impl RegisterMcp for ToolRegistry {
    fn register_mcp(
        &mut self,
        name: &str,
        config: McpServerConfig,
    ) -> impl Future<Output = Result<McpServer, McpError>> + Send {
        register_mcp(self, name, config)
    }
}
