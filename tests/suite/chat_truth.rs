//! `troupe chat` tells the truth (#27): a session write that fails is named at once and at exit,
//! a Ctrl-C after the request was committed does not claim to have cancelled it, Ctrl-C cancels a
//! `/compact`, a line that is not UTF-8 does not end the chat, a resumed log follows the
//! configuration's instructions and is refused to another agent, and what a model says reaches
//! the terminal redacted and escaped.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::support::chat::{chat_command, spawn_chat, write_config};
use super::support::chat_live::{DEADLINE, Live};
use super::support::chat_server::{ChatServer, gated_stream_server};

/// The texts of the conversation a session log holds.
fn logged_texts(session: &Path) -> Vec<String> {
    troupe::session::load(session)
        .unwrap()
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect()
}

/// Limit the file size the process `pid` may write (`None`: no limit): a write past it fails
/// with EFBIG, the way a full disk fails it with ENOSPC.
fn limit_file_size(pid: u32, limit: Option<u64>) {
    let limit = limit.map_or("unlimited".to_string(), |l| l.to_string());
    let status = Command::new("prlimit")
        // The soft limit only: lifting it again needs no privilege.
        .args(["--pid", &pid.to_string(), &format!("--fsize={limit}:")])
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(status.success());
}

#[test]
fn a_session_write_that_fails_is_told_at_once_and_at_exit() {
    // Long answers, so that the compaction at the end has something to summarize.
    let filler = "the quick brown fox jumps over the lazy dog ".repeat(80);
    let server = ChatServer::start_with(Arc::new(move |n| format!("reply {n}: {filler}")));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let session = dir.path().join("work.jsonl");
    // The chat runs with SIGXFSZ ignored (inherited through exec), so a write past the file
    // size limit fails with an error instead of killing it.
    let chat = chat_command(&config, &session);
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("trap '' XFSZ; exec \"$0\" \"$@\"")
        .arg(chat.get_program())
        .args(chat.get_args())
        .env("TEST_CHAT_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut live = Live::start(command.spawn().unwrap());
    let pid = live.child.id();

    live.send(b"first");
    live.wait_for("reply 1");
    live.wait_for("> ");
    // From now on the log cannot grow.
    limit_file_size(pid, Some(std::fs::metadata(&session).unwrap().len()));
    live.send(b"second");
    let printed = live.wait_for("> ");
    assert!(printed.contains("reply 2"), "{printed}");
    assert!(
        printed.contains("error: the session log could not be written")
            && printed.contains("not saved: request 2 (\u{201c}second\u{201d})"),
        "{printed}"
    );
    live.send(b"third");
    let printed = live.wait_for("> ");
    assert!(
        printed.contains("not saved: request 2 (\u{201c}second\u{201d}) and request 3"),
        "{printed}"
    );
    let logged = |reply: &str| logged_texts(&session).iter().any(|t| t.starts_with(reply));
    assert!(!logged("reply 2:"));

    // Once the log can grow again, the next request writes everything it missed, and says so.
    limit_file_size(pid, None);
    live.send(b"fourth");
    let printed = live.wait_for("> ");
    assert!(
        printed.contains(
            "(the session log caught up: request 2 (\u{201c}second\u{201d}) and request 3"
        ),
        "{printed}"
    );
    assert!(
        ["reply 2:", "reply 3:", "reply 4:"]
            .iter()
            .all(|r| logged(r))
    );

    // A request still unsaved at exit: a summary and a failed exit status.
    limit_file_size(pid, Some(std::fs::metadata(&session).unwrap().len()));
    live.send(b"fifth");
    live.wait_for("not saved: request 5");
    live.wait_for("> ");
    // A compaction is named too.
    live.send(b"/compact");
    let printed = live.wait_for("> ");
    assert!(
        printed.contains("compacted:")
            && printed.contains(
                "not saved: request 5 (\u{201c}fifth\u{201d}) and the compaction after request 5"
            ),
        "{printed}"
    );
    live.send(b"/exit");
    let (_, stderr, status) = live.finish();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "is missing request 5 (\u{201c}fifth\u{201d}) and the compaction after request 5"
        ),
        "{stderr}"
    );
}

#[test]
fn a_line_that_is_not_utf8_is_skipped_and_the_chat_goes_on() {
    let server = ChatServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let mut live = Live::start(spawn_chat(&config, &dir.path().join("s.jsonl")));
    live.send(b"caf\xe9 latin-1");
    live.send(b"hello");
    let printed = live.wait_for("reply 1");
    assert!(
        printed.contains("not valid UTF-8; it was ignored"),
        "{printed}"
    );
    live.send(b"/exit");
    let (out, stderr, status) = live.finish();
    assert!(status.success(), "{out}\n{stderr}");
    assert_eq!(server.count(), 1);
    assert_eq!(server.dialogue(0), ["hello"]);
}

