//! The opt-in shell tool.

use std::time::Duration;

use serde_json::json;
use troupe_tools::builtin::{ShellConfig, shell_tool};
use troupe_tools::{ToolFailure, ToolOutcome, ToolRegistry};

use super::support::{run, workspace};

fn registry(config: ShellConfig) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(shell_tool(config)).unwrap();
    registry
}

#[tokio::test]
async fn shell_runs_in_the_workspace_root_and_reports_exit_code_and_streams() {
    let (dir, ctx) = workspace();
    std::fs::write(dir.path().join("marker.txt"), "here").unwrap();
    let registry = registry(ShellConfig::default());
    let result = run(
        &registry,
        &ctx,
        "shell",
        json!({"command": "cat marker.txt; echo oops >&2; exit 3"}),
    )
    .await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    assert_eq!(
        result.content,
        "exit code: 3\n[stdout]\nhere\n[stderr]\noops\n"
    );
}

#[tokio::test]
async fn shell_kills_a_command_past_its_timeout() {
    let (_dir, ctx) = workspace();
    let registry = registry(ShellConfig {
        timeout: Duration::from_millis(200),
        ..ShellConfig::default()
    });
    // `sleep 30` cannot finish within the timeout whatever the machine's speed.
    let result = run(&registry, &ctx, "shell", json!({"command": "sleep 30"})).await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    assert!(
        result
            .content
            .starts_with("the command did not finish within 0.2 s and was killed"),
        "{}",
        result.content
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_timeout_also_kills_what_the_command_started() {
    let (dir, ctx) = workspace();
    let registry = registry(ShellConfig {
        timeout: Duration::from_millis(500),
        ..ShellConfig::default()
    });
    let result = run(
        &registry,
        &ctx,
        "shell",
        json!({"command": "sleep 30 & echo $! > child.pid; wait"}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    let pid = std::fs::read_to_string(dir.path().join("child.pid")).unwrap();
    let proc = std::path::PathBuf::from(format!("/proc/{}", pid.trim()));
    // A killed child may linger as a zombie for a moment until init reaps it.
    let gone = (0..100).any(|_| {
        let alive = std::fs::read_to_string(proc.join("stat"))
            .is_ok_and(|stat| stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"));
        if alive {
            std::thread::sleep(Duration::from_millis(20));
        }
        !alive
    });
    assert!(
        gone,
        "the background `sleep` (pid {}) survived the timeout",
        pid.trim()
    );
}

#[tokio::test]
async fn shell_output_is_bounded() {
    let (_dir, ctx) = workspace();
    let registry = registry(ShellConfig {
        max_output_bytes: 100,
        ..ShellConfig::default()
    });
    let result = run(&registry, &ctx, "shell", json!({"command": "seq 1 10000"})).await;
    assert!(
        result
            .content
            .contains("output truncated: 48794 bytes dropped; the original was 48894 bytes"),
        "{}",
        result.content
    );
    assert!(result.content.len() < 400);
}

#[tokio::test]
async fn shell_does_not_pass_on_the_environment() {
    // cargo sets CARGO_PKG_NAME for the tests it runs; an API key in the environment would
    // travel to the command the same way.
    let inherited = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME for tests");
    assert!(!inherited.is_empty());
    let (_dir, ctx) = workspace();
    let result = run(
        &registry(ShellConfig::default()),
        &ctx,
        "shell",
        json!({"command": "echo \"[$CARGO_PKG_NAME]\"; test -n \"$PATH\" && echo has-path"}),
    )
    .await;
    assert_eq!(
        result.content, "exit code: 0\n[stdout]\n[]\nhas-path\n\n[stderr]\n",
        "{}",
        result.content
    );
}

#[tokio::test]
async fn shell_passes_the_variables_its_config_allows() {
    let inherited = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME for tests");
    let (_dir, ctx) = workspace();
    let registry = registry(ShellConfig {
        env_allowlist: vec!["CARGO_PKG_NAME".to_string()],
        ..ShellConfig::default()
    });
    let result = run(
        &registry,
        &ctx,
        "shell",
        json!({"command": "echo \"[$CARGO_PKG_NAME]\"; echo \"[$CARGO_PKG_VERSION]\""}),
    )
    .await;
    assert_eq!(
        result.content,
        format!("exit code: 0\n[stdout]\n[{inherited}]\n[]\n\n[stderr]\n")
    );
}

#[tokio::test]
async fn huge_output_is_streamed_into_a_capped_buffer() {
    let (_dir, ctx) = workspace();
    let registry = registry(ShellConfig {
        max_output_bytes: 1000,
        ..ShellConfig::default()
    });
    // 50 MB of stdout; a few bytes of stderr after it.
    let result = run(
        &registry,
        &ctx,
        "shell",
        json!({"command": "head -c 50000000 /dev/zero | tr '\\0' a; echo; echo done >&2"}),
    )
    .await;
    assert_eq!(
        result.outcome,
        ToolOutcome::Success,
        "{}",
        &result.content[..200]
    );
    assert!(
        result.content.len() < 1500,
        "{} bytes",
        result.content.len()
    );
    assert!(
        result
            .content
            .contains("[... output truncated: 49999001 bytes dropped"),
        "{}",
        result.content
    );
    assert!(
        result.content.ends_with("a\n\n[stderr]\ndone\n"),
        "{}",
        result.content
    );
}
