//! `[mcp.servers.NAME]`: MCP servers whose tools agents name as `mcp:NAME` (every tool) or
//! `mcp:NAME/TOOL` (one); their checks and the connecting of an agent's servers.
//!
//! ```toml
//! [mcp.servers.time]
//! command = "uvx"                   # started as a child process; stdio transport
//! args = ["mcp-server-time"]
//! env = { TZ = "Etc/UTC" }          # it inherits only PATH, HOME, LANG, … from troupe
//! cwd = "."
//! timeout_secs = 20                 # per call; default: [tools] timeout_secs, else 60
//! init_timeout_secs = 30            # initialize + tools/list
//! max_restarts = 3                  # a server that exits is started again at most this often
//! sandbox = true                    # run it under the agent's [sandbox] (cwd: the workspace)
//!
//! [mcp.servers.search]
//! url = "http://127.0.0.1:8000/mcp"  # streamable HTTP instead of a command
//! headers = { Authorization = "Bearer …" }
//!
//! [agents.assistant]
//! tools = ["read_file", "mcp:time"]  # or "mcp:time/get_current_time"
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use troupe_agents::AgentSpec;
use troupe_mcp::{McpServer, McpServerConfig, RegisterMcp};
use troupe_protocol::ChatModel;
use troupe_tools::ToolRegistry;

use super::{AgentConfig, BuildError, Config};

/// How an agent's `tools` entry names MCP tools: `mcp:NAME` or `mcp:NAME/TOOL`.
pub const MCP_TOOL_PREFIX: &str = "mcp:";

/// `[mcp]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Servers by name.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerEntry>,
}

/// `[mcp.servers.NAME]`: a server started as a child process and spoken to over stdio
/// (`command`), or one reached over streamable HTTP (`url`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    /// The program to run.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for it; it inherits only `PATH`, `HOME`, `LANG`, `LC_ALL`, `USER`,
    /// `LOGNAME`, `SHELL`, `TERM` and `TMPDIR` from troupe (never its API keys).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// A streamable HTTP endpoint, instead of `command`.
    pub url: Option<String>,
    /// HTTP headers for `url` (e.g. `Authorization`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds one call may take; default: `[tools] timeout_secs`, else 60.
    pub timeout_secs: Option<u64>,
    /// Seconds `initialize` plus `tools/list` may take; default 30.
    pub init_timeout_secs: Option<u64>,
    /// How often a server that exited is started again; default 3.
    pub max_restarts: Option<u32>,
    /// Whether it runs under the agent's sandbox (`[sandbox]`, `[agents.NAME] sandbox`), its
    /// `cwd` (default: the workspace) as the workspace; default `false`: unconfined, like a
    /// program the user starts.
    #[serde(default)]
    pub sandbox: bool,
}

/// An agent's `mcp:NAME` or `mcp:NAME/TOOL` entry, split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpToolRef<'a> {
    /// The `[mcp.servers]` key.
    pub server: &'a str,
    /// One tool by its name on the server, or `None` for all of them.
    pub tool: Option<&'a str>,
}

impl<'a> McpToolRef<'a> {
    /// The reference a `tools` entry makes, if it starts with `mcp:`.
    pub fn parse(entry: &'a str) -> Option<Self> {
        let rest = entry.strip_prefix(MCP_TOOL_PREFIX)?;
        Some(match rest.split_once('/') {
            Some((server, tool)) => McpToolRef {
                server,
                tool: Some(tool),
            },
            None => McpToolRef {
                server: rest,
                tool: None,
            },
        })
    }
}

/// `(key, message)` of a problem, as the config's validation reports it.
type Problem = (String, String);