#[test]
fn ctrl_c_during_compact_cancels_it_and_leaves_the_conversation_alone() {
    // Long answers, so that a compaction has something to summarize.
    let filler = "the quick brown fox jumps over the lazy dog ".repeat(80);
    let server = ChatServer::start_with(Arc::new(move |n| format!("reply {n}: {filler}")));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    // No automatic compaction on the way: `/compact` must find the six answers uncompacted.
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[compaction]\nauto = false\n");
    std::fs::write(&config, text).unwrap();
    let session = dir.path().join("s.jsonl");
    let mut live = Live::start(spawn_chat(&config, &session));
    let turns = ["one", "two", "three", "four", "five", "six"];
    for turn in turns {
        live.send(turn.as_bytes());
        live.wait_for("reply");
    }
    live.wait_for("> ");
    // The compressor's model call mentions `slow` (its instructions): the server holds it 30 s.
    live.send(b"/compact be slow about it");
    let started = Instant::now();
    while !server.seen("be slow about it") {
        assert!(
            started.elapsed() < DEADLINE,
            "the compaction never asked the model"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    live.interrupt();
    let printed = live.wait_for("> ");
    assert!(
        printed.contains("(compaction cancelled; the conversation is unchanged)"),
        "{printed}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "it waited for the compaction"
    );
    live.send(b"seven");
    live.wait_for("reply");
    live.send(b"/exit");
    let (out, stderr, status) = live.finish();
    assert!(status.success(), "{out}\n{stderr}");
    // The next turn saw the conversation as it was: nothing summarized.
    let last = (0..server.count())
        .map(|i| server.dialogue(i))
        .find(|d| d.last().is_some_and(|t| t == "seven"))
        .unwrap();
    let heads: Vec<&str> = last
        .iter()
        .map(|t| t.split(':').next().unwrap_or_default())
        .collect();
    let mut expected = Vec::new();
    for (i, turn) in turns.iter().enumerate() {
        expected.extend([turn.to_string(), format!("reply {}", i + 1)]);
    }
    expected.push("seven".to_string());
    assert_eq!(heads, expected);
}

/// The window between a request's answer and its commit, held open: the answer takes the
/// conversation past the trigger, and the automatic compaction that runs before the request
/// ends waits on its model (the server holds the compressor's requests). Ctrl-C then comes
/// too late to cancel anything the agent does not cancel: the request is committed.
#[test]
fn ctrl_c_during_the_compaction_that_ends_a_request_says_the_request_was_kept() {
    let filler = "the quick brown fox jumps over the lazy dog ".repeat(400);
    let server = ChatServer::start_holding(
        Arc::new(move |n| format!("reply {n}: {filler}")),
        "<conversation>",
        Duration::from_secs(3),
    );
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        // The blocking timeline: the compaction runs at the trigger, before the request ends.
        text.replace("context_window = 8000", "context_window = 30000")
            + "\n[compaction]\nwork_ahead = \"off\"\n",
    )
    .unwrap();
    let session = dir.path().join("s.jsonl");
    let mut live = Live::start(spawn_chat(&config, &session));
    live.wait_for("> ");
    let mut turn = 0;
    loop {
        turn += 1;
        assert!(turn <= 12, "no automatic compaction: {}", live.pull());
        live.send(format!("turn {turn}").as_bytes());
        let started = Instant::now();
        let compacting = loop {
            if server.seen("<conversation>") {
                break true;
            }
            let printed = live.pull();
            if printed.contains(&format!("reply {turn}:")) && printed.ends_with("> ") {
                break false;
            }
            assert!(started.elapsed() < DEADLINE, "turn {turn} never ended");
            std::thread::sleep(Duration::from_millis(20));
        };
        if compacting {
            break;
        }
        live.seen.clear();
    }
    live.interrupt();
    let printed = live.wait_for("> ");
    assert!(!printed.contains("(request cancelled)"), "{printed}");
    assert!(
        printed.contains("(Ctrl-C came after the request was completed: it is kept)"),
        "{printed}"
    );
    live.send(b"/exit");
    let (_, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    let reply = format!("reply {turn}:");
    assert!(
        logged_texts(&session).iter().any(|t| t.starts_with(&reply)),
        "the request was not kept"
    );
}

#[test]
fn ctrl_c_after_the_request_was_committed_does_not_say_cancelled() {
    // An answer far larger than a pipe holds: the chat blocks printing it while the agent
    // commits the request; Ctrl-C comes then.
    let long: String = (0..20_000).map(|i| format!("w{i} ")).collect();
    let answer = format!("{long}THE END");
    let (url, release) = gated_stream_server(&answer, "");
    release.send(()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url);
    let session = dir.path().join("s.jsonl");
    let mut child = spawn_chat(&config, &session);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "hello").unwrap();
    let started = Instant::now();
    while !std::fs::read_to_string(&session)
        .unwrap_or_default()
        .contains("THE END")
    {
        assert!(
            started.elapsed() < DEADLINE,
            "the request was never committed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut live = Live::start(child);
    live.stdin = Some(stdin);
    let printed = live.wait_for("THE END");
    live.send(b"/exit");
    let (rest, stderr, status) = live.finish();
    assert!(status.success(), "{rest}\n{stderr}");
    assert!(!printed.contains("(request cancelled)"), "{rest}");
    assert!(!rest.contains("(request cancelled)"), "{rest}");
    // Kept: larger than the window, the answer is logged cut (its tail with it) and archived.
    assert!(logged_texts(&session).iter().any(|t| t.contains("THE END")));
}

#[test]
fn a_resumed_session_follows_the_configurations_new_instructions_and_says_so() {
    let server = ChatServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let session = dir.path().join("s.jsonl");
    let mut live = Live::start(spawn_chat(&config, &session));
    live.send(b"first");
    live.wait_for("reply 1");
    live.send(b"/exit");
    assert!(live.finish().2.success());

    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("Be brief.", "Be thorough.")).unwrap();
    let mut live = Live::start(spawn_chat(&config, &session));
    let printed = live.wait_for("chatting with");
    assert!(
        printed.contains("note: the session was written with other instructions"),
        "{printed}"
    );
    live.send(b"second");
    live.wait_for("reply 2");
    live.send(b"/exit");
    assert!(live.finish().2.success());
    let system = &server.request(1)["messages"][0];
    assert_eq!(system["role"], "system");
    assert_eq!(system["content"], "Be thorough.");
    assert_eq!(
        logged_texts(&session),
        ["Be thorough.", "first", "reply 1", "second", "reply 2"]
    );
}

#[test]
fn a_session_of_another_agent_is_refused() {
    let server = ChatServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server.url);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}\n[agents.reviewer]\nmodel = \"remote\"\n"),
    )
    .unwrap();
    let (mine, theirs) = (
        dir.path().join("mine.jsonl"),
        dir.path().join("theirs.jsonl"),
    );
    let run = |agent: &str, session: &Path, input: &[u8]| {
        let mut live = Live::start(
            chat_command(&config, session)
                .args(["--agent", agent])
                .spawn()
                .unwrap(),
        );
        for line in input.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            live.send(line);
        }
        live.finish()
    };
    let (_, stderr, status) = run("assistant", &theirs, b"hello\n/exit\n");
    assert!(status.success(), "{stderr}");
    let before = std::fs::read(&theirs).unwrap();

    let (_, stderr, status) = run("reviewer", &theirs, b"/exit\n");
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("was written by agent `assistant`, not `reviewer`"),
        "{stderr}"
    );
    let resume = format!("/resume {}\n/exit\n", theirs.display());
    let (out, stderr, status) = run("reviewer", &mine, resume.as_bytes());
    assert!(status.success(), "{stderr}");
    assert!(out.contains("cannot resume: session"), "{out}");
    assert_eq!(std::fs::read(&theirs).unwrap(), before);
}

