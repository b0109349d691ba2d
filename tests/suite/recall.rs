//! Artifact recall: the independent extractor and the recall count, on small hand-built
//! transcripts.

use troupe::protocol::{ChatMessage, ToolCall};
use troupe_cli::transcript_ops::{ArtifactCategory, artifact_recall, extract_artifacts, haystack};

fn call(id: &str, name: &str, args: serde_json::Value) -> ChatMessage {
    ChatMessage::assistant_tool_calls(None, vec![ToolCall::new(id, name, args.to_string())])
}

fn keys(messages: &[ChatMessage], category: ArtifactCategory) -> Vec<String> {
    extract_artifacts(messages)
        .get(category)
        .map(str::to_string)
        .collect()
}

/// A short coding session: a shell tool, an editor tool, test output with errors.
fn session() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a coding agent."),
        ChatMessage::user("Fix the header parser."),
        call(
            "c1",
            "execute_bash",
            serde_json::json!({"command": "cd /repo && python -m pytest tests/test_parser.py -x\necho done"}),
        ),
        ChatMessage::tool_result(
            "c1",
            "tests/test_parser.py::TestHeader::test_empty_header FAILED\n\
             E   ValueError: empty header\n\
             raise HeaderParseException(line)\n\
             test parser::tests::round_trip ... ok",
        ),
        call(
            "c2",
            "str_replace_editor",
            serde_json::json!({
                "command": "str_replace",
                "path": "/repo/src/parser.py",
                "old_str": "x = 1",
                "new_str": "def parse_header(line):\n    return line\n\nclass HeaderReader:\n    pass",
            }),
        ),
        ChatMessage::tool_result("c2", "The file /repo/src/parser.py has been edited."),
        ChatMessage::assistant(
            "The bug is in `parse_header` (see docs/notes.md and https://example.com/a/b.html); \
             `Dataset.pixel_array` and `setup.py` too.",
        ),
    ]
}

#[test]
fn shell_commands_are_keyed_by_their_first_line_and_editor_commands_are_not_commands() {
    let commands = keys(&session(), ArtifactCategory::Command);
    assert_eq!(
        commands,
        vec!["cd /repo && python -m pytest tests/test_parser.py -x".to_string()]
    );
}

#[test]
fn long_commands_are_cut_to_the_key_length() {
    let long = format!("echo {}", "x".repeat(200));
    let messages = vec![call("c", "bash", serde_json::json!({"command": long}))];
    let commands = keys(&messages, ArtifactCategory::Command);
    assert_eq!(commands.len(), 1);
    assert_eq!(
        commands[0].chars().count(),
        troupe_cli::transcript_ops::COMMAND_KEY_CHARS
    );
}

#[test]
fn error_types_come_from_tool_output() {
    let mut messages = session();
    // The agent's own prose is not tool output.
    messages.push(ChatMessage::assistant(
        "Maybe a KeyError? error[E0308] too.",
    ));
    messages.push(ChatMessage::tool_result("c3", "error[E0599]: no method"));
    // A field called `isError` is not an error type; a TypeScript diagnostic code is.
    messages.push(ChatMessage::tool_result(
        "c4",
        "{\"isError\": false}\nsrc/a.ts(3,1): error TS2307: Cannot find module",
    ));
    assert_eq!(
        keys(&messages, ArtifactCategory::Error),
        vec![
            "HeaderParseException",
            "ValueError",
            "error TS2307",
            "error[E0599]"
        ]
    );
}

#[test]
fn tests_are_named_by_their_function_from_pytest_and_cargo_output() {
    assert_eq!(
        keys(&session(), ArtifactCategory::Test),
        vec!["round_trip", "test_empty_header"]
    );
}

#[test]
fn paths_come_from_tool_arguments_commands_and_the_agents_text_but_not_urls() {
    // A lone `/repo` (from `cd /repo`) is too vague to count: a path has a folder and a name.
    assert_eq!(
        keys(&session(), ArtifactCategory::Path),
        vec![
            "/repo/src/parser.py",
            "docs/notes.md",
            "setup.py",
            "tests/test_parser.py",
        ]
    );
}

