//! `troupe a2a serve --allow-origin` in a real browser (Debian's chromium, driven by the PyPI
//! `selenium` package, as the live view's test drives it: `tests/browser/a2a_origin.py`): the
//! allowed origin's page calls the agent with a real CORS preflight and is answered; another
//! origin's fetch is refused, and its text/plain form post and no-cors post run nothing.
//!
//! Without chromium, chromedriver or selenium the test fails under CI (`CI` set) and is
//! skipped, loudly, elsewhere.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};

use serde_json::json;

use super::support::a2a_process::A2aProcess;
use super::support::chat::{completions_server, write_config};

/// The selenium Python and what is missing to run it: the live view's test's helper.
#[path = "../../crates/ui/tests/suite/selenium_python.rs"]
mod selenium_python;
use selenium_python::{missing, python};

#[test]
fn an_allowed_origin_calls_the_agent_from_a_browser_and_no_other_does() {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the A2A browser test cannot run under CI: {why}"
        );
        eprintln!("SKIPPED an_allowed_origin_calls_the_agent_from_a_browser: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (url, requests) = completions_server(|_, n| {
        (
            json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        )
    });
    let config = write_config(dir.path(), &url);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/a2a_origin.py");
    let mut browser = Command::new(python())
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = BufReader::new(browser.stdout.take().unwrap());
    let mut pages = String::new();
    said.read_line(&mut pages).unwrap();
    let ports: Vec<&str> = pages
        .trim()
        .strip_prefix("PAGES ")
        .unwrap_or_else(|| panic!("{pages:?}"))
        .split(' ')
        .collect();
    let allowed = format!("http://127.0.0.1:{}", ports[0]);
    let server = A2aProcess::start(&config, &["--allow-origin", &allowed], &[]);
    let key = server.key.clone().unwrap();
    let mut stdin = browser.stdin.take().unwrap();
    writeln!(stdin, "AGENT http://{}/agents/assistant {key}", server.addr).unwrap();
    drop(stdin);
    let mut lines = Vec::new();
    for line in said.lines() {
        lines.push(line.unwrap());
    }
    let out = browser.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{lines:#?}\n{stderr}");
    assert_eq!(lines.len(), 4, "{lines:#?}");
    // Only the allowed page's message reached the agent.
    assert_eq!(requests.lock().unwrap().len(), 1, "{lines:#?}");
    let listed = server.rpc("assistant", "ListTasks", json!({}));
    assert_eq!(listed["result"]["totalSize"], 1, "{listed}");
    let asked = listed["result"]["tasks"][0]["history"][0]["parts"][0]["text"].clone();
    assert_eq!(asked, "from the app", "{listed}");
}
