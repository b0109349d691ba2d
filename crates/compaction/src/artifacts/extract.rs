//! Building the artifact ledger from tool calls and their results.

use std::collections::HashMap;

use serde_json::Value;
use troupe_protocol::FileAccess;
use troupe_protocol::{ChatMessage, MessageKind, Role};

use super::containing::first_containing;
use super::ledger::{ArtifactLedger, Recent};
use super::names::names_in_prose;
use super::paths::{Where, heredoc_bodies, path_in, paths_in_command, paths_in_prose, record_path};
use super::scan::{
    declared_in_prose, error_lines, exit_code, one_line, symbol_definitions, test_outcomes,
};
use super::seen_names::seen_names;
use crate::mask::is_stub;
use crate::summary::parse_summary_message;
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

/// The command line a shell tool call runs, as written: a string argument, or an argv array
/// joined by spaces.
fn raw_command(arguments: &Value) -> Option<String> {
    let value = COMMAND_KEYS.iter().find_map(|k| arguments.get(*k))?;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

/// The command a shell tool call runs, on one line (the ledger's key).
fn shell_command(arguments: &Value) -> Option<String> {
    let line = one_line(&raw_command(arguments)?);
    (!line.is_empty()).then_some(line)
}

/// Whether an argument key holds a path (for tools that neither read nor write a file: those
/// are in the file lists already).
fn is_path_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "target",
        "source",
        "src",
        "dest",
        "destination",
        "cwd",
        "folder",
        "root",
        "paths",
        "files",
    ]
    .contains(&key.as_str())
        || ["path", "file", "filename", "file_name", "dir", "directory"]
            .iter()
            .any(|end| key.ends_with(end))
}

/// The string values of a JSON value: itself, or the strings of an array.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether an assistant message without tool calls ends with a command for a plain-text agent
/// (SWE-agent's style: a thought, then one fenced block whose first line is the command); the
/// block's first line and the rest (an edit's body).
fn plain_text_command(text: &str) -> Option<(&str, Vec<&str>)> {
    let trimmed = text.trim_end();
    let body = trimmed.strip_suffix("```")?;
    let open = body.rfind("```")?;
    let block = &body[open + 3..];
    let (tag, inner) = block.split_once('\n')?;
    if !matches!(tag.trim(), "" | "bash" | "sh" | "shell" | "console") {
        return None;
    }
    let mut lines = inner.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next()?.trim();
    Some((first, lines.collect()))
}

/// The ledger troupe wrote into a replacement: a summary's blocks after its body, a stub's or a
/// shortened message's blocks after what it kept (see `hidden.rs`). `None` for any other
/// message: a block in text troupe did not write is not read.
fn written_by_troupe(message: &ChatMessage, text: &str) -> Option<ArtifactLedger> {
    if let Some(summary) = parse_summary_message(text) {
        return Some(summary.artifacts);
    }
    let replacement = matches!(
        message.kind,
        MessageKind::CompressedStub | MessageKind::Summary
    ) || (message.role == Role::Tool && is_stub(text));
    replacement.then(|| ArtifactLedger::parse(text))
}

/// Record every name in `names` not already named by a line of `covered`.
fn record_seen<'a, V: Clone>(
    seen: &mut Recent<()>,
    names: impl IntoIterator<Item = &'a str>,
    covered: &[&Recent<V>],
) {
    let names: Vec<&str> = names.into_iter().collect();
    let listed = first_containing(
        &names,
        covered
            .iter()
            .flat_map(|items| items.oldest_first().map(|(k, _)| k)),
    );
    for (name, listed) in names.into_iter().zip(listed) {
        if listed.is_none() {
            seen.record(name, ());
        }
    }
}

/// [`ArtifactLedger::from_messages`] part way: the ledger so far and what the next messages
/// are read with. Cloned, it reads two continuations of one start without reading that start
/// twice (a tool result and the stub replacing it, each after the call they answer).
#[derive(Debug, Clone, Default)]
pub(crate) struct Reading<'a> {
    /// The ledger of the messages read so far.
    pub(crate) ledger: ArtifactLedger,
    /// Call id → (tool name, parsed arguments), filled as calls appear.
    calls: HashMap<&'a str, (&'a str, Value)>,
    /// A plain-text agent's last command, whose output is the next user message.
    plain_command: Option<String>,
}

impl<'a> Reading<'a> {
    /// Read `messages`, in order, after those read so far.
    pub(crate) fn read_all(&mut self, messages: impl IntoIterator<Item = &'a ChatMessage>) {
        for message in messages {
            self.read(message);
        }
    }

    /// Read `message` after those read so far.
    fn read(&mut self, message: &'a ChatMessage) {
        let ledger = &mut self.ledger;
        for call in message.calls() {
            let arguments = serde_json::from_str(&call.function.arguments).unwrap_or(Value::Null);
            ledger.record_call(&call.function.name, &arguments);
            self.calls
                .insert(call.id.as_str(), (call.function.name.as_str(), arguments));
        }
        let text = message.text_cow();
        // An earlier compaction's stub or summary: its originals are in that compaction's
        // archive, and the blocks troupe wrote into it are what still names them.
        if let Some(written) = written_by_troupe(message, &text) {
            ledger.merge(&written);
        }
        if message.role == Role::Assistant {
            ledger.record_prose(&text);
            self.plain_command = None;
            if message.calls().is_empty()
                && let Some((command, body)) = plain_text_command(&text)
            {
                ledger.record_command_text(command);
                for line in body {
                    for symbol in symbol_definitions(line) {
                        ledger.symbols.record(symbol, None);
                    }
                }
                self.plain_command = Some(one_line(command));
            }
        }
        if message.role == Role::User {
            // Names only, no claim: a user message may be a plain-text agent's tool output.
            if let Some(command) = self.plain_command.take() {
                ledger.record_output(&command, &text);
            }
            ledger.record_seen(&text);
            return;
        }
        if message.role != Role::Tool {
            return;
        }
        let Some((tool, arguments)) = message
            .tool_call_id
            .as_deref()
            .and_then(|id| self.calls.get(id))
        else {
            return;
        };
        ledger.record_result(tool, arguments, &text);
    }
}

