//! Building the artifact ledger from tool calls and their results.

use std::collections::HashMap;

use serde_json::Value;
use troupe_runtime::{ChatMessage, Role};
use troupe_tools::FileAccess;

use super::ledger::ArtifactLedger;
use super::names::names_in_prose;
use super::scan::{error_lines, exit_code, one_line, symbol_definitions, test_outcome};
use crate::transcript::file_access_for_call;

/// Tool names that run a shell command (besides any name containing `bash` or `shell`).
const SHELL_TOOLS: [&str; 7] = [
    "exec",
    "execute_command",
    "run_command",
    "terminal",
    "run_terminal_cmd",
    "sh",
    "cmd",
];
/// Argument keys that hold a shell command.
const COMMAND_KEYS: [&str; 3] = ["command", "cmd", "script"];
/// Argument keys that hold text an edit or write puts into a file.
const WRITTEN_TEXT_KEYS: [&str; 9] = [
    "content",
    "newText",
    "new_text",
    "new_str",
    "new_string",
    "file_text",
    "text",
    "replace",
    "code",
];

/// Whether a tool of this name runs shell commands.
pub(super) fn is_shell_tool(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("bash") || name.contains("shell") || SHELL_TOOLS.contains(&name.as_str())
}

/// The command a shell tool call runs: a string argument, or an argv array joined by spaces.
fn shell_command(arguments: &Value) -> Option<String> {
    let value = COMMAND_KEYS.iter().find_map(|k| arguments.get(*k))?;
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        _ => return None,
    };
    let line = one_line(&text);
    (!line.is_empty()).then_some(line)
}

