//! `[agents.NAME] approve`: which tool calls the agent runs on its own, which wait for a person
//! (`troupe chat` asks y/n/edit), which it never runs.
//!
//! ```toml
//! [agents.coder]
//! tools = ["shell", "read_file"]
//! approve = [
//!   { tool = "shell", argument = "command", prefix = "git status", policy = "allow" },
//!   { tool = "shell", argument = "command", prefix = "sudo ", policy = "deny" },
//!   { tool = "shell", policy = "ask" },
//!   { tool = "write_file", policy = "ask" },
//! ]
//! approve_timeout_secs = 300
//! ```
//!
//! A prefix is matched against the value read as a shell command line, command by command
//! (`true; sudo x`, `env sudo x` and `/usr/bin/sudo x` are all `sudo `): a `deny` or `ask` rule
//! holds when any command matches, an `allow` rule only when every one does, and what cannot be
//! read is never allowed by a prefix rule. It is not a sandbox: a command can run what its text
//! does not show (a script it writes, an interpreter). So for a shell, `ask` for the whole tool
//! and `allow` what you name, as above, rather than trusting a `deny` to hold
//! (`troupe_tools::approval` says exactly what a rule guarantees).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use troupe_tools::approval::{ApprovalPolicy, ApprovalRule, Permission};

use super::{AgentConfig, BUILTIN_TOOLS, MCP_TOOL_PREFIX};

/// One entry of `[agents.NAME] approve`; the first entry that matches a call decides, a call
/// none matches runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveRuleConfig {
    /// The tool's name, or `*` for every tool.
    pub tool: String,
    /// An argument of the call (with `prefix`): the rule matches calls whose value of it starts
    /// with `prefix`.
    pub argument: Option<String>,
    /// The prefix `argument`'s value must start with, read as a shell command line (see the
    /// module's docs).
    pub prefix: Option<String>,
    /// `allow`, `ask` or `deny`.
    pub policy: Permission,
}

/// The first problem with an agent's `approve` and `approve_timeout_secs`, as `(key, message)`.
pub(super) fn check(name: &str, agent: &AgentConfig) -> Result<(), (String, String)> {
    let has_mcp = agent.tools.iter().any(|t| t.starts_with(MCP_TOOL_PREFIX));
    for (i, rule) in agent.approve.iter().enumerate() {
        let key = format!("agents.{name}.approve[{i}]");
        let known = rule.tool == "*"
            || agent.tools.contains(&rule.tool)
            // An MCP server's tools are named by the server: known only once it runs.
            || (has_mcp && !BUILTIN_TOOLS.contains(&rule.tool.as_str()));
        if !known {
            return Err((
                format!("{key}.tool"),
                format!(
                    "the agent has no tool `{}` (its tools: {}; `*` matches every tool)",
                    rule.tool,
                    agent.tools.join(", ")
                ),
            ));
        }
        match (&rule.argument, &rule.prefix) {
            (Some(_), None) => {
                return Err((
                    format!("{key}.prefix"),
                    "`argument` needs a `prefix` its value must start with".to_string(),
                ));
            }
            (None, Some(_)) => {
                return Err((
                    format!("{key}.argument"),
                    "`prefix` needs the `argument` whose value it is checked against".to_string(),
                ));
            }
            (Some(argument), Some(prefix)) if argument.is_empty() || prefix.is_empty() => {
                return Err((key, "`argument` and `prefix` must not be empty".to_string()));
            }
            _ => {}
        }
    }
    if agent.approve_timeout_secs == Some(0) {
        return Err((
            format!("agents.{name}.approve_timeout_secs"),
            "must be at least 1 second".to_string(),
        ));
    }
    Ok(())
}

/// The policy an agent's (validated) configuration describes.
pub(super) fn policy(agent: &AgentConfig) -> ApprovalPolicy {
    let rules = agent
        .approve
        .iter()
        .map(|r| match (&r.argument, &r.prefix) {
            (Some(argument), Some(prefix)) => {
                ApprovalRule::argument_prefix(&r.tool, argument, prefix, r.policy)
            }
            _ => ApprovalRule::tool(&r.tool, r.policy),
        });
    let policy = ApprovalPolicy::new(rules);
    match agent.approve_timeout_secs {
        Some(secs) => policy.timeout(Duration::from_secs(secs)),
        None => policy,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::config::Config;

    fn parse(approve: &str) -> Result<Config, crate::config::ConfigError> {
        Config::parse(&format!(
            "[agents.coder]\ntools = [\"shell\"]\napprove = {approve}\n"
        ))
    }

    fn key_of(approve: &str) -> String {
        parse(approve)
            .unwrap_err()
            .key()
            .expect("names a key")
            .to_string()
    }

    #[test]
    fn a_rule_with_a_prefix_becomes_the_agents_policy() {
        let config = parse(
            r#"[{ tool = "shell", argument = "command", prefix = "rm ", policy = "ask" }]
approve_timeout_secs = 30"#,
        )
        .unwrap();
        let policy = super::policy(&config.agents["coder"]);
        use troupe_tools::approval::Permission;
        assert_eq!(
            policy.permission("shell", r#"{"command":"rm -r x"}"#),
            Permission::Ask
        );
        assert_eq!(
            policy.permission("shell", r#"{"command":"ls"}"#),
            Permission::Allow
        );
        assert_eq!(policy.timeout, std::time::Duration::from_secs(30));
    }

    #[test]
    fn broken_rules_name_their_key() {
        assert_eq!(
            key_of(r#"[{ tool = "shell", policy = "maybe" }]"#),
            "agents.coder.approve[0].policy"
        );
        assert_eq!(
            key_of(r#"[{ tool = "shel", policy = "ask" }]"#),
            "agents.coder.approve[0].tool"
        );
        assert_eq!(
            key_of(r#"[{ tool = "shell", argument = "command", policy = "ask" }]"#),
            "agents.coder.approve[0].prefix"
        );
        assert_eq!(
            key_of(r#"[{ tool = "shell", prefix = "rm", policy = "ask" }]"#),
            "agents.coder.approve[0].argument"
        );
        assert_eq!(
            key_of(r#"[{ tool = "shell", policy = "ask", when = "now" }]"#),
            "agents.coder.approve[0].when"
        );
        let zero = Config::parse("[agents.coder]\ntools = [\"shell\"]\napprove_timeout_secs = 0\n")
            .unwrap_err();
        assert_eq!(zero.key(), Some("agents.coder.approve_timeout_secs"));
    }
}
