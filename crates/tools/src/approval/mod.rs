//! Which tool calls an agent runs on its own, which wait for a person, which it never runs: the
//! [`ApprovalPolicy`] on its `AgentSpec` (troupe-agents).
//!
//! Approvals decide whether a call runs; the sandbox ([`crate::sandbox`]) decides what a command
//! it runs can touch. Both live here, so one crate says what a command may do.
//!
//! Rules are tried in order and the first that matches decides; a call no rule matches is
//! allowed (an agent with no rules runs every call, as before approval existed). A rule names a
//! tool (or `*` for any) and, optionally, an argument of the call and a prefix its value must
//! start with — `shell`'s `command` starting with `rm ` — so one tool can be allowed in general
//! and asked about in particular.
//!
//! # What a rule guarantees, and what it does not
//!
//! - The policy judges exactly the arguments the tool receives: both read the model's argument
//!   string with [`crate::read_arguments`] (a twice-encoded object is the object), and
//!   the turn runs the call with the arguments as read, which are also what a person is shown.
//! - A rule's prefix is matched against the value read as a shell command line
//!   (`command_line.rs`): every command of a `;`/`&&`/`||`/`|`/newline list, substitutions and
//!   `sh -c`/`eval` strings included, with quotes, backslashes, redirections and leading
//!   `NAME=value` removed, whitespace collapsed and the program by its base name (`/bin/rm` is
//!   `rm`); behind a wrapper (`env`, `sudo`, `nohup`, `xargs`, `timeout`, …) every later word
//!   may be the program. A `deny` or `ask` rule matches when **any** command matches (or the
//!   value as written does); an `allow` rule only when **every** command does.
//! - When the policy cannot read what would run — arguments that are not a JSON object, the
//!   named argument not a string, a program named by an expansion (`$P x`, `$(echo rm) x`) — a
//!   `deny` or `ask` rule on that argument matches and an `allow` rule does not: unreadable
//!   never falls through to "allow".
//! - It is not a sandbox. A command line can run a program the reading never sees: a script it
//!   writes and then runs, an alias or function, a program that deletes (`find -delete`,
//!   `git clean`), an interpreter (`python -c`). A `deny` rule on a shell is a guard against
//!   accidents; the boundary is the sandbox, which confines what any command can touch. For a
//!   person's say on each command as well, `ask` for the whole tool, or `allow` the commands
//!   you name and `ask` for the rest (the `allow`-every-command reading makes that list hold).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod command_line;

