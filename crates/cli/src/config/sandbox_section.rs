//! `[sandbox]` and `[agents.NAME] sandbox`: what the commands a model runs may touch
//! (`troupe_tools::sandbox`), for the `shell` tool and the MCP servers marked `sandbox = true`.
//!
//! ```toml
//! [sandbox]
//! policy = "workspace-write"   # read-only | workspace-write (default) | full (no sandbox)
//! network = false              # default: no socket but connected pairs
//! reads = "anywhere"           # or "limited": the system's directories, the workspace and
//!                              # `readable` only (keeps ~/.ssh and the user's keys out of reach)
//! readable = ["~/.cargo"]      # more directories a limited sandbox reads
//! writable = ["~/.cache/pip"]  # more directories workspace-write writes
//! read_only = ["notes/"]       # more paths kept read-only beneath the writable roots
//!
//! [agents.reviewer]
//! sandbox = { policy = "read-only" }   # the keys an agent sets override [sandbox]'s
//! ```
//!
//! Only this file (or a program's own `ShellConfig`) chooses `full`: the model cannot, and
//! the file is kept read-only for the commands when it lies in the workspace.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use troupe_tools::sandbox::{Reads, Sandbox, SandboxPolicy};

use super::Config;

/// `[sandbox]`, or an agent's `sandbox = { … }`: each key unset takes the level above's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// `read-only`, `workspace-write` or `full`.
    pub policy: Option<SandboxPolicy>,
    /// Whether commands may use the network.
    pub network: Option<bool>,
    /// `anywhere` or `limited`.
    pub reads: Option<ReadsConfig>,
    /// Directories a `limited` sandbox reads besides the system's and the workspace
    /// (`~/` is the home directory).
    pub readable: Option<Vec<PathBuf>>,
    /// Directories `workspace-write` writes besides the workspace and its `TMPDIR`.
    pub writable: Option<Vec<PathBuf>>,
    /// Paths kept read-only beneath the writable roots besides `.git` and troupe's own files.
    pub read_only: Option<Vec<PathBuf>>,
}

/// `reads = "anywhere" | "limited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadsConfig {
    /// Anywhere the user may.
    Anywhere,
    /// The system's directories, the workspace and `readable` only.
    Limited,
}

impl SandboxSection {
    /// This section's keys over `below`'s.
    fn over(&self, below: &SandboxSection) -> SandboxSection {
        SandboxSection {
            policy: self.policy.or(below.policy),
            network: self.network.or(below.network),
            reads: self.reads.or(below.reads),
            readable: self.readable.clone().or_else(|| below.readable.clone()),
            writable: self.writable.clone().or_else(|| below.writable.clone()),
            read_only: self.read_only.clone().or_else(|| below.read_only.clone()),
        }
    }

    /// The sandbox it describes, unset keys at the library's defaults.
    fn sandbox(&self) -> Sandbox {
        let paths = |list: &Option<Vec<PathBuf>>| {
            list.iter()
                .flatten()
                .map(|p| home_expanded(p))
                .collect::<Vec<_>>()
        };
        let defaults = Sandbox::default();
        Sandbox {
            policy: self.policy.unwrap_or(defaults.policy),
            network: self.network.unwrap_or(defaults.network),
            reads: match self.reads {
                Some(ReadsConfig::Limited) => Reads::Limited(paths(&self.readable)),
                Some(ReadsConfig::Anywhere) | None => Reads::Anywhere,
            },
            writable: paths(&self.writable),
            read_only: paths(&self.read_only),
        }
    }

    /// The first problem, keyed under `table` (`sandbox` or `agents.NAME.sandbox`).
    pub(super) fn validate(
        &self,
        table: &str,
        below: &SandboxSection,
    ) -> Result<(), (String, String)> {
        let merged = self.over(below);
        if merged.readable.as_ref().is_some_and(|r| !r.is_empty())
            && merged.reads != Some(ReadsConfig::Limited)
        {
            return Err((
                format!("{table}.readable"),
                "only with reads = \"limited\" (reads are not limited otherwise)".into(),
            ));
        }
        if merged.writable.as_ref().is_some_and(|w| !w.is_empty())
            && merged
                .policy
                .is_some_and(|p| p != SandboxPolicy::WorkspaceWrite)
        {
            return Err((
                format!("{table}.writable"),
                "only with policy = \"workspace-write\"".into(),
            ));
        }
        Ok(())
    }
}

/// `~/x` as the home directory's `x`; any other path as written.
fn home_expanded(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::home_dir()) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

impl Config {
    /// The sandbox of agent `name`'s commands: its `sandbox` keys over `[sandbox]`'s, over the
    /// library's defaults (`workspace-write`, network off, reads anywhere).
    pub fn sandbox_for(&self, name: &str) -> Sandbox {
        let agent = self
            .agents
            .get(name)
            .and_then(|a| a.sandbox.clone())
            .unwrap_or_default();
        agent.over(&self.sandbox).sandbox()
    }

    /// The sandbox agent `name`'s commands run under, when it runs any: the `shell` tool, or an
    /// MCP server marked `sandbox = true` (what `troupe chat` shows).
    pub fn command_sandbox(&self, name: &str) -> Option<Sandbox> {
        let agent = self.agents.get(name)?;
        let sandboxed_server = |entry: &String| {
            super::McpToolRef::parse(entry)
                .and_then(|r| self.mcp.servers.get(r.server))
                .is_some_and(|s| s.sandbox)
        };
        agent
            .tools
            .iter()
            .any(|t| t == "shell" || sandboxed_server(t))
            .then(|| self.sandbox_for(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_workspace_write_with_the_network_off_and_an_agent_overrides_its_keys() {
        let config = Config::parse(
            "[sandbox]\nnetwork = true\n\n[agents.a]\n\n[agents.b]\nsandbox = { policy = \"read-only\" }\n",
        )
        .unwrap();
        assert_eq!(
            Config::parse("").unwrap().sandbox_for("x"),
            Sandbox::default()
        );
        let a = config.sandbox_for("a");
        assert_eq!((a.policy, a.network), (SandboxPolicy::WorkspaceWrite, true));
        let b = config.sandbox_for("b");
        assert_eq!((b.policy, b.network), (SandboxPolicy::ReadOnly, true));
        let limited = Config::parse("[sandbox]\nreads = \"limited\"\nreadable = [\"~/.cargo\"]\n")
            .unwrap()
            .sandbox_for("x");
        match limited.reads {
            Reads::Limited(paths) => {
                assert!(paths[0].ends_with(".cargo") && !paths[0].starts_with("~"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_sandbox_keys_are_named() {
        for (toml, key, says) in [
            (
                "[sandbox]\npolicy = \"off\"\n",
                "sandbox.policy",
                "unknown variant `off`",
            ),
            (
                "[sandbox]\nreadable = [\"/x\"]\n",
                "sandbox.readable",
                "reads = \"limited\"",
            ),
            (
                "[sandbox]\npolicy = \"read-only\"\nwritable = [\"/x\"]\n",
                "sandbox.writable",
                "workspace-write",
            ),
            (
                "[agents.a]\nsandbox = { writable = [\"/x\"], policy = \"full\" }\n",
                "agents.a.sandbox.writable",
                "workspace-write",
            ),
            ("[sandbox]\nnetwrok = true\n", "sandbox", "netwrok"),
        ] {
            let e = Config::parse(toml).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(says), "{toml}: {e}");
        }
    }
}
