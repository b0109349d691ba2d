//! Many idle agents: spawn time and memory per agent, troupe against raw tokio and raw ractor.

use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use troupe_runtime::{Team, TeamConfig};

use crate::common::heap::{live_bytes, rss_bytes};
use crate::common::raw::{EchoMsg, Ping, RactorEcho, tokio_echo};
use crate::common::{echo_factory, median};
use crate::{WAYS, Way};

/// Spawn time, heap and RSS bytes per agent of one round of `n` idle agents.
struct IdleRound {
    spawn_ms: f64,
    heap_per_agent: f64,
    rss_per_agent: f64,
}

/// Spawn `n` idle agents one way, check the last one answers, measure, tear down.
async fn idle_round(n: usize, way: Way) -> IdleRound {
    let settle = Duration::from_millis(200);
    match way {
        Way::Troupe => {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let factory = echo_factory();
            team.spawn("warm-up", factory.clone()).await.unwrap();
            team.ask("warm-up", "hi").await.unwrap();
            let names: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
            let heap_before = live_bytes();
            let rss_before = rss_bytes();
            let started = Instant::now();
            let results = team
                .spawn_many(names.into_iter().map(|name| (name, factory.clone())))
                .await
                .unwrap();
            let spawn_ms = started.elapsed().as_secs_f64() * 1000.0;
            assert!(results.iter().all(Result::is_ok));
            team.ask(&format!("a{}", n - 1), "up?").await.unwrap();
            tokio::time::sleep(settle).await;
            let round = measured(n, spawn_ms, heap_before, rss_before);
            team.shutdown().await;
            round
        }
        Way::Tokio => {
            let heap_before = live_bytes();
            let rss_before = rss_bytes();
            let started = Instant::now();
            let mut senders = Vec::with_capacity(n);
            let mut tasks = Vec::with_capacity(n);
            for _ in 0..n {
                let (tx, rx) = mpsc::unbounded_channel::<EchoMsg>();
                tasks.push(tokio::spawn(tokio_echo(rx)));
                senders.push(tx);
            }
            let spawn_ms = started.elapsed().as_secs_f64() * 1000.0;
            let (reply, answer) = oneshot::channel();
            senders[n - 1].send(("up?".into(), reply)).unwrap();
            answer.await.unwrap();
            tokio::time::sleep(settle).await;
            let round = measured(n, spawn_ms, heap_before, rss_before);
            drop(senders);
            for task in tasks {
                task.await.unwrap();
            }
            round
        }
        Way::Ractor => {
            let heap_before = live_bytes();
            let rss_before = rss_bytes();
            let started = Instant::now();
            let mut actors = Vec::with_capacity(n);
            for _ in 0..n {
                actors.push(ractor::Actor::spawn(None, RactorEcho, ()).await.unwrap());
            }
            let spawn_ms = started.elapsed().as_secs_f64() * 1000.0;
            let last = &actors[n - 1].0;
            let answer = last
                .call(|reply| Ping("up?".into(), reply), None)
                .await
                .unwrap();
            assert!(answer.is_success());
            tokio::time::sleep(settle).await;
            let round = measured(n, spawn_ms, heap_before, rss_before);
            for (actor, _) in &actors {
                actor.stop(None);
            }
            for (_, handle) in actors {
                handle.await.unwrap();
            }
            round
        }
    }
}

fn measured(n: usize, spawn_ms: f64, heap_before: isize, rss_before: usize) -> IdleRound {
    IdleRound {
        spawn_ms,
        heap_per_agent: (live_bytes() - heap_before) as f64 / n as f64,
        rss_per_agent: rss_bytes().saturating_sub(rss_before) as f64 / n as f64,
    }
}

pub(crate) fn report(rt: &tokio::runtime::Runtime, n: usize, rounds: usize) {
    let mut spawn_ms = vec![Vec::new(); WAYS.len()];
    let mut memory = vec![(0.0, 0.0); WAYS.len()];
    for round in 0..rounds {
        for (i, (_, way)) in WAYS.iter().enumerate() {
            let result = rt.block_on(idle_round(n, *way));
            spawn_ms[i].push(result.spawn_ms);
            if round == 0 {
                memory[i] = (result.heap_per_agent, result.rss_per_agent);
            }
        }
    }
    println!("idle agents: {n}, {rounds} rounds, ways interleaved");
    println!("| way | spawn median | per agent | heap per agent | RSS per agent |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (i, (label, _)) in WAYS.iter().enumerate() {
        let m = median(spawn_ms[i].clone());
        println!(
            "| {label} | {m:.1} ms | {:.2} µs | {:.2} KiB | {:.2} KiB |",
            m * 1000.0 / n as f64,
            memory[i].0 / 1024.0,
            memory[i].1 / 1024.0,
        );
    }
}
