//! `troupe trace`: rendering a trace file written by a real (scripted) team run.

use std::io::Write;

use troupe_cli::trace_tree::{TraceFollower, build_forest, read_trace_file, render_file};

use super::support::{run_scripted_team, with_trace_file};

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_team_run_renders_as_agent_turn_call_tree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    with_trace_file(&path, false, || block_on(run_scripted_team()));

    let text = render_file(&path).unwrap();
    println!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("trace "), "{text}");
    assert!(
        lines[0].contains("agents 3 · model calls 4 · tool calls 2"),
        "{text}"
    );
    assert!(lines[0].contains("errors 0"), "{text}");
    assert!(
        lines[1].starts_with("agent coordinator  (asked by user)"),
        "{text}"
    );
    // The workers hang under the coordinator's ask_agent calls, inside turn 1.
    let pos = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle}:\n{text}"))
    };
    let turn1 = pos("turn 1");
    let namer = pos("agent namer  (asked by coordinator)");
    let turn2 = pos("turn 2");
    assert!(turn1 < namer && namer < turn2, "{text}");
    assert!(lines[pos("tool ask_agent")].starts_with("│  ├─ "), "{text}");
    let indent = |i: usize| lines[i].find("agent").unwrap();
    assert!(indent(namer) > indent(1) + 6, "{text}");
    assert!(text.contains("model call scripted-namer"), "{text}");
    assert!(text.contains("tokens "), "{text}");

    let forest = build_forest(&read_trace_file(&path).unwrap().lines);
    assert_eq!(forest.traces.len(), 1);
    assert_eq!(
        forest.traces[0].roots.len(),
        1,
        "every agent is inside the coordinator's tree"
    );
}

#[test]
fn errors_show_in_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("err.jsonl");
    with_trace_file(&path, false, || {
        let _a = tracing::info_span!(target: "troupe_test", "invoke_agent", "gen_ai.agent.name" = "solo").entered();
        let _c = tracing::info_span!(target: "troupe_test", "chat", "gen_ai.request.model" = "m")
            .entered();
        tracing::warn!(target: "troupe_test", error = "HTTP 500 from provider", "model call failed");
    });
    let text = render_file(&path).unwrap();
    assert!(text.contains("errors 1"), "{text}");
    assert!(
        text.contains("model call m") && text.contains("ERROR"),
        "{text}"
    );
    assert!(
        text.contains("! warn: model call failed: HTTP 500 from provider"),
        "{text}"
    );
}

#[test]
fn a_torn_last_line_and_a_bad_middle_line_are_said_and_the_rest_is_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn.jsonl");
    with_trace_file(&path, false, || {
        tracing::info_span!(target: "troupe_test", "chat").in_scope(|| {})
    });
    let good = std::fs::read_to_string(&path).unwrap();

    std::fs::write(&path, format!("{good}{{\"type\":\"span\",\"na")).unwrap();
    let text = render_file(&path).unwrap();
    assert!(
        text.starts_with("warning: ") && text.contains(":2: skipped an incomplete last line"),
        "{text}"
    );
    assert!(text.contains("model call"), "{text}");

    std::fs::write(&path, format!("not json\n{good}")).unwrap();
    let text = render_file(&path).unwrap();
    assert!(
        text.starts_with("warning: ")
            && text.contains("torn.jsonl:1: skipped, not a troupe trace line"),
        "{text}"
    );
    assert!(text.contains("model call"), "{text}");
}

#[test]
fn the_follower_reads_whole_lines_as_they_are_appended() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.jsonl");
    with_trace_file(&source, false, || {
        tracing::info_span!(target: "troupe_test", "first").in_scope(|| {});
        tracing::info_span!(target: "troupe_test", "second").in_scope(|| {});
    });
    let text = std::fs::read_to_string(&source).unwrap();
    let (first, second) = text.split_at(text.find('\n').unwrap() + 1);

    let live = dir.path().join("live.jsonl");
    let mut follower = TraceFollower::new(&live);
    assert_eq!(
        follower.poll().unwrap(),
        0,
        "a file that does not exist yet is empty"
    );
    let mut file = std::fs::File::create(&live).unwrap();
    file.write_all(first.as_bytes()).unwrap();
    file.write_all(&second.as_bytes()[..10]).unwrap();
    assert_eq!(follower.poll().unwrap(), 1, "the half-written line waits");
    file.write_all(&second.as_bytes()[10..]).unwrap();
    assert_eq!(follower.poll().unwrap(), 1);
    assert_eq!(follower.lines().len(), 2);
}

#[test]
fn compaction_spans_are_labelled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compaction.jsonl");
    with_trace_file(&path, false, || {
        let _a = tracing::info_span!(target: "troupe_test", "invoke_agent", "gen_ai.agent.name" = "solo").entered();
        tracing::info_span!(target: "troupe_test", "compaction", "gen_ai.agent.name" = "solo", "troupe.trigger" = "automatic")
            .in_scope(|| {});
    });
    let text = render_file(&path).unwrap();
    assert!(text.contains("└─ compaction of solo (automatic)"), "{text}");
}
