//! `troupe trace` on hostile or huge input: deep chains, many orphaned agents, parent cycles,
//! control characters, a followed file that arrives all at once.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use troupe_cli::trace_tree::{TraceFollower, render_file};

/// One span line of a trace file.
fn span(
    name: &str,
    trace: &str,
    id: &str,
    parent: Option<&str>,
    (start, end): (u64, u64),
    attributes: serde_json::Value,
) -> String {
    let mut line = serde_json::json!({
        "type": "span",
        "name": name,
        "trace_id": trace,
        "span_id": id,
        "parent_span_id": parent,
        "start_time_unix_nano": start,
        "end_time_unix_nano": end,
        "duration_ms": (end - start) as f64 / 1e6,
        "target": "troupe_test",
        "level": "INFO",
        "status": "ok",
        "attributes": attributes,
    })
    .to_string();
    line.push('\n');
    line
}

const TRACE: &str = "0123456789abcdef0123456789abcdef";

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_chain_of_100000_spans_renders_every_span() {
    const DEPTH: u64 = 100_000;
    let mut text = String::new();
    for i in 0..DEPTH {
        let id = format!("{i:016x}");
        let parent = (i > 0).then(|| format!("{:016x}", i - 1));
        text.push_str(&span(
            &format!("step{i}"),
            TRACE,
            &id,
            parent.as_deref(),
            (1_000 + i, 10_000_000 - i),
            serde_json::json!({}),
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let out = render_file(&write(dir.path(), "deep.jsonl", &text)).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.len(),
        1 + DEPTH as usize,
        "a header and one line per span"
    );
    assert!(lines[1].starts_with("step0  "), "{}", lines[1]);
    assert!(lines[2].starts_with("└─ step1  "), "{}", lines[2]);
    let last = lines[lines.len() - 1];
    assert!(
        last.contains(&format!("[depth {}] step{}  ", DEPTH - 1, DEPTH - 1)),
        "{last}"
    );
    // Indentation stops growing: the output is linear in the depth.
    assert!(out.len() < 400 * DEPTH as usize, "{} bytes", out.len());
}

#[test]
fn many_orphaned_agents_hang_under_their_ask_calls() {
    // One coordinator turn after another, each asking a worker whose invoke_agent span lost its
    // parent. The lookup of each worker's ask_agent call must not scan every span: with a scan
    // per orphan this test runs for minutes instead of about a second.
    const ASKS: u64 = 30_000;
    let mut text = span(
        "invoke_agent",
        TRACE,
        "root000000000000",
        None,
        (0, 100 * ASKS + 100),
        serde_json::json!({"gen_ai.agent.name": "coordinator"}),
    );
    for i in 0..ASKS {
        let call = format!("c{i:015x}");
        let start = 10 + 100 * i;
        text.push_str(&span(
            "execute_tool",
            TRACE,
            &call,
            Some("root000000000000"),
            (start, start + 50),
            serde_json::json!({"gen_ai.tool.name": "ask_agent", "gen_ai.agent.name": "coordinator", "gen_ai.tool.call.id": format!("call{i}")}),
        ));
        text.push_str(&span(
            "invoke_agent",
            TRACE,
            &format!("w{i:015x}"),
            None,
            (start + 10, start + 40),
            serde_json::json!({"gen_ai.agent.name": format!("worker{i}"), "troupe.from": "coordinator"}),
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let out = render_file(&write(dir.path(), "orphans.jsonl", &text)).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("trace ")).count(),
        1,
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(&format!("agents {}", ASKS + 1)),
        "{}",
        lines[0]
    );
    for i in [0, 1, ASKS / 2, ASKS - 1] {
        let call = lines
            .iter()
            .position(|l| l.contains(&format!("[call{i}]")))
            .unwrap();
        assert!(
            lines[call + 1].contains(&format!("└─ agent worker{i}  (asked by coordinator)")),
            "worker{i} is not under its call:\n{}\n{}",
            lines[call],
            lines[call + 1]
        );
    }
}

#[test]
fn an_orphan_hangs_under_the_latest_call_that_contains_it() {
    let ask = |id: &str, range, call: &str| {
        span(
            "execute_tool",
            TRACE,
            id,
            Some("root000000000000"),
            range,
            serde_json::json!({"gen_ai.tool.name": "ask_agent", "gen_ai.agent.name": "boss", "gen_ai.tool.call.id": call}),
        )
    };
    let mut text = span(
        "invoke_agent",
        TRACE,
        "root000000000000",
        None,
        (0, 1000),
        serde_json::json!({"gen_ai.agent.name": "boss"}),
    );
    text.push_str(&ask("a000000000000000", (10, 900), "outer"));
    text.push_str(&ask("b000000000000000", (20, 60), "ended-too-soon"));
    text.push_str(&ask("c000000000000000", (30, 500), "inner"));
    text.push_str(&ask("d000000000000000", (150, 400), "started-too-late"));
    text.push_str(&span(
        "invoke_agent",
        TRACE,
        "w000000000000000",
        None,
        (100, 300),
        serde_json::json!({"gen_ai.agent.name": "helper", "troupe.from": "boss"}),
    ));
    let dir = tempfile::tempdir().unwrap();
    let out = render_file(&write(dir.path(), "nest.jsonl", &text)).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    let inner = lines.iter().position(|l| l.contains("[inner]")).unwrap();
    assert!(lines[inner + 1].contains("agent helper"), "{out}");
    assert_eq!(out.matches("agent helper").count(), 1, "{out}");
}

#[test]
fn spans_whose_parents_form_a_cycle_are_reported_and_shown() {
    let mut text = span(
        "request",
        TRACE,
        "r000000000000000",
        None,
        (0, 100),
        serde_json::json!({}),
    );
    text.push_str(&span(
        "alpha",
        TRACE,
        "a000000000000000",
        Some("b000000000000000"),
        (10, 20),
        serde_json::json!({}),
    ));
    text.push_str(&span(
        "beta",
        TRACE,
        "b000000000000000",
        Some("a000000000000000"),
        (11, 19),
        serde_json::json!({}),
    ));
    text.push_str(&span(
        "under_alpha",
        TRACE,
        "c000000000000000",
        Some("a000000000000000"),
        (12, 13),
        serde_json::json!({}),
    ));
    text.push_str(&span(
        "selfish",
        TRACE,
        "s000000000000000",
        Some("s000000000000000"),
        (30, 40),
        serde_json::json!({}),
    ));
    let dir = tempfile::tempdir().unwrap();
    let out = render_file(&write(dir.path(), "cycle.jsonl", &text)).unwrap();
    let warnings: Vec<&str> = out.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{out}");
    assert!(
        warnings[0].contains("a000000000000000 → b000000000000000 → a000000000000000")
            && warnings[0].contains("form a cycle"),
        "{out}"
    );
    assert!(
        warnings[1].contains("s000000000000000 → s000000000000000"),
        "{out}"
    );
    for name in ["request", "alpha", "beta", "under_alpha", "selfish"] {
        assert!(
            out.lines().any(|l| l
                .trim_start_matches(['│', '├', '└', '─', ' '])
                .starts_with(&format!("{name}  "))),
            "{name} is missing:\n{out}"
        );
    }
}

#[test]
fn control_characters_from_the_file_are_escaped() {
    let mut text = span(
        "\x1b[2Jinvoke\x1b[0m",
        TRACE,
        "a000000000000000",
        None,
        (0, 100),
        serde_json::json!({"note": "\x1b]0;pwned\x07", "multi\nline": 1}),
    );
    text.push_str(&span(
        "execute_tool",
        TRACE,
        "b000000000000000",
        Some("a000000000000000"),
        (10, 20),
        serde_json::json!({"gen_ai.tool.name": "rm\r-rf", "gen_ai.tool.call.id": "\u{9b}31m"}),
    ));
    let mut event = serde_json::json!({
        "type": "event", "time_unix_nano": 5, "level": "WARN",
        "message": "beep\x07", "attributes": {"error": "\x1b[5mblink"}
    })
    .to_string();
    event.push('\n');
    text.push_str(&event);
    let dir = tempfile::tempdir().unwrap();
    let out = render_file(&write(dir.path(), "evil.jsonl", &text)).unwrap();
    let unsafe_chars: Vec<char> = out
        .chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect();
    assert!(unsafe_chars.is_empty(), "{unsafe_chars:?} in\n{out}");
    for shown in [
        "\\u{1b}[2Jinvoke\\u{1b}[0m",
        "note=\\u{1b}]0;pwned\\u{7}",
        "multi\\nline=1",
        "tool rm\\r-rf [\\u{9b}31m]",
        "beep\\u{7}: \\u{1b}[5mblink",
    ] {
        assert!(out.contains(shown), "{shown} not in\n{out}");
    }

    // A bad line quoted in its warning is escaped too.
    let bad = write(dir.path(), "bad.jsonl", "{\"type\":\"\\u001b[31mred\"}\n");
    let said = render_file(&bad).unwrap();
    assert!(
        !said.chars().any(|c| c.is_control() && c != '\n'),
        "{said:?}"
    );
    assert!(said.contains("\\u{1b}[31mred"), "{said}");
}

fn event_line(i: usize) -> String {
    format!(
        "{{\"type\":\"event\",\"time_unix_nano\":{i},\"level\":\"WARN\",\"message\":\"m{i}\"}}\n"
    )
}

#[test]
fn the_follower_reads_a_large_file_in_one_poll() {
    // 400,000 lines in one read: dropping each parsed line from the front of the buffer moves
    // the rest every time (quadratic: minutes instead of about a second); the follower must not.
    const LINES: usize = 400_000;
    let mut text = String::new();
    for i in 0..LINES {
        text.push_str(&event_line(i));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "big.jsonl", &text);
    let mut follower = TraceFollower::new(&path);
    assert_eq!(follower.poll().unwrap(), LINES);
    assert_eq!(follower.poll().unwrap(), 0);
}

#[test]
fn the_follower_keeps_lines_split_across_many_polls_and_says_a_bad_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    let mut follower = TraceFollower::new(&path);
    // A line written a byte at a time.
    let first = event_line(1);
    for b in first.as_bytes() {
        file.write_all(&[*b]).unwrap();
        follower.poll().unwrap();
    }
    assert_eq!(follower.lines().len(), 1);
    // Two good lines, a bad one, a good one, in one write.
    let mut chunk = String::new();
    let _ = write!(
        chunk,
        "{}{}not json\n{}",
        event_line(2),
        event_line(3),
        event_line(4)
    );
    file.write_all(chunk.as_bytes()).unwrap();
    assert_eq!(
        follower.poll().unwrap(),
        3,
        "the lines around the bad one are read"
    );
    let said = follower.read().warnings(&path);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("live.jsonl:4: skipped, not a troupe trace line"),
        "{said:?}"
    );
    assert_eq!(follower.poll().unwrap(), 0, "and nothing is read twice");
    assert_eq!((follower.lines().len(), follower.read().bad_lines), (4, 1));
}