impl ArtifactLedger {
    /// The artifacts of `messages`' tool calls and results, in the order they happened.
    ///
    /// Statuses come only from tool-call arguments and tool results: a shell call's command and
    /// the exit code its result reports; error lines and test outcomes from every result except
    /// file reads (a file's source text is not an error seen); symbols from the text an edit or
    /// write put into a file. The agent's own prose gives only `named`: the backticked
    /// identifiers and file paths it wrote, quoted, with no claim attached. User prose is never
    /// looked at. An earlier compaction's stub or summary gives the ledger troupe wrote into it
    /// (what it hid), at its place in the order.
    pub fn from_messages<'a>(messages: impl IntoIterator<Item = &'a ChatMessage>) -> Self {
        let mut reading = Reading::default();
        reading.read_all(messages);
        reading.ledger
    }

    /// What the agent's own text names: backticked identifiers, paths (backticked or not, file
    /// trees included), symbols it declares.
    fn record_prose(&mut self, text: &str) {
        for name in names_in_prose(text) {
            self.named.record(name, ());
        }
        for path in paths_in_prose(text) {
            record_path(&mut self.paths, &path);
        }
        // Declared in prose or a code block of a message, not in a file: a name, not a symbol
        // written (the `<symbols>` block is for what edits and writes did).
        let mut symbols = symbol_definitions(text);
        symbols.extend(declared_in_prose(text));
        for symbol in symbols {
            let name = symbol.rsplit(' ').next().unwrap_or(&symbol);
            if !self.symbols.oldest_first().any(|(k, _)| k == symbol) {
                self.named.record(name, ());
            }
        }
        self.record_seen(text);
    }

    /// A shell command line: the command, the paths among its arguments, the symbols its
    /// heredocs or scripts declare, the tests it names.
    fn record_command_text(&mut self, command: &str) {
        let line = one_line(command);
        if line.is_empty() {
            return;
        }
        self.commands.record(line, None);
        for path in paths_in_command(command) {
            record_path(&mut self.paths, &path);
        }
        let mut symbols = Vec::new();
        for body in heredoc_bodies(command) {
            symbols.extend(symbol_definitions(body));
        }
        symbols.extend(declared_in_prose(command));
        for symbol in symbols {
            self.symbols.record(symbol, None);
        }
        self.record_seen(command);
    }

    /// Error types and test names in `text` that no listed item names yet.
    fn record_seen(&mut self, text: &str) {
        let names = seen_names(text);
        record_seen(
            &mut self.seen,
            names.iter().copied(),
            &[&self.errors, &self.named],
        );
        let in_tests = first_containing(&names, self.tests.oldest_first().map(|(k, _)| k));
        let tests: Vec<&str> = names
            .into_iter()
            .zip(in_tests)
            .filter_map(|(n, listed)| listed.map(|_| n))
            .collect();
        self.seen.retain(|k| !tests.contains(&k));
    }

    /// What a call's arguments say: the command it runs (and the paths, symbols and tests in
    /// it), the symbols it writes, the paths it names.
    fn record_call(&mut self, tool: &str, arguments: &Value) {
        if is_shell_tool(tool) {
            if let Some(command) = raw_command(arguments) {
                self.record_command_text(&command);
            }
            return;
        }
        let file = file_access_for_call(tool, arguments);
        let Some(args) = arguments.as_object() else {
            return;
        };
        for (key, value) in args {
            // A reading or writing tool's own path is in the file lists already.
            if file.is_none() && is_path_key(key) {
                for text in strings(value) {
                    if let Some(path) = path_in(text, Where::Argument) {
                        record_path(&mut self.paths, &path);
                    }
                }
            }
        }
        let path = file.as_ref().map(|(path, _, _)| path.clone());
        let writes = file
            .as_ref()
            .is_none_or(|(_, access, _)| access.is_modification());
        if !writes {
            return;
        }
        for key in WRITTEN_TEXT_KEYS {
            if let Some(text) = arguments.get(key).and_then(Value::as_str) {
                for symbol in symbol_definitions(text) {
                    self.symbols.record(symbol, path.clone());
                }
            }
        }
    }

    /// What a shell command's output says: its errors and test outcomes.
    fn record_output(&mut self, command: &str, output: &str) {
        self.commands.record(command, exit_code(output));
        for error in error_lines(output) {
            self.errors.record(error, ());
        }
        for (name, status) in test_outcomes(output) {
            self.tests.record(name, status);
        }
    }

    /// What a result says: the command's exit code, errors, test outcomes; for every result,
    /// files read included, the error types and test names it shows.
    fn record_result(&mut self, tool: &str, arguments: &Value, result: &str) {
        if let Some((_, FileAccess::Read, _)) = file_access_for_call(tool, arguments) {
            self.record_seen(result);
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
        for (name, status) in test_outcomes(result) {
            self.tests.record(name, status);
        }
        self.record_seen(result);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::artifacts::TestStatus;
    use troupe_protocol::ToolCall;

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
