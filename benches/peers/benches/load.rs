//! N concurrent requests of a two-tool agent (10, 100, 1 000 at once) against one OpenAI-wire
//! server on loopback that answers after a fixed delay (0, 50 ms, 1 s) and streams; troupe
//! (its lean road and its full road), rig, AutoAgents and raw ractor, interleaved in one run.
//!
//! Run: `cd benches/peers && cargo bench --bench load -- --json` (the whole grid, 3 rounds);
//! `TROUPE_LOAD_QUICK=1` runs delays 0 and 50 ms, one round. `TROUPE_LOAD_ROUNDS`,
//! `TROUPE_LOAD_CONCURRENCY` (`10,100`) and `TROUPE_LOAD_DELAYS` (`0,50`) override the grid;
//! `TROUPE_LOAD_FRAMEWORKS` (`troupe-lean,ractor`) runs only those (to profile one, say).
//!
//! This process serves the model; each framework at each point runs in a child process of its
//! own (this binary with `--child`), so its CPU time and peak RSS are its alone. A child builds
//! what every request shares and sends one request — its arrival at the server, measured from
//! the spawn, is the cold start — then builds the measured requests' conversations (untimed),
//! starts all N at once (a task each) and reports each request's latency, the wall time, its CPU
//! time over the requests and its peak RSS. Rows are medians over the rounds; the frameworks'
//! order rotates from point to point and round to round. Prints a markdown table per point and,
//! last, one JSON line `{"rows": [...]}`.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe_peers_bench::load::autoagents_load::AutoAgentsLoad;
use troupe_peers_bench::load::measure::{cpu_time, peak_rss_mb};
use troupe_peers_bench::load::ractor_load::RactorLoad;
use troupe_peers_bench::load::rig_load::RigLoad;
use troupe_peers_bench::load::server::LoadServer;
use troupe_peers_bench::load::troupe_load::TroupeLoad;
use troupe_peers_bench::load::{ChildReport, Framework, Row, median, quantile};

/// How long a child may take before it is killed and its point reported as failed.
const CHILD_DEADLINE: Duration = Duration::from_secs(300);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = args.iter().position(|a| a == "--child") {
        child(&args[at + 1..]);
        return;
    }
    // `cargo bench` passes `--bench`; a filter that excludes us skips the measurement.
    if args
        .iter()
        .any(|a| !a.starts_with('-') && !"load".contains(a.as_str()))
    {
        return;
    }
    let json = args.iter().any(|a| a == "--json");
    let quick = std::env::var("TROUPE_LOAD_QUICK").is_ok_and(|v| v == "1");
    let list = |name: &str, default: &[u64]| -> Vec<u64> {
        std::env::var(name)
            .ok()
            .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
            .unwrap_or_else(|| default.to_vec())
    };
    let concurrency = list("TROUPE_LOAD_CONCURRENCY", &[10, 100, 1000]);
    let delays = list(
        "TROUPE_LOAD_DELAYS",
        if quick { &[0, 50] } else { &[0, 50, 1000] },
    );
    let rounds = list("TROUPE_LOAD_ROUNDS", if quick { &[1] } else { &[3] })[0].max(1) as usize;
    let frameworks: Vec<Framework> = match std::env::var("TROUPE_LOAD_FRAMEWORKS") {
        Ok(names) => names
            .split(',')
            .map(|name| {
                Framework::parse(name.trim()).unwrap_or_else(|| {
                    panic!("TROUPE_LOAD_FRAMEWORKS: no framework `{name}` (troupe-lean, troupe-full, rig, autoagents, ractor)")
                })
            })
            .collect(),
        Err(_) => Framework::ALL.to_vec(),
    };
    let points: Vec<(usize, u64)> = delays
        .iter()
        .flat_map(|&d| concurrency.iter().map(move |&n| (n as usize, d)))
        .collect();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let server = rt.block_on(LoadServer::start()).expect("the server");
    eprintln!(
        "load: {} points x {} frameworks x {rounds} rounds, server {} (load average {})",
        points.len(),
        frameworks.len(),
        server.base_url,
        loadavg()
    );
    let started = Instant::now();
    let mut samples: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); frameworks.len()]; points.len()];
    for round in 0..rounds {
        for (p, &(n, delay_ms)) in points.iter().enumerate() {
            for k in 0..frameworks.len() {
                let f = (k + p + round) % frameworks.len();
                let sample = run_child(&server, frameworks[f], n, delay_ms);
                eprintln!(
                    "  round {round} n={n} delay={delay_ms}ms {:<12} {}",
                    frameworks[f].name(),
                    sample.summary()
                );
                samples[p][f].push(sample);
            }
        }
    }
    let (served, refused) = server.counts();
    eprintln!(
        "load: done in {:.0} s; the server answered {served} requests, refused {refused}; load average {}",
        started.elapsed().as_secs_f64(),
        loadavg()
    );
    let mut rows = Vec::new();
    for (p, &(n, delay_ms)) in points.iter().enumerate() {
        println!(
            "\n{n} concurrent requests, server delay {delay_ms} ms ({rounds} rounds, medians):\n"
        );
        println!(
            "| framework | req/s | p50 added ms | p99 added ms | peak RSS MB | CPU ms/req | cold start ms | failed |"
        );
        println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        for (f, framework) in frameworks.iter().enumerate() {
            let row = aggregate(*framework, n, delay_ms, &samples[p][f]);
            println!(
                "| {} | {:.1} | {:.2} | {:.2} | {:.1} | {:.3} | {:.1} | {} |",
                row.framework,
                row.req_per_s,
                row.p50_added_ms,
                row.p99_added_ms,
                row.peak_rss_mb,
                row.cpu_s_per_req * 1e3,
                row.cold_start_ms,
                row.failed
            );
            rows.push(row);
        }
    }
    if json {
        println!(
            "{}",
            serde_json::json!({ "rows": rows, "load_average": loadavg(), "rounds": rounds })
        );
    }
}

