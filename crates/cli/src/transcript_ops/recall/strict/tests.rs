//! The strict extractor on small hand-written transcripts: each artifact kind, the bodies it
//! leaves out, and what "at risk" and "kept" mean.

use troupe_protocol::{ChatMessage, ToolCall};

use super::super::ArtifactCategory;
use super::{extract_strict_artifacts, strict_artifact_recall};

fn call(id: &str, name: &str, args: serde_json::Value) -> ChatMessage {
    ChatMessage::assistant_tool_calls(None, vec![ToolCall::new(id, name, args.to_string())])
}

fn keys(messages: &[ChatMessage], category: ArtifactCategory) -> Vec<String> {
    extract_strict_artifacts(messages)
        .get(category)
        .map(str::to_string)
        .collect()
}

#[test]
fn paths_come_from_every_shell_argument_relative_and_partial_ones_included() {
    let messages = vec![
        call(
            "c1",
            "execute_bash",
            serde_json::json!({"command": "cd /workspace/repo && ls packages/core && cat core/session.ts | grep -n Session src/agent.ts; sed -n 1,40p README.md; cp a.py b/c.py; mv old/x.rs new/x.rs 2>/dev/null; python --config=conf/dev.toml"}),
        ),
        ChatMessage::tool_result("c1", "ok"),
    ];
    assert_eq!(
        keys(&messages, ArtifactCategory::Path),
        [
            "/dev/null",
            "/workspace/repo",
            "README.md",
            "a.py",
            "b/c.py",
            "conf/dev.toml",
            "core/session.ts",
            "new/x.rs",
            "old/x.rs",
            "packages/core",
            "src/agent.ts",
        ]
    );
}

#[test]
fn paths_in_prose_need_no_backticks_and_file_trees_in_fences_count() {
    let messages = vec![
        call("c0", "bash", serde_json::json!({"command": "true"})),
        ChatMessage::tool_result("c0", ""),
        ChatMessage::assistant(
            "The session lives in core/session.ts (see `docs/notes.md`, ./src/main.rs:12 and \
             /etc/app/config). Not paths: and/or, 1/2, https://example.com/a/b.html, e.g.\n\
             ```\n\
             packages/\n\
             ├── tui/\n\
             │   └── renderer.ts\n\
             └── setup.py\n\
             ```",
        ),
    ];
    assert_eq!(
        keys(&messages, ArtifactCategory::Path),
        [
            "/etc/app/config",
            "core/session.ts",
            "docs/notes.md",
            "renderer.ts",
            "setup.py",
            "src/main.rs",
        ]
    );
}

#[test]
fn path_arguments_of_other_tools_count_and_written_bodies_do_not() {
    let messages = vec![
        ChatMessage::assistant_tool_calls(
            None,
            vec![
                ToolCall::new(
                    "e",
                    "str_replace_editor",
                    serde_json::json!({
                        "command": "str_replace",
                        "path": "/repo/src/schema.py",
                        "old_str": "import body/old_only.py",
                        "new_str": "see body/new_only.py",
                    })
                    .to_string(),
                ),
                ToolCall::new(
                    "f",
                    "find_file",
                    serde_json::json!({"file_name": "fields", "dir": "src/marshmallow"})
                        .to_string(),
                ),
                ToolCall::new(
                    "w",
                    "write",
                    serde_json::json!({"path": "notes.txt", "content": "in/the_body.rs"})
                        .to_string(),
                ),
                ToolCall::new(
                    "h",
                    "bash",
                    serde_json::json!({"command": "cat > gen/out.py << 'EOF'\nimport heredoc/body.py\nEOF\npython gen/out.py"})
                        .to_string(),
                ),
            ],
        ),
        ChatMessage::tool_result("e", "edited"),
        ChatMessage::tool_result("f", "found"),
        ChatMessage::tool_result("w", "written"),
        ChatMessage::tool_result("h", "ran"),
    ];
    assert_eq!(
        keys(&messages, ArtifactCategory::Path),
        [
            "/repo/src/schema.py",
            "fields",
            "gen/out.py",
            "notes.txt",
            "src/marshmallow"
        ]
    );
}

