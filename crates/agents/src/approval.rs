//! Which tool calls an agent runs on its own, which wait for a person, which it never runs: the
//! [`ApprovalPolicy`] on its [`AgentSpec`](crate::AgentSpec).
//!
//! Rules are tried in order and the first that matches decides; a call no rule matches is
//! allowed (an agent with no rules runs every call, as before approval existed). A rule names a
//! tool (or `*` for any) and, optionally, an argument of the call and a prefix its string value
//! must start with — `shell`'s `command` starting with `rm ` — so one tool can be allowed in
//! general and asked about in particular.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a call waits for a person's answer by default before it counts as denied: under
/// the team's default ask timeout (300 s), so the model hears "not approved" before the caller
/// of the paused request gives up on it.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(240);

/// What happens to a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Run it.
    Allow,
    /// Pause the turn until a person approves (possibly with edited arguments) or denies it.
    Ask,
    /// Never run it; the model is told so.
    Deny,
}

/// One rule: calls of `tool` (whose `argument`, when named, starts with `prefix`) get
/// `permission`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRule {
    /// The tool's name, or `*` for every tool.
    pub tool: String,
    /// An argument and the prefix its string value must start with (leading whitespace of the
    /// value is ignored, so ` rm -rf` is still `rm `); `None`: every call of the tool.
    pub argument_prefix: Option<(String, String)>,
    /// What calls that match get.
    pub permission: Permission,
}

impl ApprovalRule {
    /// Every call of `tool` gets `permission`.
    pub fn tool(tool: impl Into<String>, permission: Permission) -> Self {
        ApprovalRule {
            tool: tool.into(),
            argument_prefix: None,
            permission,
        }
    }

    /// Calls of `tool` whose `argument` starts with `prefix` get `permission`.
    pub fn argument_prefix(
        tool: impl Into<String>,
        argument: impl Into<String>,
        prefix: impl Into<String>,
        permission: Permission,
    ) -> Self {
        ApprovalRule {
            tool: tool.into(),
            argument_prefix: Some((argument.into(), prefix.into())),
            permission,
        }
    }

    fn matches(&self, tool: &str, arguments: &str) -> bool {
        if self.tool != "*" && self.tool != tool {
            return false;
        }
        let Some((argument, prefix)) = &self.argument_prefix else {
            return true;
        };
        // Arguments that are not JSON (the registry answers those with an error and runs
        // nothing) or lack the argument do not match a rule about its value.
        serde_json::from_str::<serde_json::Value>(arguments)
            .ok()
            .and_then(|v| v.get(argument).and_then(|a| a.as_str().map(str::to_string)))
            .is_some_and(|value| value.trim_start().starts_with(prefix.as_str()))
    }
}

/// The rules, and how long an asked call waits before it counts as denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// Tried in order; the first match decides; no match allows.
    pub rules: Vec<ApprovalRule>,
    /// How long an asked call waits for an answer; then the model is told it was not approved.
    pub timeout: Duration,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            rules: Vec::new(),
            timeout: DEFAULT_APPROVAL_TIMEOUT,
        }
    }
}

impl ApprovalPolicy {
    /// A policy of these rules with the default timeout.
    pub fn new(rules: impl IntoIterator<Item = ApprovalRule>) -> Self {
        ApprovalPolicy {
            rules: rules.into_iter().collect(),
            ..ApprovalPolicy::default()
        }
    }

    /// With this timeout for asked calls.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What a call of `tool` with `arguments` (JSON) gets.
    pub fn permission(&self, tool: &str, arguments: &str) -> Permission {
        self.rules
            .iter()
            .find(|r| r.matches(tool, arguments))
            .map_or(Permission::Allow, |r| r.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> ApprovalPolicy {
        ApprovalPolicy::new([
            ApprovalRule::argument_prefix("shell", "command", "rm ", Permission::Ask),
            ApprovalRule::argument_prefix("shell", "command", "sudo", Permission::Deny),
            ApprovalRule::tool("shell", Permission::Allow),
            ApprovalRule::tool("*", Permission::Ask),
        ])
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let p = policy();
        assert_eq!(
            p.permission("shell", r#"{"command":"rm -rf x"}"#),
            Permission::Ask
        );
        assert_eq!(
            p.permission("shell", r#"{"command":"  rm x"}"#),
            Permission::Ask
        );
        assert_eq!(
            p.permission("shell", r#"{"command":"sudo ls"}"#),
            Permission::Deny
        );
        assert_eq!(
            p.permission("shell", r#"{"command":"ls"}"#),
            Permission::Allow
        );
        assert_eq!(p.permission("write_file", "{}"), Permission::Ask);
    }

    #[test]
    fn no_rule_allows_and_bad_arguments_match_no_prefix_rule() {
        assert_eq!(
            ApprovalPolicy::default().permission("shell", "{}"),
            Permission::Allow
        );
        let p = ApprovalPolicy::new([ApprovalRule::argument_prefix(
            "shell",
            "command",
            "rm ",
            Permission::Deny,
        )]);
        assert_eq!(p.permission("shell", "not json"), Permission::Allow);
        assert_eq!(p.permission("shell", r#"{"command":3}"#), Permission::Allow);
    }
}