/// One child's measurement, or why there is none.
#[derive(Clone)]
struct Sample {
    report: Option<ChildReport>,
    cold_start_ms: Option<f64>,
    error: Option<String>,
}

impl Sample {
    fn summary(&self) -> String {
        match (&self.report, &self.error) {
            (Some(r), _) => format!(
                "{:.1} req/s, p99 {:.1} ms, {:.1} MB, cold {:.1} ms, {} failed{}",
                r.ok as f64 / r.wall_s.max(1e-9),
                quantile(&r.latencies_ms, 0.99),
                r.peak_rss_mb,
                self.cold_start_ms.unwrap_or(f64::NAN),
                r.failed,
                r.first_error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ),
            (None, Some(e)) => format!("FAILED: {e}"),
            (None, None) => "FAILED".into(),
        }
    }
}

fn aggregate(framework: Framework, n: usize, delay_ms: u64, samples: &[Sample]) -> Row {
    let reports: Vec<&ChildReport> = samples.iter().filter_map(|s| s.report.as_ref()).collect();
    let added = 2.0 * delay_ms as f64;
    let of = |f: &dyn Fn(&ChildReport) -> f64| median(reports.iter().map(|r| f(r)).collect());
    Row {
        framework: framework.name().to_string(),
        concurrency: n,
        delay_ms,
        req_per_s: of(&|r| r.ok as f64 / r.wall_s.max(1e-9)),
        p50_added_ms: of(&|r| quantile(&r.latencies_ms, 0.5) - added),
        p99_added_ms: of(&|r| quantile(&r.latencies_ms, 0.99) - added),
        peak_rss_mb: of(&|r| r.peak_rss_mb),
        cpu_s_per_req: of(&|r| r.cpu_s / (r.ok + r.failed).max(1) as f64),
        cold_start_ms: median(samples.iter().filter_map(|s| s.cold_start_ms).collect()),
        rounds: reports.len(),
        failed: reports.iter().map(|r| r.failed).sum::<usize>()
            + samples.iter().filter(|s| s.report.is_none()).count() * n,
    }
}

/// Spawn this binary as `framework`'s child for one point and collect its report.
fn run_child(server: &LoadServer, framework: Framework, n: usize, delay_ms: u64) -> Sample {
    server.begin_run(Duration::from_millis(delay_ms));
    let exe = std::env::current_exe().expect("this binary");
    let spawned = Instant::now();
    let child = Command::new(exe)
        .args([
            "--child",
            framework.name(),
            &n.to_string(),
            &delay_ms.to_string(),
            &server.base_url,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return failed(format!("spawn: {e}")),
    };
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let deadline = spawned + CHILD_DEADLINE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = reader.join().unwrap_or_default();
    let cold_start_ms = server
        .first_arrival()
        .map(|t| t.saturating_duration_since(spawned).as_secs_f64() * 1e3);
    match status {
        None => failed(format!("killed after {} s", CHILD_DEADLINE.as_secs())),
        Some(status) if !status.success() => failed(format!("exited with {status}")),
        Some(_) => match text
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<ChildReport>(l).ok())
        {
            Some(report) => Sample {
                report: Some(report),
                cold_start_ms,
                error: None,
            },
            None => failed("no report on stdout".into()),
        },
    }
}

