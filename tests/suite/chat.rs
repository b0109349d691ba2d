//! `troupe chat` end to end: an OpenAI-compatible server on 127.0.0.1, a session log that the
//! next run resumes, `/context`, `/clear`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::support::chat::{spawn_chat, write_config};
use super::support::chat_server::{ChatServer, gated_stream_server};

fn chat(config: &Path, session: &Path, input: &str) -> String {
    let mut child = spawn_chat(config, session);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn chat_keeps_a_session_that_the_next_run_resumes() {
    let server = ChatServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let session = dir.path().join("work.jsonl");

    let out = chat(&config, &session, "hello\n/context\nsecond\n/exit\n");
    assert!(out.contains("reply 1") && out.contains("reply 2"), "{out}");
    assert!(out.contains("[ctx: "), "no status line: {out}");
    assert!(out.contains("tokens "), "no /context output: {out}");
    assert!(out.contains("by role:"), "no per-role breakdown: {out}");
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("user") && l.contains(" 1 msg")),
        "no user share: {out}"
    );
    assert_eq!(server.dialogue(1), ["hello", "reply 1", "second"]);

    // A second run picks the conversation up where it ended.
    let out = chat(&config, &session, "third\n/exit\n");
    assert!(out.contains("resumed"), "{out}");
    assert!(out.contains("reply 3"), "{out}");
    assert_eq!(
        server.dialogue(2),
        ["hello", "reply 1", "second", "reply 2", "third"]
    );

    // /clear starts over, and the cleared state is what the next run resumes.
    let out = chat(&config, &session, "/clear\nfourth\n/exit\n");
    assert!(out.contains("conversation cleared"), "{out}");
    assert_eq!(server.dialogue(3), ["fourth"]);
    chat(&config, &session, "fifth\n/exit\n");
    assert_eq!(server.dialogue(4), ["fourth", "reply 4", "fifth"]);
    assert_eq!(server.count(), 5);

    let logged = troupe::session::load(&session).unwrap();
    assert!(logged.warnings.is_empty(), "{:?}", logged.warnings);
    assert_eq!(logged.agent.as_deref(), Some("assistant"));
}

/// `/resume SESSION` moves the running chat to another log (the agent switches, the team stays);
/// a log it cannot take is refused with its reason and changes nothing.
#[test]
fn resume_moves_the_chat_to_another_session_and_a_bad_one_changes_nothing() {
    let server = ChatServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    chat(&config, &b, "in b\n/exit\n");

    let script = format!(
        "in a\n/resume {}\nafter\n/resume {}\nstill\n/exit\n",
        b.display(),
        bad.display()
    );
    let out = chat(&config, &a, &script);
    assert!(
        out.contains(&format!("resumed {} (3 messages)", b.display())),
        "{out}"
    );
    assert!(
        out.contains("cannot resume") && out.contains("bad.jsonl:1"),
        "{out}"
    );
    assert_eq!(server.dialogue(2), ["in b", "reply 1", "after"]);
    assert_eq!(
        server.dialogue(3),
        ["in b", "reply 1", "after", "reply 3", "still"]
    );
    let texts = |path: &Path| -> Vec<String> {
        troupe::session::load(path)
            .unwrap()
            .conversation
            .messages()
            .iter()
            .filter(|m| m.role != troupe::protocol::Role::System)
            .map(|m| m.text())
            .collect()
    };
    assert_eq!(texts(&a), ["in a", "reply 2"]);
    assert_eq!(
        texts(&b),
        ["in b", "reply 1", "after", "reply 3", "still", "reply 4"]
    );
    assert_eq!(std::fs::read_to_string(&bad).unwrap(), "not json\n");
}

/// `troupe chat` prints the answer as it is generated: the first piece shows while the model
/// (a server holding the rest back until the test has seen it) is still generating.
#[test]
fn chat_prints_the_first_delta_before_the_model_has_finished() {
    let (url, release) = gated_stream_server("Streaming ", "works.");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url);
    let mut child = spawn_chat(&config, &dir.path().join("s.jsonl"));
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (printed, output) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0
                || printed
                    .send(String::from_utf8_lossy(&buffer[..n]).into())
                    .is_err()
            {
                break;
            }
        }
    });
    writeln!(stdin, "hello").unwrap();
    let mut seen = String::new();
    while !seen.contains("Streaming") {
        match output.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(text) => seen.push_str(&text),
            Err(_) => panic!("nothing of the answer was printed before its end: {seen:?}"),
        }
    }
    assert!(!seen.contains("works."), "{seen}");
    release.send(()).unwrap();
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    while let Ok(text) = output.recv_timeout(std::time::Duration::from_secs(60)) {
        seen.push_str(&text);
    }
    assert!(child.wait().unwrap().success(), "{seen}");
    assert!(seen.contains("Streaming works."), "{seen}");
}