#[test]
fn errors_tests_symbols_and_commands() {
    let messages = vec![
        ChatMessage::user("It fails with KeyError in test_load_header."),
        call(
            "c1",
            "bash",
            serde_json::json!({"command": "python -m pytest tests/test_parser.py -x"}),
        ),
        ChatMessage::tool_result(
            "c1",
            "tests/test_parser.py::TestHeader::test_empty FAILED\nE   ValueError: empty\n\
             raise HeaderParseException(line)\n{\"isError\": false} Error: plain",
        ),
        call(
            "c2",
            "edit",
            serde_json::json!({"path": "src/parser.py", "newText": "def parse_header(line):\n    pass\nclass HeaderReader:\n    pass"}),
        ),
        ChatMessage::tool_result("c2", "ok"),
        ChatMessage::assistant("I added fn render_row and struct Row; a function is a value."),
        call(
            "c3",
            "bash",
            serde_json::json!({"command": "  git   status  "}),
        ),
        ChatMessage::tool_result("c3", "clean"),
    ];
    assert_eq!(
        keys(&messages, ArtifactCategory::Error),
        ["HeaderParseException", "KeyError", "ValueError"]
    );
    assert_eq!(
        keys(&messages, ArtifactCategory::Test),
        ["test_empty", "test_load_header", "test_parser",]
    );
    // As written: `function is` declares `is`, noise the definition accepts.
    assert_eq!(
        keys(&messages, ArtifactCategory::Symbol),
        ["HeaderReader", "Row", "is", "parse_header", "render_row"]
    );
    assert_eq!(
        keys(&messages, ArtifactCategory::Command),
        ["git status", "python -m"]
    );
}

#[test]
fn a_plain_text_agent_runs_the_first_line_of_each_fence_and_writes_the_rest() {
    let messages = vec![
        ChatMessage::system("You are an agent."),
        ChatMessage::user("Fix it."),
        ChatMessage::assistant(
            "Let me open pydicom/dataset.py first.\n```\nopen pydicom/pixel_data_handlers/numpy_handler.py 40\n```",
        ),
        ChatMessage::user("[File: numpy_handler.py]"),
        ChatMessage::assistant(
            "Now edit it.\n```\nedit 1:1\nimport written/only.py\ndef patched():\n```",
        ),
    ];
    assert_eq!(
        keys(&messages, ArtifactCategory::Path),
        [
            "pydicom/dataset.py",
            "pydicom/pixel_data_handlers/numpy_handler.py"
        ]
    );
    assert_eq!(
        keys(&messages, ArtifactCategory::Command),
        [
            "edit 1:1",
            "open pydicom/pixel_data_handlers/numpy_handler.py"
        ]
    );
    assert_eq!(keys(&messages, ArtifactCategory::Symbol), ["patched"]);
}

#[test]
fn at_risk_excludes_what_protected_messages_name_and_kept_is_a_substring_anywhere() {
    let original = vec![
        ChatMessage::user("Fix src/a.py."),
        call(
            "c1",
            "bash",
            serde_json::json!({"command": "cat src/c.py src/d.py"}),
        ),
        ChatMessage::tool_result("c1", "..."),
        ChatMessage::assistant("Done with src/a.py, src/b.py, src/c.py and src/d.py."),
    ];
    // The protected messages name src/a.py: it survives whatever compaction does.
    let protected = vec![original[0].clone()];
    // The compacted transcript names src/b.py inside a longer path, and src/c.py only as a
    // tool-call argument; src/d.py is gone.
    let compacted = vec![
        original[0].clone(),
        ChatMessage::assistant("<summary>\nlisted /repo/src/b.py\n</summary>"),
        call("k", "read", serde_json::json!({"path": "src/c.py"})),
    ];
    let report = strict_artifact_recall(&original, &protected, &compacted);
    let paths = report
        .category(ArtifactCategory::Path)
        .cloned()
        .unwrap_or_default();
    assert_eq!(paths.named_by_protected, 1);
    assert_eq!((paths.kept, paths.total), (2, 3));
    assert_eq!(paths.missing, ["src/d.py"]);
}