fn failed(error: String) -> Sample {
    Sample {
        report: None,
        cold_start_ms: None,
        error: Some(error),
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The framework under measurement, in the child.
enum Load {
    Troupe(TroupeLoad),
    // Boxed: rig's agent is by far the largest of the four.
    Rig(Box<RigLoad>),
    AutoAgents(AutoAgentsLoad),
    Ractor(RactorLoad),
}

impl Load {
    async fn start(framework: Framework, base_url: &str, dir: PathBuf) -> Load {
        match framework {
            Framework::TroupeLean => Load::Troupe(TroupeLoad::start(base_url, false, dir).await),
            Framework::TroupeFull => Load::Troupe(TroupeLoad::start(base_url, true, dir).await),
            Framework::Rig => Load::Rig(Box::new(RigLoad::start(base_url))),
            Framework::AutoAgents => Load::AutoAgents(AutoAgentsLoad::start(base_url).await),
            Framework::Ractor => Load::Ractor(RactorLoad::start(base_url).await),
        }
    }

    async fn prepare(&mut self, n: usize) {
        match self {
            Load::Troupe(load) => load.prepare(n).await,
            Load::Rig(_) => {}
            Load::AutoAgents(load) => load.prepare(n).await,
            Load::Ractor(load) => load.prepare(n).await,
        }
    }

    async fn request(&self, i: usize) -> Result<(), String> {
        match self {
            Load::Troupe(load) => load.request(i).await,
            Load::Rig(load) => load.request().await,
            Load::AutoAgents(load) => load.request(i).await,
            Load::Ractor(load) => load.request(i).await,
        }
    }

    async fn shutdown(self) {
        match self {
            Load::Troupe(load) => load.shutdown().await,
            Load::Ractor(load) => load.shutdown(),
            Load::Rig(_) | Load::AutoAgents(_) => {}
        }
    }
}

/// The child: `--child FRAMEWORK N DELAY_MS BASE_URL`; prints its [`ChildReport`] as JSON.
fn child(args: &[String]) {
    let framework = Framework::parse(&args[0]).expect("a framework name");
    let n: usize = args[1].parse().expect("a request count");
    let delay_ms: u64 = args[2].parse().expect("a delay");
    let base_url = args[3].clone();
    let _ = delay_ms;
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("load-{}", std::process::id()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let report = rt.block_on(async {
        let mut load = Load::start(framework, &base_url, dir).await;
        if let Err(e) = load.request(0).await {
            panic!("{}: the first request failed: {e}", framework.name());
        }
        load.prepare(n).await;
        let load = Arc::new(load);
        let cpu_before = cpu_time();
        let started = Instant::now();
        let tasks: Vec<_> = (1..=n)
            .map(|i| {
                let load = Arc::clone(&load);
                tokio::spawn(async move {
                    let start = Instant::now();
                    let result = load.request(i).await;
                    (start.elapsed(), result)
                })
            })
            .collect();
        let mut latencies_ms = Vec::with_capacity(n);
        let (mut failed, mut first_error) = (0, None);
        for task in tasks {
            match task.await {
                Ok((elapsed, Ok(()))) => latencies_ms.push(elapsed.as_secs_f64() * 1e3),
                Ok((_, Err(e))) => {
                    failed += 1;
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    failed += 1;
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
        let wall_s = started.elapsed().as_secs_f64();
        let cpu_s = (cpu_time() - cpu_before).as_secs_f64();
        let peak_rss_mb = peak_rss_mb();
        latencies_ms.sort_by(f64::total_cmp);
        if let Ok(load) = Arc::try_unwrap(load) {
            load.shutdown().await;
        }
        ChildReport {
            ok: latencies_ms.len(),
            failed,
            first_error,
            wall_s,
            latencies_ms,
            cpu_s,
            peak_rss_mb,
        }
    });
    println!("{}", serde_json::to_string(&report).expect("a report"));
}
