//! The file tools open beneath the workspace root: what replaces a checked path between the
//! check and the open, hard links and special files cannot take them outside or block them.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use troupe_tools::{ToolFailure, ToolOutcome, builtin};

use super::support::{assert_refused, run, setup};

#[tokio::test]
async fn a_hard_linked_file_is_refused_for_write_and_edit() {
    let (parent, root, ctx) = setup();
    let outside = parent.path().join("outside/f.txt");
    std::fs::hard_link(&outside, root.join("linked.txt")).unwrap();
    let tools = builtin::file_tools();
    let result = run(
        &tools,
        &ctx,
        "write_file",
        json!({"path": "linked.txt", "content": "owned\n"}),
    )
    .await;
    assert_refused(&result, "has 2 hard links");
    let result = run(
        &tools,
        &ctx,
        "edit_file",
        json!({"path": "linked.txt", "old_string": "secret", "new_string": "owned"}),
    )
    .await;
    assert_refused(&result, "has 2 hard links");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
    assert_eq!(
        std::fs::read_to_string(root.join("linked.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test]
async fn a_fifo_is_refused_without_blocking() {
    let (_parent, root, ctx) = setup();
    let status = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let tools = builtin::file_tools();
    for (tool, args) in [
        ("read_file", json!({"path": "pipe"})),
        (
            "edit_file",
            json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
        ("write_file", json!({"path": "pipe", "content": "x"})),
        ("grep", json!({"pattern": "x", "path": "pipe"})),
    ] {
        // A hang guard, not a timing goal: a blocked open is released by opening the FIFO's
        // write end, so the failure is reported instead of hanging the suite.
        let result = match tokio::time::timeout(
            std::time::Duration::from_secs(10),
            run(&tools, &ctx, tool, args.clone()),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => {
                release_fifo(&root.join("pipe"));
                panic!("{tool} blocked on a FIFO");
            }
        };
        assert_eq!(result.failure(), Some(&ToolFailure::Refused), "{tool}");
        assert!(
            result
                .content
                .contains("\"pipe\" is a FIFO, not a regular file"),
            "{tool}: {}",
            result.content
        );
    }
    // A recursive grep skips it rather than hanging on it.
    std::fs::write(root.join("x.txt"), "x\n").unwrap();
    let result = run(&tools, &ctx, "grep", json!({"pattern": "x"})).await;
    assert_eq!(result.content, "x.txt:1: x");
}

/// Unblock a reader stuck opening `fifo`: a writer that opens and closes gives it end of file.
fn release_fifo(fifo: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(fifo);
}

#[tokio::test]
async fn list_dir_does_not_show_where_an_outside_symlink_points() {
    let (parent, root, ctx) = setup();
    let outside = parent.path().join("outside");
    symlink(&outside, root.join("out")).unwrap();
    symlink("d/f.txt", root.join("in")).unwrap();
    let result = run(&builtin::file_tools(), &ctx, "list_dir", json!({})).await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    assert!(
        !result.content.contains(outside.to_str().unwrap()),
        "{}",
        result.content
    );
    assert_eq!(
        result.content,
        "d/\nin -> d/f.txt\nout -> (outside the workspace)"
    );
}

/// Exchanges `root/d` (a directory) and `root/d_alt` (a symlink to outside) atomically, over
/// and over, until told to stop.
fn flipper(root: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let root_dir = std::fs::File::open(&root).unwrap();
        while !stop.load(Ordering::Relaxed) {
            rustix::fs::renameat_with(
                &root_dir,
                "d",
                &root_dir,
                "d_alt",
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap();
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_flipping_to_an_outside_symlink_never_leaks_or_plants_a_file() {
    let (parent, root, ctx) = setup();
    symlink(parent.path().join("outside"), root.join("d_alt")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipping = flipper(root.clone(), Arc::clone(&stop));
    let tools = builtin::file_tools();
    let mut leaked = 0;
    for i in 0..200 {
        let read = run(&tools, &ctx, "read_file", json!({"path": "d/f.txt"})).await;
        if read.content.contains("secret") {
            leaked += 1;
        }
        let path = format!("d/new{i}.txt");
        run(
            &tools,
            &ctx,
            "write_file",
            json!({"path": path, "content": "planted"}),
        )
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    flipping.join().unwrap();
    let planted = std::fs::read_dir(parent.path().join("outside"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name() != "f.txt")
        .count();
    assert_eq!(
        (leaked, planted),
        (0, 0),
        "outside content read, files planted outside"
    );
}

#[tokio::test]
async fn writes_replace_the_file_atomically_keeping_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let (_parent, root, ctx) = setup();
    let file = root.join("d/f.txt");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let tools = builtin::file_tools();
    let args = json!({"path": "d/f.txt", "old_string": "inside", "new_string": "edited"});
    let result = run(&tools, &ctx, "edit_file", args).await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "edited\n");
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(root.join("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["f.txt"]);
}