#[test]
fn model_text_reaches_the_terminal_redacted_and_escaped() {
    let key = "sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789";
    // Streamed, the key split across two deltas.
    let first = format!("Look \x1b]0;pwned\x07 \x1b[2J: {}", &key[..12]);
    let rest = format!("{} done.", &key[12..]);
    let (url, release) = gated_stream_server(&first, &rest);
    release.send(()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &url);
    let mut live = Live::start(spawn_chat(&config, &dir.path().join("a.jsonl")));
    live.send(b"hello");
    let printed = live.wait_for("done.");
    live.send(b"/exit");
    let (_, stderr, status) = live.finish();
    assert!(status.success(), "{stderr}");
    let answer = &printed[printed.find("Look").unwrap()..];
    assert_eq!(
        answer,
        "Look \\u{1b}]0;pwned\\u{7} \\u{1b}[2J: [redacted] done."
    );

    // Whole: a server that answers in one piece.
    let answer: super::support::chat_server::Reply =
        Arc::new(move |_| format!("\x1b[31mred\x1b[0m and {key} end"));
    let server = ChatServer::start_with(answer);
    let config = write_config(dir.path(), &server.url);
    let mut live = Live::start(spawn_chat(&config, &dir.path().join("b.jsonl")));
    live.send(b"hello");
    let printed = live.wait_for("end");
    assert!(!printed.contains('\x1b'), "{printed:?}");
    assert!(printed.contains("\\u{1b}[31mred"), "{printed:?}");
    assert!(!printed.contains("Abcdefghij"), "{printed:?}");
    live.send(b"/exit");
    assert!(live.finish().2.success());
}
