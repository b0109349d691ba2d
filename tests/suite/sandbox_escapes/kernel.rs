//! A kernel without what the policy needs, and where the policy in force shows.

use std::time::{Duration, Instant};

use super::{DEFAULT, FULL, chat, chat_in, scene};

#[test]
fn a_kernel_without_landlock_refuses_workspace_write_saying_how_to_choose_full() {
    let commands = vec!["echo ran > ran.txt".to_string()];
    let knob = troupe::tools::sandbox::LANDLOCK_ABI_AT_MOST_ENV;
    // With the kernel's Landlock the command runs.
    let s = scene();
    chat_in(&s, DEFAULT, &commands);
    assert!(s.ws.join("ran.txt").exists());

    for (abi, says) in [
        ("0", "this kernel has no Landlock"),
        ("4", "Landlock is ABI 4"),
    ] {
        let s = scene();
        let run = chat(
            &s,
            DEFAULT,
            &commands,
            &s.base.join("s.jsonl"),
            &[(knob, abi)],
            "",
        );
        assert!(run.status.success(), "{}", run.stdout);
        let result = run.result(0);
        assert!(!s.ws.join("ran.txt").exists(), "it ran: {result}");
        for part in [
            "the sandbox (workspace-write) needs Landlock ABI 6",
            says,
            "the command was not run",
            "`[sandbox] policy = \"full\"`",
        ] {
            assert!(result.contains(part), "`{part}` missing: {result}");
        }
    }
    let s = scene();
    chat(
        &s,
        FULL,
        &commands,
        &s.base.join("s.jsonl"),
        &[(knob, "0")],
        "",
    );
    assert!(s.ws.join("ran.txt").exists(), "full did not run");
}

#[test]
fn the_chat_says_which_policy_is_in_force_and_the_trace_records_it_per_call() {
    for (sandbox, shown, traced) in [
        (
            DEFAULT,
            "sandbox: workspace-write, network off",
            "workspace-write",
        ),
        (
            "policy = \"read-only\"\nnetwork = true",
            "sandbox: read-only, network on",
            "read-only",
        ),
        (FULL, "sandbox: full (not confined)", "full"),
    ] {
        let s = scene();
        let trace = s.base.join("trace.jsonl");
        let commands = vec!["true".to_string()];
        let trace_env = trace.to_string_lossy().to_string();
        let run = chat(
            &s,
            sandbox,
            &commands,
            &s.base.join("s.jsonl"),
            &[("TROUPE_TRACE", &trace_env)],
            "/context\n",
        );
        assert!(run.status.success(), "{}", run.stdout);
        // The status line before each prompt, and /context.
        assert!(
            run.stdout.contains(&format!("· {shown}] >")),
            "{}",
            run.stdout
        );
        assert!(run.stdout.contains(&format!("\n{shown}")), "{}", run.stdout);
        let deadline = Instant::now() + Duration::from_secs(30);
        let span = loop {
            let text = std::fs::read_to_string(&trace).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| l.contains("\"execute_tool\"")) {
                break line.to_string();
            }
            assert!(Instant::now() < deadline, "no execute_tool span in {text}");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            span.contains(&format!("\"troupe.sandbox.policy\":\"{traced}\"")),
            "{span}"
        );
    }
}