impl ArtifactLedger {
    /// The artifacts of `messages`' tool calls and results, in the order they happened.
    ///
    /// Statuses come only from tool-call arguments and tool results: a shell call's command and
    /// the exit code its result reports; error lines and test outcomes from every result except
    /// file reads (a file's source text is not an error seen); symbols from the text an edit or
    /// write put into a file. The agent's own prose gives only `named`: the backticked
    /// identifiers and file paths it wrote, quoted, with no claim attached. User prose is never
    /// looked at.
    pub fn from_messages<'a>(messages: impl IntoIterator<Item = &'a ChatMessage>) -> Self {
        let mut ledger = ArtifactLedger::default();
        // call id → (tool name, parsed arguments), filled as calls appear.
        let mut calls: HashMap<&str, (&str, Value)> = HashMap::new();
        for message in messages {
            for call in message.calls() {
                let arguments =
                    serde_json::from_str(&call.function.arguments).unwrap_or(Value::Null);
                ledger.record_call(&call.function.name, &arguments);
                calls.insert(call.id.as_str(), (call.function.name.as_str(), arguments));
            }
            if message.role == Role::Assistant {
                for name in names_in_prose(&message.text()) {
                    ledger.named.record(name, ());
                }
            }
            if message.role != Role::Tool {
                continue;
            }
            let Some((tool, arguments)) =
                message.tool_call_id.as_deref().and_then(|id| calls.get(id))
            else {
                continue;
            };
            ledger.record_result(tool, arguments, &message.text());
        }
        ledger
    }

    /// What a call's arguments say: the command it runs, the symbols it writes.
    fn record_call(&mut self, tool: &str, arguments: &Value) {
        if is_shell_tool(tool) {
            if let Some(command) = shell_command(arguments) {
                self.commands.record(command, None);
            }
            return;
        }
        let Some((path, access, _)) = file_access_for_call(tool, arguments) else {
            return;
        };
        if !access.is_modification() {
            return;
        }
        for key in WRITTEN_TEXT_KEYS {
            if let Some(text) = arguments.get(key).and_then(Value::as_str) {
                for symbol in symbol_definitions(text) {
                    self.symbols.record(symbol, Some(path.clone()));
                }
            }
        }
    }

    /// What a result says: the command's exit code, errors, test outcomes.
    fn record_result(&mut self, tool: &str, arguments: &Value, result: &str) {
        if let Some((_, FileAccess::Read, _)) = file_access_for_call(tool, arguments) {
            return;
        }
        if is_shell_tool(tool)
            && let Some(command) = shell_command(arguments)
        {
            self.commands.record(command, exit_code(result));
        }
        for error in error_lines(result) {
            self.errors.record(error, ());
        }
        for (name, status) in result.lines().filter_map(test_outcome) {
            self.tests.record(name, status);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::artifacts::TestStatus;
    use troupe_runtime::ToolCall;

    #[test]
    fn shell_calls_become_commands_with_their_exit_code() {
        let messages = [
            ChatMessage::assistant_tool_calls(
                None,
                vec![
                    ToolCall::new("a", "bash", r#"{"command":"npm run check"}"#),
                    ToolCall::new("b", "execute_bash", r#"{"command":"ls\n  -l"}"#),
                    ToolCall::new("c", "shell", r#"{"command":["cargo","test"]}"#),
                    ToolCall::new(
                        "d",
                        "str_replace_editor",
                        r#"{"command":"view","path":"a.py"}"#,
                    ),
                ],
            ),
            ChatMessage::tool_result("a", "boom\n\nCommand exited with code 2"),
            ChatMessage::tool_result("b", "x\n[The command completed with exit code 0.]"),
            ChatMessage::tool_result("c", "test a ... ok"),
            ChatMessage::tool_result("d", "TypeError: in a viewed file"),
        ];
        let ledger = ArtifactLedger::from_messages(&messages);
        let commands: Vec<_> = ledger
            .commands
            .oldest_first()
            .map(|(k, v)| (k, *v))
            .collect();
        assert_eq!(
            commands,
            [
                ("npm run check", Some(2)),
                ("ls -l", Some(0)),
                ("cargo test", None)
            ]
        );
        assert_eq!(ledger.tests.get("a"), Some(&TestStatus::Passed));
        assert!(ledger.errors.is_empty(), "a file read is not an error seen");
    }

    #[test]
    fn edits_and_writes_name_their_symbols_and_model_prose_is_ignored() {
        let messages = [
            ChatMessage::assistant_tool_calls(
                Some("I will add fn invented_by_model and see TypeError: fake".into()),
                vec![
                    ToolCall::new(
                        "e",
                        "edit",
                        r#"{"path":"src/a.rs","oldText":"fn old() {}","newText":"pub fn parse_header() {}"}"#,
                    ),
                    ToolCall::new(
                        "w",
                        "str_replace_editor",
                        r#"{"command":"create","path":"b.py","file_text":"class Loader:\n    def load(self):\n        pass"}"#,
                    ),
                ],
            ),
            ChatMessage::tool_result("e", "Edited."),
            ChatMessage::tool_result("w", "Created."),
            ChatMessage::assistant("test fake ... ok\nValueError: fake too"),
        ];
        let ledger = ArtifactLedger::from_messages(&messages);
        let symbols: Vec<_> = ledger
            .symbols
            .oldest_first()
            .map(|(k, v)| (k, v.as_deref()))
            .collect();
        assert_eq!(
            symbols,
            [
                ("fn parse_header", Some("src/a.rs")),
                ("class Loader", Some("b.py")),
                ("def load", Some("b.py")),
            ]
        );
        assert!(ledger.errors.is_empty() && ledger.tests.is_empty() && ledger.commands.is_empty());
    }

    #[test]
    fn errors_and_tests_come_from_results_and_the_newest_outcome_wins() {
        let messages = [
            ChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("a", "bash", r#"{"command":"pytest -v"}"#)],
            ),
            ChatMessage::tool_result(
                "a",
                "tests/t.py::test_a FAILED\nTraceback (most recent call last):\n  File \"x\"\nKeyError: 'id'\nExit code: 1",
            ),
            ChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("b", "bash", r#"{"command":"pytest -v"}"#)],
            ),
            ChatMessage::tool_result("b", "tests/t.py::test_a PASSED\nExit code: 0"),
        ];
        let ledger = ArtifactLedger::from_messages(&messages);
        assert_eq!(
            ledger.tests.get("tests/t.py::test_a"),
            Some(&TestStatus::Passed)
        );
        assert_eq!(ledger.commands.get("pytest -v"), Some(&Some(0)));
        assert_eq!(ledger.errors.get("KeyError: 'id'"), Some(&()));
    }
}