#[test]
fn chat_refuses_a_corrupt_session_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("bad.jsonl");
    let text =
        "{\"type\":\"session\",\"version\":1,\"created_ms\":1}\nnot json\n{\"type\":\"commit\"}\n";
    std::fs::write(&session, text).unwrap();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        "[models.remote]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
    )
    .unwrap();
    let output = spawn_chat(&config, &session).wait_with_output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.jsonl:2"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&session).unwrap(), text);
}

#[test]
fn ctrl_c_cancels_the_running_request_not_the_program() {
    let server = ChatServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let session = dir.path().join("work.jsonl");
    let mut child = spawn_chat(&config, &session);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "first").unwrap();
    writeln!(stdin, "a slow one").unwrap();
    let started = std::time::Instant::now();
    while server.count() < 2 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the slow request never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    writeln!(stdin, "after").unwrap();
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("(request cancelled)"), "{stdout}");
    assert!(stdout.contains("reply 3"), "{stdout}");
    // The cancelled request left no trace: the next one continues from the first.
    assert_eq!(server.dialogue(2), ["first", "reply 1", "after"]);
    let logged = troupe::session::load(&session).unwrap();
    let texts: Vec<String> = logged
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert!(!texts.iter().any(|t| t.contains("slow")), "{texts:?}");
}

#[test]
fn a_second_chat_on_the_same_session_is_refused_naming_the_first() {
    let server = ChatServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let session = dir.path().join("work.jsonl");
    let mut first = spawn_chat(&config, &session);
    let mut stdin = first.stdin.take().unwrap();
    let mut stdout = BufReader::new(first.stdout.take().unwrap());
    // Wait until the first chat has opened the session (its banner comes after).
    let mut banner = String::new();
    while !banner.contains("chatting with") {
        banner.clear();
        assert!(
            stdout.read_line(&mut banner).unwrap() > 0,
            "the first chat ended early"
        );
    }

    let second = spawn_chat(&config, &session).wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    let holder = format!(
        "session {} is in use by process {}",
        session.display(),
        first.id()
    );
    assert!(stderr.contains(&holder), "{stderr}");

    // The first one is unaffected, and the log holds only its turns.
    writeln!(stdin, "hello").unwrap();
    writeln!(stdin, "/exit").unwrap();
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(first.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("reply 1"), "{rest}");
    assert_eq!(server.count(), 1);
    let logged = troupe::session::load(&session).unwrap();
    let texts: Vec<String> = logged
        .conversation
        .messages()
        .iter()
        .filter(|m| m.role != troupe::protocol::Role::System)
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["hello", "reply 1"]);
}

#[test]
fn chat_without_agent_refuses_a_config_with_several_agents() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        r#"
[models.remote]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "TEST_CHAT_KEY"
model = "m"

[agents.coder]
model = "remote"

[agents.reviewer]
model = "remote"
"#,
    )
    .unwrap();
    let session = dir.path().join("work.jsonl");
    let mut child = spawn_chat(&config, &session);
    child.stdin.take().unwrap().write_all(b"/exit\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("--agent"), "{stderr}");
    assert!(
        stderr.contains("coder") && stderr.contains("reviewer"),
        "{stderr}"
    );
    assert!(!session.exists(), "nothing was started");
}

#[test]
fn chat_refuses_a_session_path_that_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let session = dir.path().join("sessions");
    std::fs::create_dir(&session).unwrap();
    let output = spawn_chat(&config, &session).wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("is not a regular file (it is a directory)"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&session).unwrap().count(), 0);
}

/// Without `[compaction] model`, the chat compacts with the configured model of lowest
/// `cost_rank` (the rule `troupe node` shares), not with the agent's own.
#[test]
fn chat_compacts_with_the_cheapest_ranked_model() {
    let agent_server = ChatServer::start();
    let cheap_server = ChatServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[models.remote]
provider = "openai"
base_url = "{}"
api_key_env = "TEST_CHAT_KEY"
model = "agent-model"
context_window = 8000
cost_rank = 5

[models.cheap]
provider = "openai"
base_url = "{}"
api_key_env = "TEST_CHAT_KEY"
model = "cheap-model"
context_window = 8000
cost_rank = 1

[agents.assistant]
model = "remote"
instructions = "Be brief."

[compaction]
auto = false
target = 0.2
protected_messages = 1
"#,
            agent_server.url, cheap_server.url
        ),
    )
    .unwrap();
    let session = dir.path().join("work.jsonl");
    let long = |topic: &str| format!("{topic}: {}\n", "several words of filler text ".repeat(200));
    let input = format!(
        "{}{}{}/compact\n/exit\n",
        long("one"),
        long("two"),
        long("three")
    );
    let out = chat(&config, &session, &input);
    assert!(out.contains("reply 3"), "{out}");
    assert!(
        cheap_server.count() > 0,
        "the compaction never called the cheapest model: {out}"
    );
    let agent_requests: Vec<Value> = (0..agent_server.count())
        .map(|i| agent_server.request(i))
        .collect();
    assert!(
        agent_requests.iter().all(|r| r["model"] == "agent-model"),
        "{agent_requests:?}"
    );
    assert_eq!(
        agent_server.count(),
        3,
        "only the three requests reach the agent's model"
    );
}
