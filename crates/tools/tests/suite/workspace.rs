//! File tools cannot reach outside the workspace root.

use std::os::unix::fs::symlink;

use serde_json::json;
use troupe_tools::workspace::{EscapeKind, PathError, resolve};
use troupe_tools::{ToolFailure, ToolOutcome, builtin};

use super::support::{run, workspace};

/// A workspace inside a parent that also holds a secret outside the workspace.
fn setup() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    troupe_tools::ToolContext,
) {
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    std::fs::create_dir(parent.path().join("outside")).unwrap();
    std::fs::write(parent.path().join("outside/secret.txt"), "secret\n").unwrap();
    let ctx = troupe_tools::ToolContext::new("tester", &root);
    (parent, root, ctx)
}

fn escape_kind(err: PathError) -> EscapeKind {
    match err {
        PathError::Escape { kind, .. } => kind,
        other => panic!("expected an escape, got {other:?}"),
    }
}

#[tokio::test]
async fn an_absolute_path_outside_the_root_is_refused() {
    let (parent, root, ctx) = setup();
    let secret = parent.path().join("outside/secret.txt");
    let err = resolve(&root, secret.to_str().unwrap()).unwrap_err();
    assert_eq!(escape_kind(err), EscapeKind::AbsolutePath);
    let result = run(
        &builtin::file_tools(),
        &ctx,
        "read_file",
        json!({"path": "/etc/passwd"}),
    )
    .await;
    assert_eq!(result.outcome, ToolOutcome::Error(ToolFailure::PathEscape));
    assert_eq!(
        result.content,
        "path \"/etc/passwd\" refused: it is an absolute path outside the workspace root; use a \
         path relative to the workspace root, e.g. \"src/main.rs\""
    );
    assert!(ctx.ledger.is_empty());
}

#[tokio::test]
async fn dot_dot_escapes_are_refused() {
    let (_parent, root, ctx) = setup();
    assert_eq!(
        escape_kind(resolve(&root, "../outside/secret.txt").unwrap_err()),
        EscapeKind::ParentTraversal
    );
    assert_eq!(
        escape_kind(resolve(&root, "src/../../outside/secret.txt").unwrap_err()),
        EscapeKind::ParentTraversal
    );
    let result = run(
        &builtin::file_tools(),
        &ctx,
        "write_file",
        json!({"path": "../outside/new.txt", "content": "x"}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::PathEscape));
    assert!(
        result
            .content
            .contains("its \"..\" components climb above the workspace root")
    );
    assert!(!root.parent().unwrap().join("outside/new.txt").exists());
}

#[tokio::test]
async fn symlinks_pointing_outside_are_refused() {
    let (parent, root, ctx) = setup();
    symlink(parent.path().join("outside"), root.join("out_dir")).unwrap();
    symlink(
        parent.path().join("outside/secret.txt"),
        root.join("secret_link"),
    )
    .unwrap();
    assert_eq!(
        escape_kind(resolve(&root, "secret_link").unwrap_err()),
        EscapeKind::Symlink
    );
    let tools = builtin::file_tools();
    let result = run(
        &tools,
        &ctx,
        "read_file",
        json!({"path": "out_dir/secret.txt"}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::PathEscape));
    assert!(
        result
            .content
            .contains("goes through a symlink that points outside")
    );
    let result = run(
        &tools,
        &ctx,
        "edit_file",
        json!({
            "path": "secret_link", "old_string": "secret", "new_string": "owned"
        }),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::PathEscape));
    assert_eq!(
        std::fs::read_to_string(parent.path().join("outside/secret.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test]
async fn a_new_file_whose_parent_escapes_is_refused() {
    let (parent, root, ctx) = setup();
    symlink(parent.path().join("outside"), root.join("out_dir")).unwrap();
    let result = run(
        &builtin::file_tools(),
        &ctx,
        "write_file",
        json!({"path": "out_dir/deeper/new.txt", "content": "x"}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::PathEscape));
    assert!(!parent.path().join("outside/deeper").exists());
}

#[tokio::test]
async fn a_dangling_symlink_pointing_outside_cannot_be_written_through() {
    let (parent, root, ctx) = setup();
    let target = parent.path().join("outside/created.txt");
    symlink(&target, root.join("dangling")).unwrap();
    let result = run(
        &builtin::file_tools(),
        &ctx,
        "write_file",
        json!({"path": "dangling", "content": "x"}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::PathEscape));
    assert!(!target.exists());
}

#[test]
fn paths_inside_the_root_resolve_relative_with_slashes() {
    let (_parent, root, _ctx) = setup();
    symlink(root.join("src"), root.join("src_link")).unwrap();
    assert_eq!(resolve(&root, "src/lib.rs").unwrap().relative, "src/lib.rs");
    assert_eq!(
        resolve(&root, "./src/../src/lib.rs").unwrap().relative,
        "src/lib.rs"
    );
    assert_eq!(
        resolve(&root, "src_link/lib.rs").unwrap().relative,
        "src/lib.rs"
    );
    assert_eq!(
        resolve(&root, "new/dir/file.txt").unwrap().relative,
        "new/dir/file.txt"
    );
    assert_eq!(resolve(&root, ".").unwrap().relative, ".");
    let absolute = root.join("src/lib.rs");
    assert_eq!(
        resolve(&root, absolute.to_str().unwrap()).unwrap().relative,
        "src/lib.rs"
    );
}

#[tokio::test]
async fn an_empty_path_is_explained() {
    let (_dir, ctx) = workspace();
    let result = run(
        &builtin::file_tools(),
        &ctx,
        "read_file",
        json!({"path": ""}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    assert!(
        result.content.contains("the path is empty"),
        "{}",
        result.content
    );
}