impl McpConfig {
    /// The first problem in `[mcp.servers]`.
    pub(super) fn validate(&self) -> Result<(), Problem> {
        for (name, server) in &self.servers {
            let key = |field: &str| format!("mcp.servers.{name}.{field}");
            if let Some(problem) = troupe_mcp::server_name_problem(name) {
                return Err((format!("mcp.servers.{name}"), problem));
            }
            match (&server.command, &server.url) {
                (None, None) => {
                    return Err((
                        key("command"),
                        "required: the program to run (or `url` for a streamable HTTP server)"
                            .into(),
                    ));
                }
                (Some(_), Some(_)) => {
                    return Err((key("url"), "give `command` or `url`, not both".into()));
                }
                (Some(c), None) if c.trim().is_empty() => {
                    return Err((key("command"), "must not be empty".into()));
                }
                (None, Some(url)) => {
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        return Err((
                            key("url"),
                            format!("must start with http:// or https://, got `{url}`"),
                        ));
                    }
                    for (field, set) in [
                        ("args", !server.args.is_empty()),
                        ("env", !server.env.is_empty()),
                        ("cwd", server.cwd.is_some()),
                        ("sandbox", server.sandbox),
                    ] {
                        if set {
                            return Err((
                                key(field),
                                "only for a server started with `command`".into(),
                            ));
                        }
                    }
                }
                (Some(_), None) => {
                    if !server.headers.is_empty() {
                        return Err((key("headers"), "only for a server reached by `url`".into()));
                    }
                }
            }
            for (field, value) in [
                ("timeout_secs", server.timeout_secs),
                ("init_timeout_secs", server.init_timeout_secs),
            ] {
                if value == Some(0) {
                    return Err((key(field), "must be at least 1".into()));
                }
            }
        }
        Ok(())
    }

    /// The problem with `entry` (`agents.AGENT.tools[i]` is `key`), if it names no server.
    pub(super) fn check_tool_ref(&self, key: String, entry: &str) -> Result<(), Problem> {
        let Some(reference) = McpToolRef::parse(entry) else {
            return Ok(());
        };
        if !self.servers.contains_key(reference.server) {
            let known = self.servers.keys().cloned().collect::<Vec<_>>().join(", ");
            return Err((
                key,
                format!(
                    "no MCP server `{}` in [mcp.servers] (configured: {})",
                    reference.server,
                    if known.is_empty() { "none" } else { &known }
                ),
            ));
        }
        if reference.tool.is_some_and(str::is_empty) {
            return Err((key, format!("`{entry}` names no tool after the `/`")));
        }
        Ok(())
    }
}

impl McpServerEntry {
    /// The server's start-up settings; `default_timeout` is `[tools] timeout_secs`.
    fn server_config(&self, default_timeout: Option<Duration>) -> McpServerConfig {
        let mut config = match &self.url {
            Some(url) => McpServerConfig::http(url.clone()),
            None => McpServerConfig::stdio(self.command.clone().unwrap_or_default())
                .args(self.args.iter().cloned()),
        };
        config.env = self.env.clone();
        config.cwd = self.cwd.clone();
        config.headers = self.headers.clone();
        if let Some(t) = self
            .timeout_secs
            .map(Duration::from_secs)
            .or(default_timeout)
        {
            config = config.call_timeout(t);
        }
        if let Some(t) = self.init_timeout_secs {
            config = config.init_timeout(Duration::from_secs(t));
        }
        if let Some(n) = self.max_restarts {
            config = config.max_restarts(n);
        }
        config
    }
}

impl Config {
    /// Start the MCP servers `agent` names and register their tools (`SERVER__tool`); a server
    /// named by several entries is started once.
    ///
    /// # Errors
    /// [`BuildError::Tool`] naming the entry when a server cannot be started or initialized,
    /// or names no such tool.
    pub async fn mcp_tools(
        &self,
        agent_name: &str,
        agent: &AgentConfig,
    ) -> Result<(ToolRegistry, Vec<McpServer>), BuildError> {
        let fail = |entry: &str, reason: String| BuildError::Tool {
            agent: agent_name.to_string(),
            tool: entry.to_string(),
            reason,
        };
        let default_timeout = self.tools.timeout_secs.map(Duration::from_secs);
        let mut started: BTreeMap<&str, (ToolRegistry, McpServer)> = BTreeMap::new();
        let mut tools = ToolRegistry::new();
        // Which server each name in `tools` came from: the same tool named twice (`mcp:time`
        // and `mcp:time/x`) is added once, another server's tool by that name is an error.
        let mut owners: BTreeMap<String, &str> = BTreeMap::new();
        for entry in &agent.tools {
            let Some(reference) = McpToolRef::parse(entry) else {
                continue;
            };
            let Some(server) = self.mcp.servers.get(reference.server) else {
                return Err(fail(entry, "no such server in [mcp.servers]".into()));
            };
            if !started.contains_key(reference.server) {
                let mut all = ToolRegistry::new();
                let mut config = server.server_config(default_timeout);
                if server.sandbox {
                    config = config.sandboxed(self.sandbox_for(agent_name));
                    if config.cwd.is_none() {
                        config.cwd = self.tools.workspace.clone();
                    }
                }
                let handle = all
                    .register_mcp(reference.server, config)
                    .await
                    .map_err(|e| fail(entry, e.to_string()))?;
                started.insert(reference.server, (all, handle));
            }
            let Some((all, handle)) = started.get(reference.server) else {
                continue;
            };
            let wanted = match reference.tool {
                None => all.clone(),
                Some(tool) => {
                    let Some(registered) = handle.registered_name(tool) else {
                        return Err(fail(
                            entry,
                            format!(
                                "MCP server `{}` has no tool `{tool}` (it has: {})",
                                reference.server,
                                handle.remote_names().collect::<Vec<_>>().join(", ")
                            ),
                        ));
                    };
                    // `retain`, not removing the others: tools the server adds later stay out.
                    let mut one = all.clone();
                    one.retain(|name| name == registered);
                    one
                }
            };
            // `mcp:time` and `mcp:time/get_current_time` together: each tool once.
            let mut fresh = wanted.clone();
            for name in wanted.names() {
                match owners.get(name.as_str()) {
                    Some(owner) if *owner == reference.server => {
                        fresh.remove(&name);
                    }
                    Some(owner) => {
                        return Err(fail(
                            entry,
                            format!(
                                "MCP servers `{owner}` and `{}` both offer a tool named `{name}`; \
                                 rename one of the servers",
                                reference.server
                            ),
                        ));
                    }
                    None => {
                        owners.insert(name, reference.server);
                    }
                }
            }
            tools
                .merge(&fresh)
                .map_err(|e| fail(entry, e.to_string()))?;
        }
        Ok((tools, started.into_values().map(|(_, h)| h).collect()))
    }

