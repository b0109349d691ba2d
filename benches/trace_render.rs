//! How long `troupe trace` takes on a ~50 MB trace file, plainly and through `--follow`'s
//! incremental reader. Run with `cargo bench -p troupe --all-features --bench trace_render`.
//!
//! The file is generated: many traces, each a coordinator agent whose turns are model calls and
//! tool calls, `ask_agent` calls whose workers' `invoke_agent` spans lost their parent (orphans,
//! placed by time), events, and one deep-ish chain of nested spans per trace.
//!
//! - plain: `render_file` (read, parse, build the forest, render), as `troupe trace FILE`.
//! - follow: the file appended in 1 MiB chunks with a `TraceFollower::poll` after each (lines
//!   split across chunks included), then one redraw (`build_forest` + `render_forest`), as
//!   `troupe trace --follow` does when the writer catches up.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use troupe_cli::trace_tree::{TraceFollower, build_forest, render_file, render_forest};

const TARGET_BYTES: usize = 50 * 1024 * 1024;
const ITERATIONS: usize = 5;
const CHUNK: usize = 1024 * 1024;
const CHAIN_DEPTH: usize = 200;

/// Writes span lines with unique ids and increasing times.
struct Generator {
    out: String,
    next_id: u64,
    clock: u64,
}

impl Generator {
    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("{:016x}", self.next_id)
    }

    fn span(
        &mut self,
        name: &str,
        trace: &str,
        parent: Option<&str>,
        (start, end): (u64, u64),
        attributes: serde_json::Value,
        events: serde_json::Value,
    ) -> String {
        let id = self.id();
        let line = serde_json::json!({
            "type": "span", "name": name, "trace_id": trace, "span_id": id,
            "parent_span_id": parent, "start_time_unix_nano": start, "end_time_unix_nano": end,
            "duration_ms": (end - start) as f64 / 1e6, "target": "troupe_agents::agent",
            "level": "INFO", "status": "ok", "attributes": attributes, "events": events,
        });
        self.out.push_str(&line.to_string());
        self.out.push('\n');
        id
    }

    fn tick(&mut self, ns: u64) -> u64 {
        self.clock += ns;
        self.clock
    }

    /// One agent's turns under `parent`: a model call, then a tool call.
    fn turns(&mut self, trace: &str, agent_span: &str, agent: &str, turns: usize) {
        for t in 0..turns {
            let s = self.tick(1_000);
            let e = self.tick(900_000);
            self.span(
                "chat",
                trace,
                Some(agent_span),
                (s, e),
                serde_json::json!({
                    "gen_ai.operation.name": "chat", "gen_ai.agent.name": agent,
                    "gen_ai.request.model": "qwen2.5-7b-instruct",
                    "gen_ai.usage.input_tokens": 1200 + t, "gen_ai.usage.output_tokens": 80,
                    "gen_ai.response.finish_reasons": "[\"tool_calls\"]",
                }),
                serde_json::json!([]),
            );
            let s = self.tick(1_000);
            let e = self.tick(300_000);
            let failed = t % 7 == 3;
            let events = if failed {
                serde_json::json!([{ "time_unix_nano": e, "level": "WARN",
                    "message": "tool call failed", "attributes": { "error": "refused: path outside the workspace" } }])
            } else {
                serde_json::json!([])
            };
            self.span(
                "execute_tool",
                trace,
                Some(agent_span),
                (s, e),
                serde_json::json!({
                    "gen_ai.operation.name": "execute_tool", "gen_ai.agent.name": agent,
                    "gen_ai.tool.name": "read_file", "gen_ai.tool.call.id": format!("call_{t}_{s}"),
                    "gen_ai.tool.call.arguments": "{\"path\":\"src/lib.rs\",\"max_bytes\":4096}",
                }),
                events,
            );
        }
    }

    /// One trace: a coordinator with turns, three asked workers (orphans), and a chain.
    fn trace(&mut self, n: usize) {
        let trace = format!("{n:032x}");
        let root_start = self.tick(1_000);
        let root = self.id();
        let mut lines_after = std::mem::take(&mut self.out);
        self.turns(&trace, &root, "coordinator", 3);
        for w in 0..3 {
            let s = self.tick(1_000);
            let call = self.id();
            let ws = self.tick(1_000);
            let worker = format!("worker{w}");
            // Its line is written when it closes, after its children (as the writer does).
            let worker_span = self.id();
            self.turns(&trace, &worker_span, &worker, 2);
            let e = self.tick(1_000);
            self.out.push_str(
                &serde_json::json!({
                    "type": "span", "name": "execute_tool", "trace_id": trace, "span_id": call,
                    "parent_span_id": root, "start_time_unix_nano": s, "end_time_unix_nano": e,
                    "duration_ms": (e - s) as f64 / 1e6, "target": "troupe_tools::ask",
                    "level": "INFO", "status": "ok",
                    "attributes": { "gen_ai.tool.name": "ask_agent", "gen_ai.agent.name": "coordinator",
                        "gen_ai.tool.call.id": format!("ask_{w}") },
                })
                .to_string(),
            );
            self.out.push('\n');
            let we = e - 500;
            self.out.push_str(
                &serde_json::json!({
                    "type": "span", "name": "invoke_agent", "trace_id": trace,
                    "span_id": worker_span, "parent_span_id": null,
                    "start_time_unix_nano": ws, "end_time_unix_nano": we,
                    "duration_ms": (we - ws) as f64 / 1e6, "target": "troupe_agents::agent",
                    "level": "INFO", "status": "ok",
                    "attributes": { "gen_ai.agent.name": worker, "troupe.from": "coordinator",
                        "troupe.trace_id": trace },
                })
                .to_string(),
            );
            self.out.push('\n');
        }
        let mut parent = root.clone();
        for d in 0..CHAIN_DEPTH {
            let s = self.tick(10);
            parent = self.span(
                "compaction",
                &trace,
                Some(&parent),
                (s, s + 5),
                serde_json::json!({ "gen_ai.agent.name": "compressor", "troupe.level": d }),
                serde_json::json!([]),
            );
        }
        let root_end = self.tick(1_000);
        let root_line = serde_json::json!({
            "type": "span", "name": "invoke_agent", "trace_id": trace, "span_id": root,
            "parent_span_id": null, "start_time_unix_nano": root_start, "end_time_unix_nano": root_end,
            "duration_ms": (root_end - root_start) as f64 / 1e6, "target": "troupe_agents::agent",
            "level": "INFO", "status": "ok",
            "attributes": { "gen_ai.agent.name": "coordinator", "troupe.trace_id": trace },
        });
        lines_after.push_str(&std::mem::take(&mut self.out));
        lines_after.push_str(&root_line.to_string());
        lines_after.push('\n');
        self.out = lines_after;
    }
}

