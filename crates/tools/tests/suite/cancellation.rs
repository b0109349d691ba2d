//! `ToolContext::cancel` is cancelled when a call is stopped: by its timeout, or by the caller
//! dropping the dispatch (an abandoned turn). Work a tool moved to a blocking thread (a `grep`
//! walk) outlives a dropped future; the token is how it learns to stop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use troupe_tools::{NoArgs, ToolError, ToolFailure, ToolRegistry};

use super::support::{call, run, workspace};

/// Where a test tool leaves the token its call saw.
type Seen = Arc<Mutex<Option<CancellationToken>>>;

/// A registry whose `hang` records its token, says so on `started`, and never finishes; and
/// whose `quick` records its token and returns.
fn registry(seen: &Seen, started: oneshot::Sender<()>) -> ToolRegistry {
    let started = Arc::new(Mutex::new(Some(started)));
    let mut registry = ToolRegistry::new();
    let hang_seen = seen.clone();
    let quick_seen = seen.clone();
    registry
        .register_fn_with_context("hang", "Never finishes.", move |ctx, _: NoArgs| {
            *hang_seen.lock().unwrap() = Some(ctx.cancel.clone());
            if let Some(started) = started.lock().unwrap().take() {
                let _ = started.send(());
            }
            async move {
                std::future::pending::<()>().await;
                Ok::<_, ToolError>("unreachable")
            }
        })
        .unwrap()
        .register_fn_with_context("quick", "Returns at once.", move |ctx, _: NoArgs| {
            *quick_seen.lock().unwrap() = Some(ctx.cancel.clone());
            async move { Ok::<_, ToolError>("done") }
        })
        .unwrap();
    registry
}

fn seen_token(seen: &Seen) -> CancellationToken {
    seen.lock().unwrap().clone().expect("the tool never ran")
}

#[tokio::test]
async fn a_timed_out_call_has_its_token_cancelled() {
    let (_dir, ctx) = workspace();
    let seen = Seen::default();
    let (started, _) = oneshot::channel();
    let mut registry = registry(&seen, started);
    registry
        .set_timeout("hang", Duration::from_millis(20))
        .unwrap();
    let result = run(&registry, &ctx, "hang", serde_json::json!({})).await;
    assert_eq!(result.failure(), Some(&ToolFailure::TimedOut));
    assert!(seen_token(&seen).is_cancelled());
    // The caller's token is the caller's: one call timing out does not cancel the turn.
    assert!(!ctx.cancel.is_cancelled());
}

#[tokio::test]
async fn a_dropped_dispatch_has_its_token_cancelled() {
    let (_dir, ctx) = workspace();
    let seen = Seen::default();
    let (started, has_started) = oneshot::channel();
    let registry = registry(&seen, started);
    let hang = call("hang", "{}");
    let dispatch = registry.dispatch(&hang, &ctx);
    // Run the call until the tool holds its token, then drop it, as an abandoned turn does.
    tokio::select! {
        _ = dispatch => panic!("hang finished"),
        _ = has_started => {}
    }
    assert!(seen_token(&seen).is_cancelled());
    assert!(!ctx.cancel.is_cancelled());
}

#[tokio::test]
async fn a_call_that_finishes_keeps_its_token_and_follows_the_callers() {
    let (_dir, ctx) = workspace();
    let seen = Seen::default();
    let (started, _) = oneshot::channel();
    let registry = registry(&seen, started);
    let result = run(&registry, &ctx, "quick", serde_json::json!({})).await;
    assert_eq!(result.content, "done");
    let token = seen_token(&seen);
    assert!(!token.is_cancelled());
    // The call's token is a child of the caller's: cancelling the turn reaches it.
    ctx.cancel.cancel();
    assert!(token.is_cancelled());
}

#[tokio::test]
async fn a_grep_walk_stops_once_its_token_is_cancelled() {
    use troupe_tools::Tool;
    use troupe_tools::builtin::{Grep, GrepArgs};

    let (dir, ctx) = workspace();
    for name in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(dir.path().join(name), "needle\n").unwrap();
    }
    let args = || GrepArgs {
        pattern: "needle".into(),
        path: None,
        case_insensitive: false,
        max_matches: None,
    };
    let found = Grep.call(&ctx, args()).await.unwrap();
    assert_eq!(found.lines().count(), 3, "{found}");
    // The walk runs on a blocking thread a dropped future cannot stop: the token does.
    ctx.cancel.cancel();
    let stopped = Grep.call(&ctx, args()).await.unwrap();
    assert!(stopped.contains("(0 files searched)"), "{stopped}");
}
