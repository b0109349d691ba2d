//! `examples/controls.rs` (#33) runs and prints every control's step in lines that name it:
//! an approved and a denied `rm`, a request stopped by its token budget, an automatic
//! compaction vetoed by the before hook, a `/compact` seen by both hooks, the pinned rules
//! byte-identical after it, and one rate limit counting every agent's calls.

#[path = "../../examples/controls.rs"]
mod controls;

#[tokio::test]
async fn the_controls_example_prints_every_step() {
    let mut out = Vec::new();
    controls::run(&mut out).await.unwrap();
    let out = String::from_utf8(out).unwrap();
    let step = |name: &str| -> String {
        let lines: Vec<&str> = out.lines().filter(|l| l.starts_with(name)).collect();
        assert!(!lines.is_empty(), "no `{name}` line in:\n{out}");
        lines.join("\n")
    };

    let approval = step("approval: ");
    assert!(
        // Shown as the tool will read them (#41: what is approved is what runs).
        approval.contains(r#"shell {"command":"rm build.log"} (ops:call_1#1): approved"#),
        "{approval}"
    );
    assert!(approval.contains("build.log gone: true"), "{approval}");
    assert!(
        approval.contains(r#"shell {"command":"rm -r src"} (ops:call_2#2): denied"#),
        "{approval}"
    );
    // The model was told why, and the denied command never ran.
    assert!(
        approval.contains("denied this call: src holds the sources"),
        "{approval}"
    );
    assert!(approval.contains("src still there: true"), "{approval}");

    let budget = step("budget: ");
    assert!(
        budget.contains("BudgetExceeded: spent ")
            && budget.contains("limit 20 input tokens; scope request"),
        "{budget}"
    );
    assert!(budget.contains("model calls made: 1 "), "{budget}");

    let hook = step("hook: ");
    assert!(hook.contains("hook: before (automatic)"), "{hook}");
    assert!(
        hook.contains("notes: vetoed by the before-compaction hook: the user is reviewing the log"),
        "{hook}"
    );
    assert!(hook.contains("hook: before (manual)"), "{hook}");
    assert!(hook.contains("hook: after (manual)"), "{hook}");
    assert!(
        hook.contains("notes: none (every preserve hint is in the result)"),
        "{hook}"
    );

    let pin = step("pin: ");
    assert!(pin.contains("as protected (a pinned message)"), "{pin}");
    assert!(pin.contains(": pinned and byte-identical ("), "{pin}");
    assert!(!pin.contains("archived 0 messages"), "{pin}");

    // ops asked 4 times and auditor once, coder at least once: one count for all.
    let rate_limit = step("rate limit: ");
    let counted: u64 = rate_limit
        .split("): ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in {rate_limit}"));
    assert!(counted >= 6, "{rate_limit}");
    assert!(rate_limit.contains("0 Retry-After holds"), "{rate_limit}");
}