fn generate() -> String {
    let mut g = Generator {
        out: String::with_capacity(TARGET_BYTES + 1024 * 1024),
        next_id: 0,
        clock: 1_700_000_000_000_000_000,
    };
    let mut n = 0;
    while g.out.len() < TARGET_BYTES {
        g.trace(n);
        n += 1;
    }
    g.out
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn follow(path: &Path, text: &[u8]) -> anyhow::Result<usize> {
    let mut file = std::fs::File::create(path)?;
    let mut follower = TraceFollower::new(path);
    for chunk in text.chunks(CHUNK) {
        file.write_all(chunk)?;
        follower.poll()?;
    }
    Ok(render_forest(&build_forest(follower.lines())).len())
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too, once, on less.
    let quick = !std::env::args().any(|a| a == "--bench");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let text = if quick {
        let full = generate();
        let cut = full[..full.len() / 50].rfind('\n').map_or(0, |i| i + 1);
        full[..cut].to_string()
    } else {
        generate()
    };
    std::fs::write(&path, &text)?;
    let spans = text.lines().count();
    println!(
        "trace file: {:.1} MB, {spans} lines",
        text.len() as f64 / 1e6
    );
    let iterations = if quick { 1 } else { ITERATIONS };

    let mut plain = Vec::new();
    let mut rendered = 0;
    for _ in 0..iterations {
        let t = Instant::now();
        rendered = render_file(&path)?.len();
        plain.push(t.elapsed());
    }
    println!(
        "plain render: median {:.3} s over {iterations} (output {:.1} MB); all: {plain:?}",
        median(plain.clone()).as_secs_f64(),
        rendered as f64 / 1e6
    );

    let live = dir.path().join("live.jsonl");
    let mut followed = Vec::new();
    for _ in 0..iterations {
        let t = Instant::now();
        rendered = follow(&live, text.as_bytes())?;
        followed.push(t.elapsed());
    }
    println!(
        "follow (1 MiB chunks, a poll each, one redraw): median {:.3} s over {iterations} (output {:.1} MB); all: {followed:?}",
        median(followed.clone()).as_secs_f64(),
        rendered as f64 / 1e6
    );
    Ok(())
}
