//! `troupe node --store postgres://…`: a node's agents keep their session logs in a database
//! (a fresh one per test on the server `.ci/run` starts, `TROUPE_TEST_POSTGRES`; under `CI=true`
//! its absence fails the test). The log outlives the node, `troupe session show` reads it from
//! the store, a second node cannot host the agent while the first holds its lease, and a node
//! started again goes on from the log.

use std::process::Command;

use super::support::chat_server::ChatServer;
use super::support::node_process::{
    COOKIE, ask_over_the_cluster, one_node_at_a_time, start_node_with, write_config,
};

use super::support::backends;

fn ask(addr: std::net::SocketAddr, text: &str) -> String {
    ask_over_the_cluster(addr, "helper", text).unwrap()
}

fn troupe(args: &[&str], pg: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(args)
        .env("TEST_PG", pg)
        .output()
        .unwrap()
}

#[test]
fn a_nodes_agent_keeps_its_log_in_postgres_across_node_restarts() {
    let Some(db) = backends::Database::new() else {
        return;
    };
    let _one = one_node_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let server = ChatServer::start();
    let config = write_config(dir.path(), &server.url);
    let store = ["--store", "env:TEST_PG"];
    let env = [("TEST_PG", db.url.as_str())];
    let (mut node, addr) = start_node_with(&config, &dir.path().join("t1.jsonl"), &store, &env);
    assert_eq!(ask(addr, "remember the word teal"), "reply 1");

    // While it hosts the agent, another node cannot: the log's lease is the first node's.
    let second = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "node",
            "--name",
            "second",
            "--listen",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&config)
        .args(store)
        .env("TEST_PG", &db.url)
        .env("TROUPE_COOKIE", COOKIE)
        .env("TEST_NODE_KEY", "sk-test")
        .output()
        .unwrap();
    assert!(!second.status.success());
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(said.contains("is in use by remote"), "{said}");

    Command::new("kill")
        .arg(node.id().to_string())
        .status()
        .unwrap();
    assert!(node.wait().unwrap().success());

    // The log is in the store, read as a file's would be.
    let shown = troupe(
        &["session", "show", "helper", "--store", "env:TEST_PG"],
        &db.url,
    );
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert!(text.contains("remember the word teal"), "{text}");
    assert!(text.contains("request end"), "{text}");
    assert!(!text.contains("in flight"), "{text}");
    // Not in the working directory: nothing was written beside the config.
    assert!(!dir.path().join("helper.jsonl").exists());
    let missing = troupe(
        &["session", "show", "nobody", "--store", "env:TEST_PG"],
        &db.url,
    );
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no such log"));

    // A node started again goes on from the log: the model sees the first request.
    let (mut node, addr) = start_node_with(&config, &dir.path().join("t2.jsonl"), &store, &env);
    assert_eq!(ask(addr, "which word?"), "reply 2");
    let dialogue = server.dialogue(1).join("\n");
    assert!(dialogue.contains("remember the word teal"), "{dialogue}");
    Command::new("kill")
        .arg(node.id().to_string())
        .status()
        .unwrap();
    assert!(node.wait().unwrap().success());
}

#[test]
fn a_store_the_node_cannot_use_fails_it_before_it_hosts_anything() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let run = |store: &str| {
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args(["node", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .args(["--store", store])
            .env("TROUPE_COOKIE", COOKIE)
            .env("TEST_NODE_KEY", "sk-test")
            .env_remove("TEST_PG_UNSET")
            .output()
            .unwrap()
    };
    let unreachable = run("postgres://troupe:s3cret@127.0.0.1:1/db");
    assert!(!unreachable.status.success());
    let said = String::from_utf8_lossy(&unreachable.stderr);
    assert!(
        said.contains("cannot open the session store postgres://troupe@127.0.0.1:1/db"),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
    assert!(!String::from_utf8_lossy(&unreachable.stdout).contains("READY"));
    let unset = run("env:TEST_PG_UNSET");
    assert!(String::from_utf8_lossy(&unset.stderr).contains("$TEST_PG_UNSET is unset"));
    let bad = run("mysql://x");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("`mysql` is not a store"));
}