#[test]
fn symbols_are_backticked_identifiers_and_definitions_in_edits() {
    let mut messages = session();
    // Plain lowercase words in backticks are values (`red`, `auto`), not symbols; a call is.
    messages.push(ChatMessage::assistant(
        "Set it to `red` or `auto`, then call `render()` on `mdHeading`.",
    ));
    assert_eq!(
        keys(&messages, ArtifactCategory::Symbol),
        vec![
            "Dataset.pixel_array",
            "HeaderReader",
            "mdHeading",
            "parse_header",
            "render"
        ]
    );
}

#[test]
fn an_agent_without_tool_calls_runs_fenced_commands_and_reads_user_messages_as_output() {
    let messages = vec![
        ChatMessage::user("Fix the bug. A RuntimeError in the task text is not output."),
        ChatMessage::assistant("Let me look.\n\n```\nopen src/reader.py\n```"),
        ChatMessage::user("[File: src/reader.py]\nTypeError: bad operand"),
    ];
    assert_eq!(
        keys(&messages, ArtifactCategory::Command),
        vec!["open src/reader.py"]
    );
    assert_eq!(keys(&messages, ArtifactCategory::Error), vec!["TypeError"]);
}

#[test]
fn recall_counts_what_the_compacted_conversation_still_names_per_category() {
    let original = session();
    let protected = vec![original[0].clone(), original[1].clone()];
    // A compaction that kept a summary naming some of it.
    let compacted = vec![
        original[0].clone(),
        original[1].clone(),
        ChatMessage::user(
            "Summary: ran `cd /repo && python -m pytest tests/test_parser.py -x`; \
             ValueError in test_empty_header; edited /repo/src/parser.py (parse_header).",
        ),
    ];
    let report = artifact_recall(&original, &protected, &compacted);
    let errors = report.category(ArtifactCategory::Error).unwrap();
    assert_eq!((errors.kept, errors.total), (1, 2));
    assert_eq!(errors.missing, vec!["HeaderParseException"]);
    let commands = report.category(ArtifactCategory::Command).unwrap();
    assert_eq!((commands.kept, commands.total), (1, 1));
    let symbols = report.category(ArtifactCategory::Symbol).unwrap();
    assert_eq!((symbols.kept, symbols.total), (1, 3));
    assert_eq!(symbols.percent().map(f64::round), Some(33.0));
    let overall = report.overall();
    assert!(overall.kept < overall.total);
}

#[test]
fn artifacts_the_protected_messages_name_are_not_counted() {
    let original = session();
    // The task already names the parser file and the error.
    let task = ChatMessage::user("Fix /repo/src/parser.py: it raises ValueError.");
    let task = std::slice::from_ref(&task);
    let report = artifact_recall(&original, task, task);
    let paths = report.category(ArtifactCategory::Path).unwrap();
    // `/repo/src/parser.py` is named by the task; three paths are left.
    assert_eq!(paths.named_by_protected, 1);
    assert_eq!(paths.total, 3);
    assert_eq!(paths.kept, 0);
    let errors = report.category(ArtifactCategory::Error).unwrap();
    assert_eq!((errors.named_by_protected, errors.total), (1, 1));
}

#[test]
fn a_tool_call_kept_verbatim_names_its_command_despite_json_quoting() {
    let original = vec![call(
        "c",
        "bash",
        serde_json::json!({"command": "grep -rn \"fn  main\" src"}),
    )];
    let report = artifact_recall(&original, &[], &original);
    let commands = report.category(ArtifactCategory::Command).unwrap();
    assert_eq!((commands.kept, commands.total), (1, 1));
    assert!(haystack(&original).contains("grep -rn \"fn main\" src"));
}

#[test]
fn an_uncompacted_conversation_has_full_recall_and_an_empty_one_none() {
    let original = session();
    let full = artifact_recall(&original, &[], &original).overall();
    assert!(full.total > 10);
    assert_eq!(full.kept, full.total);
    let empty = artifact_recall(&original, &[], &[]).overall();
    assert_eq!(empty.kept, 0);
    assert_eq!(empty.total, full.total);
}