use command_line::CommandLine;

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

    /// Whether the rule applies to a call of `tool` with `arguments` (as
    /// [`crate::read_arguments`] read them; `None`: they could not be read).
    fn matches(&self, tool: &str, arguments: Option<&Map<String, Value>>) -> bool {
        if self.tool != "*" && self.tool != tool {
            return false;
        }
        let Some((argument, prefix)) = &self.argument_prefix else {
            return true;
        };
        // What the policy cannot read is never allowed on this rule's word, and is held by a
        // rule that denies or asks.
        let cautious = self.permission != Permission::Allow;
        let value = match arguments.map(|a| a.get(argument)) {
            None => return cautious,
            // A call without the argument is not about its value.
            Some(None) => return false,
            Some(Some(Value::String(value))) => value,
            Some(Some(_)) => return cautious,
        };
        let written = value.trim_start().starts_with(prefix.as_str());
        let line = CommandLine::read(value);
        if cautious {
            written || line.any_command_starts_with(prefix) || line.has_hidden_program()
        } else {
            written && line.every_command_starts_with(prefix) && !line.has_hidden_program()
        }
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

    /// What a call of `tool` with `arguments` (the model's argument string) gets.
    pub fn permission(&self, tool: &str, arguments: &str) -> Permission {
        let read = crate::read_arguments(arguments).ok();
        self.rules
            .iter()
            .find(|r| r.matches(tool, read.as_ref()))
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
    fn no_rule_allows() {
        assert_eq!(
            ApprovalPolicy::default().permission("shell", "{}"),
            Permission::Allow
        );
        assert_eq!(
            ApprovalPolicy::default().permission("shell", "not json"),
            Permission::Allow
        );
    }

    fn deny_rm() -> ApprovalPolicy {
        ApprovalPolicy::new([
            ApprovalRule::argument_prefix("shell", "command", "rm ", Permission::Deny),
            ApprovalRule::argument_prefix("shell", "command", "sudo ", Permission::Deny),
        ])
    }

    /// The policy reads the arguments as the registry does: an object encoded twice is the
    /// object the tool receives (this was allowed: the policy saw a string).
    #[test]
    fn twice_encoded_arguments_are_judged_as_the_tool_receives_them() {
        let once = serde_json::json!({"command": "rm victim.txt"}).to_string();
        let twice = serde_json::Value::String(once.clone()).to_string();
        let thrice = serde_json::Value::String(twice.clone()).to_string();
        let p = deny_rm();
        assert_eq!(p.permission("shell", &once), Permission::Deny);
        assert_eq!(p.permission("shell", &twice), Permission::Deny);
        // Not an object under any reading the registry has: unreadable, so not allowed.
        assert_eq!(p.permission("shell", &thrice), Permission::Deny);
    }

    #[test]
    fn what_the_policy_cannot_read_never_falls_through_to_allow() {
        let p = deny_rm();
        for arguments in [
            "not json",
            "[1]",
            "3",
            r#"{"command": 3}"#,
            r#"{"command": ["rm", "x"]}"#,
            r#"{"command": "$P x"}"#,
            r#"{"command": "$(printf rm) x"}"#,
        ] {
            assert_eq!(
                p.permission("shell", arguments),
                Permission::Deny,
                "{arguments}"
            );
        }
        // Another tool, and a call without the argument, are not this rule's business.
        assert_eq!(p.permission("read_file", "not json"), Permission::Allow);
        assert_eq!(p.permission("shell", "{}"), Permission::Allow);
        assert_eq!(
            p.permission("shell", r#"{"command": "ls -la"}"#),
            Permission::Allow
        );
    }

    /// The variants an outsider used to walk around `rm `/`sudo ` deny rules.
    #[test]
    fn whitespace_path_and_list_variants_of_a_denied_command_are_denied() {
        let p = deny_rm();
        for command in [
            "rm\t-rf x",
            "/bin/rm x",
            "env sudo ls",
            "true; rm x",
            "echo ok && rm -rf /",
            "\\rm x",
            "'rm' x",
            "sh -c 'rm x'",
        ] {
            let arguments = serde_json::json!({ "command": command }).to_string();
            assert_eq!(
                p.permission("shell", &arguments),
                Permission::Deny,
                "{command}"
            );
        }
    }

    /// An allow rule holds only when every command of the line is one it names.
    #[test]
    fn an_allow_rule_covers_a_line_only_when_every_command_is_allowed() {
        let p = ApprovalPolicy::new([
            ApprovalRule::argument_prefix("shell", "command", "ls", Permission::Allow),
            ApprovalRule::tool("shell", Permission::Ask),
        ]);
        let ask = |c: &str| p.permission("shell", &serde_json::json!({ "command": c }).to_string());
        assert_eq!(ask("ls -la"), Permission::Allow);
        assert_eq!(ask("ls; rm x"), Permission::Ask);
        assert_eq!(ask("ls $(rm x)"), Permission::Ask);
        assert_eq!(ask("$P"), Permission::Ask);
        assert_eq!(p.permission("shell", "not json"), Permission::Ask);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Commands no rule below names.
        const BENIGN: &[&str] = &[
            "ls -la",
            "cat a.txt",
            "echo hi",
            "git status",
            "true",
            "pwd",
        ];
        /// How a denied `rm x` may be written.
        const HIDDEN_RM: &[&str] = &[
            "rm x",
            "rm\t-f x",
            "/bin/rm x",
            "'rm' x",
            "\\rm x",
            "env rm x",
            "sudo -n rm x",
            "X=1 rm x",
            "$(rm x)",
            "sh -c 'rm x'",
        ];
        const SEPARATORS: &[&str] = &["; ", " && ", " || ", " | ", "\n", " & "];

        fn line(before: Vec<usize>, rm: Option<usize>, after: Vec<usize>, sep: usize) -> String {
            let mut commands: Vec<&str> = before.iter().map(|&i| BENIGN[i]).collect();
            commands.extend(rm.map(|i| HIDDEN_RM[i]));
            commands.extend(after.iter().map(|&i| BENIGN[i]));
            commands.join(SEPARATORS[sep])
        }

        proptest! {
            /// A denied command anywhere in a list of others, written any way, is denied; a
            /// list without it is not.
            #[test]
            fn a_denied_command_is_found_wherever_it_stands(
                before in prop::collection::vec(0..BENIGN.len(), 0..4),
                rm in prop::option::of(0..HIDDEN_RM.len()),
                after in prop::collection::vec(0..BENIGN.len(), 0..4),
                sep in 0..SEPARATORS.len(),
            ) {
                let command = line(before, rm, after, sep);
                let p = ApprovalPolicy::new([ApprovalRule::argument_prefix(
                    "shell", "command", "rm ", Permission::Deny,
                )]);
                let arguments = serde_json::json!({ "command": command }).to_string();
                let expected = if rm.is_some() { Permission::Deny } else { Permission::Allow };
                prop_assert_eq!(p.permission("shell", &arguments), expected, "{}", command);
            }

            /// An allow list holds a line only when every command of it is on the list.
            #[test]
            fn an_allow_list_never_covers_a_command_it_does_not_name(
                before in prop::collection::vec(0..BENIGN.len(), 0..4),
                rm in prop::option::of(0..HIDDEN_RM.len()),
                after in prop::collection::vec(0..BENIGN.len(), 0..4),
                sep in 0..SEPARATORS.len(),
            ) {
                let command = line(before, rm, after, sep);
                let allowed: Vec<ApprovalRule> = BENIGN
                    .iter()
                    .map(|b| ApprovalRule::argument_prefix("shell", "command", *b, Permission::Allow))
                    .chain([ApprovalRule::tool("shell", Permission::Ask)])
                    .collect();
                let p = ApprovalPolicy::new(allowed);
                let arguments = serde_json::json!({ "command": command }).to_string();
                if rm.is_some() {
                    prop_assert_eq!(p.permission("shell", &arguments), Permission::Ask, "{}", command);
                }
            }
        }
    }
}