    /// [`Config::agent_spec`] with the agent's MCP tools connected and added (the plain
    /// `agent_spec` registers built-in tools only, since starting a server is async).
    ///
    /// # Errors
    /// As [`Config::agent_spec`] and [`Config::mcp_tools`].
    pub async fn agent_spec_connected(
        &self,
        name: &str,
        models: &BTreeMap<String, Arc<dyn ChatModel>>,
        default_model: Option<Arc<dyn ChatModel>>,
    ) -> Result<AgentSpec, BuildError> {
        let mut spec = self.agent_spec(name, models, default_model)?;
        let agent = self.agents.get(name).ok_or_else(|| BuildError::Missing {
            what: "agent",
            name: name.to_string(),
        })?;
        let (mcp, _servers) = self.mcp_tools(name, agent).await?;
        spec.tools.merge(&mcp).map_err(|e| BuildError::Tool {
            agent: name.to_string(),
            tool: "mcp".to_string(),
            reason: e.to_string(),
        })?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `crates/mcp/tests/hostile_server.py tools NAMES…` as a server entry, if there is a
    /// `python3`.
    fn listing(names: &[&str]) -> Option<McpServerEntry> {
        let found = std::process::Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success());
        if !found {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "python3 is needed"
            );
            eprintln!("skipped: no python3");
            return None;
        }
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../mcp/tests/hostile_server.py"
        );
        let mut args = vec![script.to_string(), "tools".to_string()];
        args.extend(names.iter().map(|n| n.to_string()));
        Some(McpServerEntry {
            command: Some("python3".to_string()),
            args,
            ..McpServerEntry::default()
        })
    }

    #[test]
    fn server_names_whose_tools_could_collide_are_refused() {
        for name in ["a__b", "a_", &"s".repeat(49)] {
            let text = format!("[mcp.servers.{name}]\ncommand = \"x\"\n");
            let err = Config::parse(&text).unwrap_err().to_string();
            assert!(err.contains(&format!("mcp.servers.{name}")), "{err}");
            assert!(err.contains("may not contain `__`"), "{err}");
        }
        assert!(Config::parse("[mcp.servers.a_b-c]\ncommand = \"x\"\n").is_ok());
    }

    #[tokio::test]
    async fn a_server_name_whose_tools_could_collide_is_refused_past_the_config_check_too() {
        let (Some(first), Some(second)) = (listing(&["b__x", "y"]), listing(&["x"])) else {
            return;
        };
        let mut config = Config::parse(
            "[mcp.servers.a]\ncommand = \"x\"\n[mcp.servers.c]\ncommand = \"x\"\n\
             [agents.agent]\ntools = [\"mcp:a\", \"mcp:c\"]\n",
        )
        .unwrap();
        // Past the config's validation, as a config built in code can be: `a` and `a__b` would
        // both offer `a__b__x`, and registration itself refuses the second name.
        config.mcp.servers.clear();
        config.mcp.servers.insert("a".to_string(), first);
        config.mcp.servers.insert("a__b".to_string(), second);
        let mut agent = config.agents["agent"].clone();
        agent.tools = vec!["mcp:a".to_string(), "mcp:a__b".to_string()];
        let err = config
            .mcp_tools("agent", &agent)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("MCP server `a__b`") && err.contains("may not contain `__`"),
            "{err}"
        );
        // One server named twice is still one set of tools.
        agent.tools = vec!["mcp:a".to_string(), "mcp:a/y".to_string()];
        let (tools, _) = config.mcp_tools("agent", &agent).await.unwrap();
        assert_eq!(tools.names(), ["a__b__x", "a__y"]);
    }
}
