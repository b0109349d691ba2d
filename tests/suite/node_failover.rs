//! When a machine dies (#55): three `troupe node`s on one Postgres (`TROUPE_TEST_POSTGRES`; under
//! `CI=true` its absence fails the test), a scripted model on the OpenAI wire counting its
//! calls. Node B hosts `worker`, A and C stand by for it (`--standby worker`). A ten-step
//! request — its opening, five model calls, four tool runs — is asked of `worker` by `boss`, an
//! agent on A (its `ask_agent` tool), and B is SIGKILLed at each step in turn: each time A or C
//! takes the log over once its lease ran out, resumes the request from its last committed step,
//! and `boss`, its ask retried under the same request id to the new home (C, or its own node A),
//! gets the answer; each model call is made once, each tool runs once, and the log loads from
//! the store.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::support::chat::{runs, write_config_with};
use super::support::node_process::{COOKIE, NodeProcess, one_node_at_a_time, wait_ready};
use super::support::ten_steps::{ANSWER, CALLS, Calls, DELEGATING_MODEL, server, wait_until};

use super::support::backends;

/// `troupe node --name NAME` on `config` with the store and short leases; its `READY` address.
fn node(name: &str, config: &Path, db: &str, extra: &[String]) -> (NodeProcess, SocketAddr) {
    node_logging(name, config, db, extra, Stdio::null())
}

/// [`node`] with its stderr going to `stderr`.
fn node_logging(
    name: &str,
    config: &Path,
    db: &str,
    extra: &[String],
    stderr: Stdio,
) -> (NodeProcess, SocketAddr) {
    let child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "node",
            "--name",
            name,
            "--listen",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(config)
        .args(["--store", "env:TEST_PG", "--lease-ms", "900"])
        .args(extra)
        .env("TEST_PG", db)
        .env("TROUPE_COOKIE", COOKIE)
        .env("TEST_CHAT_KEY", "sk-test")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    wait_ready(child)
}

/// Ask `agent` from a node of this process connected to `nodes`, waiting up to `failover` for
/// its new home when its node goes away.
fn ask_from_here(
    agent: &'static str,
    nodes: Vec<SocketAddr>,
    failover: Duration,
) -> std::thread::JoinHandle<Result<String, troupe::AskError>> {
    std::thread::spawn(move || {
        use troupe::cluster::{ClusterNode, NodeConfig};
        use troupe::{AgentRequest, Team, TeamConfig};
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let team = Team::start(TeamConfig::default()).await.unwrap();
                let config = NodeConfig {
                    failover,
                    ..NodeConfig::new("caller", COOKIE)
                };
                let node = ClusterNode::start(&team, config).await.unwrap();
                for addr in nodes {
                    node.connect(addr).await.unwrap();
                }
                let answer = team
                    .ask_with(
                        agent,
                        AgentRequest::from_user("go"),
                        Duration::from_secs(120),
                    )
                    .await;
                node.shutdown().await;
                team.shutdown().await;
                answer
            })
    })
}

/// A config whose one agent is `worker`, with the `shell` tool, on the model at `url`.
fn worker_config(dir: &Path, url: &str) -> std::path::PathBuf {
    let config = write_config_with(dir, url, "[]");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("[agents.assistant]", "[agents.worker]"),
    )
    .unwrap();
    config
}

/// Node A's config: `worker` (which A stands by for) and `boss`, who asks `worker` with its
/// `ask_agent` tool.
fn boss_config(dir: &Path, worker_config: &Path, url: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(worker_config).unwrap();
    let config = dir.join("troupe-a.toml");
    let boss = format!(
        r#"
[models.delegating]
provider = "openai"
base_url = "{url}"
api_key_env = "TEST_CHAT_KEY"
model = "{DELEGATING_MODEL}"
context_window = 8000

[agents.boss]
model = "delegating"
instructions = "Ask worker."
team_messaging = true
"#
    );
    std::fs::write(&config, text + &boss).unwrap();
    config
}

/// One run's world: a database of its own, a directory, the scripted model counting its calls
/// and the workers' configuration naming it.
struct World {
    db: backends::Database,
    dir: tempfile::TempDir,
    calls: Arc<Calls>,
    config: std::path::PathBuf,
    /// The scripted model's base URL.
    url: String,
}

/// A fresh [`World`]; `None` when no Postgres is configured (the tests then skip).
fn world() -> Option<World> {
    let db = backends::Database::new()?;
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(Calls::default());
    let url = server(calls.clone()).0;
    let config = worker_config(dir.path(), &url);
    Some(World {
        db,
        dir,
        calls,
        config,
        url,
    })
}

/// The arguments of a node standing by for `worker`, connected to `to`.
fn standby(to: &[SocketAddr]) -> Vec<String> {
    let mut args = vec!["--standby".to_string(), "worker".to_string()];
    for addr in to {
        args.extend(["--connect".to_string(), addr.to_string()]);
    }
    args
}

/// `troupe session show worker` from the store: it loads, nothing in flight, `CALLS` model calls.
fn assert_log_loads(db: &str, what: &str) {
    let shown = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["session", "show", "worker", "--store", "env:TEST_PG"])
        .env("TEST_PG", db)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.status.success(), "{what}: the log does not load");
    assert!(!listed.contains("in flight"), "{what}: {listed}");
    assert_eq!(
        listed.matches("model call").count(),
        CALLS,
        "{what}: {listed}"
    );
}

