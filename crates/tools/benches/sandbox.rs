//! What confinement costs per command (#53): the `shell` tool running `true` unconfined
//! (`full`) and under each confining policy, interleaved in one run, medians and their
//! differences (goal: under 5 ms per call).
//!
//! Run: `cargo bench -p troupe-tools --bench sandbox` (`TROUPE_BENCH_ROUNDS` sets the rounds,
//! default 300; `TROUPE_BENCH_RESIDENT_MB` makes the process hold that much touched memory
//! first, as a troupe with a loaded model does: a confined command is started with `fork`,
//! whose cost grows with the parent's memory; so, BENCHMARKS.md found, is the unconfined one).
//! Each round runs every variant once, in turn, so a load change on the machine falls on all
//! of them alike.
//!
//! Variants: `full` (what `shell` did before the sandbox: the watchman, `sh -c true`);
//! `workspace-write` in a workspace without `.git` (Landlock and seccomp); `workspace-write` with
//! a `.git` (also a user and mount namespace and a read-only bind mount); `read-only`.

use std::error::Error;
use std::time::Instant;

use troupe_protocol::ToolCall;
use troupe_tools::builtin::{ShellConfig, shell_tool};
use troupe_tools::sandbox::Sandbox;
use troupe_tools::{ToolContext, ToolRegistry};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

struct Variant {
    name: &'static str,
    registry: ToolRegistry,
    ctx: ToolContext,
    ms: Vec<f64>,
}

fn variant(
    name: &'static str,
    sandbox: Sandbox,
    root: &std::path::Path,
) -> Result<Variant, Box<dyn Error>> {
    let mut registry = ToolRegistry::new();
    registry.register(shell_tool(ShellConfig {
        sandbox,
        ..ShellConfig::default()
    }))?;
    Ok(Variant {
        name,
        registry,
        ctx: ToolContext::new("bench", root),
        ms: Vec::new(),
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let rounds: usize = std::env::var("TROUPE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let resident_mb: usize = std::env::var("TROUPE_BENCH_RESIDENT_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // Touched, so its pages are mapped (and their page tables copied by a fork).
    let resident = vec![1u8; resident_mb << 20];
    let plain = tempfile::tempdir()?;
    let with_git = tempfile::tempdir()?;
    std::fs::create_dir(with_git.path().join(".git"))?;
    let mut variants = vec![
        variant("full (unconfined)", Sandbox::full(), plain.path())?,
        variant("workspace-write, no .git", Sandbox::default(), plain.path())?,
        variant(
            "workspace-write, .git kept read-only",
            Sandbox::default(),
            with_git.path(),
        )?,
        variant("read-only", Sandbox::read_only(), plain.path())?,
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let call = ToolCall::new("call_1", "shell", r#"{"command":"true"}"#);
    runtime.block_on(async {
        // Warm up: the first spawns fault in the binaries and the page cache.
        for v in &variants {
            for _ in 0..5 {
                v.registry.dispatch(&call, &v.ctx).await;
            }
        }
        for _ in 0..rounds {
            for v in &mut variants {
                let started = Instant::now();
                let result = v.registry.dispatch(&call, &v.ctx).await;
                v.ms.push(started.elapsed().as_secs_f64() * 1000.0);
                assert!(
                    result.content.starts_with("exit code: 0"),
                    "{}: {}",
                    v.name,
                    result.content
                );
            }
        }
    });
    let base = median(variants[0].ms.clone());
    println!(
        "shell `true`, {rounds} interleaved rounds, {} MiB resident, median per call:",
        resident.len() >> 20
    );
    for v in &variants {
        let m = median(v.ms.clone());
        println!(
            "  {:<40} {:>7.2} ms   confinement {:>+6.2} ms ({:.2}x)",
            v.name,
            m,
            m - base,
            m / base
        );
    }
    Ok(())
}
