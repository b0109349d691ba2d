//! The tools a server offers now, under their registry names: the shared list a registry reads
//! (through [`McpToolSource`]) and the connection replaces when the server's list changes.

use std::collections::HashSet;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rmcp::model::Tool as McpToolInfo;
use troupe_tools::{JsonTool, RegistryError, ToolSource};

use crate::connection::Connection;
use crate::error::McpError;
use crate::names::registry_name;
use crate::tool::{McpTool, parameters};

/// One listing of a server's tools.
#[derive(Clone, Default)]
struct Listing {
    tools: Arc<[Arc<dyn JsonTool>]>,
    /// `(the server's name, the registry name)`, in the order the server listed them.
    names: Vec<(String, String)>,
}

/// What to do with a tool that cannot be offered (a schema that is not an object).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadTool {
    /// Fail: registration adds nothing rather than part of a server.
    Refuse,
    /// Leave it out and say so in the log: a later listing must not take the others away.
    Skip,
}

/// A server's current tools.
pub(crate) struct ServerTools {
    server: String,
    label: String,
    timeout: Option<Duration>,
    /// The names the registry's other tools had at registration; never given to this server's.
    reserved: HashSet<String>,
    current: RwLock<Listing>,
}

impl ServerTools {
    pub(crate) fn new(server: &str, timeout: Option<Duration>, reserved: HashSet<String>) -> Self {
        ServerTools {
            server: server.to_string(),
            label: format!("MCP server `{server}`"),
            timeout,
            reserved,
            current: RwLock::new(Listing::default()),
        }
    }

    /// The tools now, for a registry.
    pub(crate) fn tools(&self) -> Arc<[Arc<dyn JsonTool>]> {
        // Read at every definitions list and every call: an `Arc` clone, not the whole listing.
        troupe_protocol::sync::read(&self.current).tools.clone()
    }

    /// `(the server's name, the registry name)` of each tool now, in the server's order.
    pub(crate) fn names(&self) -> Vec<(String, String)> {
        troupe_protocol::sync::read(&self.current).names.clone()
    }

    /// Replace the tools with the server's listing `infos`. A tool listed before keeps its
    /// registry name; a new one gets `SERVER__tool`, made valid and unique.
    pub(crate) fn replace(
        &self,
        infos: Vec<McpToolInfo>,
        connection: &Weak<Connection>,
        bad: BadTool,
    ) -> Result<(), McpError> {
        let before = self.names();
        let mut taken: HashSet<String> = before
            .iter()
            .filter(|(remote, _)| infos.iter().any(|info| info.name == remote.as_str()))
            .map(|(_, registered)| registered.clone())
            .collect();
        let mut tools: Vec<Arc<dyn JsonTool>> = Vec::with_capacity(infos.len());
        let mut names = Vec::with_capacity(infos.len());
        for info in infos {
            let remote = info.name.to_string();
            let kept = before.iter().find(|(r, _)| *r == remote);
            let registered = match kept {
                Some((_, registered)) => registered.clone(),
                None => {
                    let name = registry_name(&self.server, &remote, |candidate| {
                        self.reserved.contains(candidate) || taken.contains(candidate)
                    });
                    taken.insert(name.clone());
                    name
                }
            };
            let tool = McpTool {
                name: registered.clone(),
                remote: remote.clone(),
                description: info
                    .description
                    .as_deref()
                    .or(info.title.as_deref())
                    .unwrap_or("")
                    .to_string(),
                parameters: parameters(&info.input_schema),
                timeout: self.timeout,
                connection: connection.clone(),
            };
            if let Some(schema) = tool.parameters.get("type").filter(|t| *t != "object") {
                let cause = RegistryError::ArgsNotAnObject {
                    tool: registered,
                    schema: schema.to_string(),
                };
                match bad {
                    BadTool::Refuse => {
                        return Err(McpError::Register {
                            server: self.server.clone(),
                            tool: remote,
                            cause,
                        });
                    }
                    BadTool::Skip => {
                        tracing::warn!(server = %self.server, tool = %remote, %cause,
                            "MCP tool left out");
                        continue;
                    }
                }
            }
            tools.push(Arc::new(tool));
            names.push((remote, registered));
        }
        let listing = Listing {
            tools: tools.into(),
            names,
        };
        *troupe_protocol::sync::write(&self.current) = listing;
        Ok(())
    }
}

/// A server's tools as a [`ToolSource`] of a registry; keeps the server running.
pub(crate) struct McpToolSource(pub(crate) Arc<Connection>);

impl ToolSource for McpToolSource {
    fn label(&self) -> &str {
        &self.0.tools().label
    }

    fn tools(&self) -> Arc<[Arc<dyn JsonTool>]> {
        self.0.tools().tools()
    }
}