/// The epoch each commit of `worker`'s log was written under, in order, and the lease's.
fn epochs(db: &str) -> (Vec<i64>, i64) {
    let out = Arc::new(Mutex::new((Vec::new(), 0)));
    let into = out.clone();
    backends::sql(db, move |client| {
        Box::pin(async move {
            let rows = client
                .query(
                    "SELECT epoch FROM troupe_session_commits WHERE log = 'worker' ORDER BY seq",
                    &[],
                )
                .await
                .unwrap();
            let lease = client
                .query_opt(
                    "SELECT epoch FROM troupe_session_leases WHERE log = 'worker'",
                    &[],
                )
                .await
                .unwrap()
                .map_or(0, |row| row.get(0));
            *into.lock().unwrap() = (rows.iter().map(|r| r.get(0)).collect(), lease);
        })
    });
    Arc::try_unwrap(out).unwrap().into_inner().unwrap()
}

#[test]
fn a_node_frozen_past_its_lease_is_fenced_when_it_wakes_and_the_log_keeps_one_history() {
    let _one = one_node_at_a_time();
    let Some(World {
        db,
        dir,
        calls,
        config,
        ..
    }) = world()
    else {
        return;
    };
    let b_log = dir.path().join("b.log");
    let b_err = Stdio::from(std::fs::File::create(&b_log).unwrap());
    let (b, b_addr) = node_logging("b", &config, &db.url, &[], b_err);
    let (_c, c_addr) = node("c", &config, &db.url, &standby(&[b_addr]));
    // B's second model call is in flight when B freezes.
    calls.hold.store(2, Ordering::SeqCst);
    let asked = ask_from_here("worker", vec![b_addr, c_addr], Duration::from_secs(60));
    wait_until("the model call is held", || {
        calls.holding.load(Ordering::SeqCst)
    });
    b.signal_stop();
    // C takes the log over once B's lease ran out (epoch 2)...
    let started = Instant::now();
    while epochs(&db.url).1 < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "C never took over"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // ...and B's held call is answered while B is frozen: it reads it only once it wakes.
    calls.release.store(true, Ordering::SeqCst);
    let answer = asked.join().unwrap();
    assert_eq!(answer.as_deref(), Ok(ANSWER));
    b.signal_cont();
    // B commits the answer it got, is refused by the epoch, and lets the agent go.
    wait_until("B is fenced", || {
        std::fs::read_to_string(&b_log)
            .unwrap_or_default()
            .contains("another owner holds the session log now")
    });
    let (commits, lease) = epochs(&db.url);
    assert_eq!(lease, 2);
    assert!(commits.windows(2).all(|w| w[0] <= w[1]), "{commits:?}");
    assert!(commits.contains(&1) && commits.contains(&2), "{commits:?}");
    assert_eq!(*calls.answered.lock().unwrap(), [1; CALLS]);
    let expected: String = (1..CALLS).map(|j| format!("t{j}\n")).collect();
    assert_eq!(runs(dir.path()), expected);
    assert_log_loads(&db.url, "after the partition");
}

#[test]
fn a_request_whose_node_is_killed_at_each_step_finishes_on_another_with_no_step_done_twice() {
    let _one = one_node_at_a_time();
    for step in 1..=10usize {
        let Some(World {
            db,
            dir,
            calls,
            config,
            url,
        }) = world()
        else {
            return;
        };
        let (mut b, b_addr) = node("b", &config, &db.url, &[]);
        // A hosts `boss`, whose asks wait up to a minute for a lost agent's new home.
        let mut on_a = standby(&[b_addr]);
        on_a.extend(["--failover-ms".to_string(), "60000".to_string()]);
        let (_a, a_addr) = node("a", &boss_config(dir.path(), &config, &url), &db.url, &on_a);
        let (_c, _) = node("c", &config, &db.url, &standby(&[b_addr, a_addr]));

        let tool = (step % 2 == 0 && step < 10).then_some(step / 2);
        if step % 2 == 1 {
            calls.hold.store(step.div_ceil(2), Ordering::SeqCst);
        }
        if let Some(j) = tool {
            std::fs::write(dir.path().join(format!("hold-{j}")), "").unwrap();
        }
        // The caller is `boss` on A: the test only asks it and reads what it was told.
        let mut asked = Some(ask_from_here("boss", vec![a_addr], Duration::ZERO));
        let mut answer = None;
        match tool {
            Some(j) => wait_until(&format!("tool {j} runs"), || {
                runs(dir.path()).contains(&format!("t{j}\n"))
            }),
            // After the answer: the caller has it, so its commit is in the log.
            None if step == 10 => answer = asked.take().map(|a| a.join().unwrap()),
            None => wait_until("the model call is held", || {
                calls.holding.load(Ordering::SeqCst)
            }),
        }
        b.kill().unwrap();
        b.wait().unwrap();
        calls.release.store(true, Ordering::SeqCst);
        if let Some(j) = tool {
            std::fs::remove_file(dir.path().join(format!("hold-{j}"))).unwrap();
        }

        let answer = answer.or_else(|| asked.map(|a| a.join().unwrap())).unwrap();
        assert_eq!(answer.as_deref(), Ok(ANSWER), "step {step}");
        let answered = *calls.answered.lock().unwrap();
        assert_eq!(answered, [1; CALLS], "step {step}: each model call once");
        let expected: String = (1..CALLS).map(|j| format!("t{j}\n")).collect();
        assert_eq!(runs(dir.path()), expected, "step {step}: each tool once");

        assert_log_loads(&db.url, &format!("step {step}"));
    }
}
