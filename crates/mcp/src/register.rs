//! Registering an MCP server's tools in a [`ToolRegistry`].

use std::future::Future;
use std::sync::Arc;

use troupe_tools::ToolRegistry;

use crate::config::McpServerConfig;
use crate::connection::Connection;
use crate::error::McpError;
use crate::tool_list::McpToolSource;

/// A registered server: its name, its tools as listed last, its process.
///
/// The server keeps running while a registry holds its tools (or this handle lives); it is
/// stopped when the last one is dropped. Its tools change when the server says they did
/// (`notifications/tools/list_changed`), so the names here are a snapshot.
#[derive(Clone)]
pub struct McpServer {
    connection: Arc<Connection>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.connection.name())
            .field("tools", &self.tool_names())
            .finish()
    }
}

impl McpServer {
    /// The server's name, as given at registration.
    pub fn name(&self) -> &str {
        self.connection.name()
    }

    /// The registry names of its tools now (`SERVER__tool`), in the order the server listed
    /// them.
    pub fn tool_names(&self) -> Vec<String> {
        self.names()
            .into_iter()
            .map(|(_, registered)| registered)
            .collect()
    }

    /// The registry name of the server's tool `remote` now, if it has one by that name.
    pub fn registered_name(&self, remote: &str) -> Option<String> {
        self.names()
            .into_iter()
            .find(|(r, _)| r == remote)
            .map(|(_, registered)| registered)
    }

    /// The server's own names of its tools now, in the order it listed them.
    pub fn remote_names(&self) -> impl Iterator<Item = String> {
        self.names().into_iter().map(|(remote, _)| remote)
    }

    /// List the server's tools again now, as a `tools/list_changed` notification does, and
    /// offer the new list in every registry holding the server. A tool listed before keeps its
    /// registry name.
    ///
    /// # Errors
    /// [`McpError::ListTools`] when the server does not answer; the previous list stays.
    pub async fn refresh(&self) -> Result<(), McpError> {
        self.connection.relist().await
    }

    /// The process id of the server while it runs (`None` after it exited, until the next call
    /// starts it again).
    pub async fn pid(&self) -> Option<u32> {
        self.connection.pid().await
    }

    /// Stop the server now — its process and everything it started — instead of when the last
    /// registry holding its tools is dropped. A later call of one of its tools starts it again
    /// (counting as a restart).
    pub async fn shutdown(&self) {
        self.connection.shutdown().await;
    }

    fn names(&self) -> Vec<(String, String)> {
        self.connection.tools().names()
    }
}

/// Start the MCP server `config` describes, list its tools and offer them in `registry` as
/// `NAME__tool` (made valid and unique; see [`McpServer::tool_names`]).
///
/// The tools stay the server's: when it sends `notifications/tools/list_changed` they are
/// listed again and every registry holding them (clones included) offers the new list from
/// the next [`ToolRegistry::definitions`] on; a tool that is gone answers as an unknown tool.
///
/// Nothing is added when any tool cannot be; the server is then stopped.
///
/// # Errors
/// [`McpError`] naming the server and, when it would not start or initialize, the command;
/// [`McpError::ServerName`] for a name whose tools could share a name with another server's
/// ([`crate::server_name_problem`]).
pub async fn register_mcp(
    registry: &mut ToolRegistry,
    name: &str,
    config: McpServerConfig,
) -> Result<McpServer, McpError> {
    if let Some(reason) = crate::names::server_name_problem(name) {
        return Err(McpError::ServerName {
            server: name.to_string(),
            reason,
        });
    }
    let reserved = registry.names().into_iter().collect();
    let connection = Connection::open(name, config, reserved).await?;
    registry
        .register_source(Arc::new(McpToolSource(connection.clone())))
        .map_err(|cause| McpError::Register {
            server: name.to_string(),
            tool: String::new(),
            cause,
        })?;
    Ok(McpServer { connection })
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
