//! One suite, two backends: everything a session log holds, written through a store's claim and
//! read back through the store, on files and on Postgres alike (`backends.rs`) — the same
//! sessions, the same steps (ids, kinds, lines), the same errors naming the same lines.

use std::path::Path;

use troupe_compaction::{Archive, ArchiveEntry};
use troupe_protocol::{
    ApprovalId, ChatMessage, Conversation, FileAccess, FileLedger, LedgerEntry, MessageId,
    StoredMessage, ToolCall, Usage,
};
use troupe_session::{
    CompactionRecord, HandledRequest, LoggedFormat, PausedCall, RequestOutcome, Session,
    SessionClaim, SessionError, SessionRecord, SessionSync, StepKind,
};

use super::backends::{Backend, both};

both!(
    committed_requests_round_trip_with_their_steps,
    a_claimed_log_is_refused_to_a_second_owner_until_let_go,
    a_reopened_log_goes_on_after_its_last_commit,
    every_kind_of_record_is_restored,
    a_fork_ends_at_its_step_and_refuses_what_it_cannot_write,
    a_missing_log_is_not_found,
    a_result_answering_no_open_call_is_refused_naming_its_line,
    a_call_left_without_a_result_is_refused_naming_its_line,
    a_repeated_message_id_is_refused_naming_its_line,
    a_log_of_a_newer_format_is_refused,
    an_unfinished_last_commit_is_dropped_and_opening_cuts_it_off,
    the_requests_a_log_closed_are_known_by_their_ids,
);

const HEADER: &str = r#"{"type":"session","version":2,"created_ms":1}"#;
const COMMIT: &str = r#"{"type":"commit"}"#;
const USER_M1: &str =
    r#"{"type":"message","id":"m1","kind":"normal","message":{"role":"user","content":"hi"}}"#;
const CALLS_M2: &str = r#"{"type":"message","id":"m2","kind":"normal","message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"read_file","arguments":"{}"}}]}}"#;
const RESULT_C1_M3: &str = r#"{"type":"message","id":"m3","kind":"normal","message":{"role":"tool","tool_call_id":"c1","content":"one"}}"#;

/// The agent's log `log` opened under a claim of its own in the backend's store.
fn open(backend: &Backend, log: &Path) -> (SessionSync, Session, SessionClaim) {
    let claim = SessionClaim::new(backend.store.clone());
    let (sync, session) = SessionSync::open(log, "solo", Some(&claim)).unwrap();
    (sync, session, claim)
}

fn commit(sync: &mut SessionSync, c: &Conversation, extra: Vec<SessionRecord>) {
    sync.persist_with(c, &Archive::default(), &FileLedger::new(), None, extra)
        .unwrap();
}

/// Two whole requests, the second with a tool call, committed step by step.
fn two_requests(sync: &mut SessionSync) -> Conversation {
    let mut c = Conversation::new();
    c.push(ChatMessage::user("first question"));
    commit(
        sync,
        &c,
        vec![SessionRecord::RequestOpened {
            response_format: None,
            request_id: None,
        }],
    );
    c.push(ChatMessage::assistant("first answer"));
    commit(
        sync,
        &c,
        vec![SessionRecord::RequestClosed {
            outcome: RequestOutcome::Answered,
        }],
    );
    c.push(ChatMessage::user("second question"));
    commit(
        sync,
        &c,
        vec![SessionRecord::RequestOpened {
            response_format: None,
            request_id: None,
        }],
    );
    let call = ToolCall::new("c1", "read_file", r#"{"path":"a"}"#);
    c.push(ChatMessage::assistant_tool_calls(None, vec![call]));
    // A model's answer leaves its calls open until their results (as the journal writes it).
    let open = PausedCall {
        call_id: "c1".into(),
        tool: "read_file".into(),
        arguments: r#"{"path":"a"}"#.into(),
        ask: false,
        approval: None,
        started: false,
        result: None,
    };
    let answered = vec![
        SessionRecord::ModelAnswer {
            usage: usage(10, 2),
        },
        SessionRecord::Paused { calls: vec![open] },
    ];
    commit(sync, &c, answered);
    c.push(ChatMessage::tool_result("c1", "contents"));
    commit(sync, &c, Vec::new());
    c.push(ChatMessage::assistant("second answer"));
    commit(
        sync,
        &c,
        vec![SessionRecord::RequestClosed {
            outcome: RequestOutcome::Answered,
        }],
    );
    c
}

fn texts(c: &Conversation) -> Vec<String> {
    c.messages().iter().map(|m| m.text()).collect()
}

fn committed_requests_round_trip_with_their_steps(backend: &Backend) {
    let log = backend.log("round-trip");
    let (mut sync, fresh, _claim) = open(backend, &log);
    assert!(fresh.conversation.is_empty());
    let written = two_requests(&mut sync);
    let session = backend.store.load(&log).unwrap();
    assert_eq!(session.conversation, written);
    assert_eq!(session.agent.as_deref(), Some("solo"));
    assert!(!session.in_flight);
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    let steps = backend.store.steps(&log).unwrap();
    let kinds: Vec<StepKind> = steps.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [
            StepKind::Start,
            StepKind::Request,
            StepKind::RequestEnd,
            StepKind::Request,
            StepKind::ModelCall,
            StepKind::ToolResults,
            StepKind::RequestEnd,
        ]
    );
    let ids: Vec<usize> = steps.iter().map(|s| s.id).collect();
    assert_eq!(ids, (0..7).collect::<Vec<_>>());
    // Lines as a file of the commits would number them: the header's commit is lines 1–2.
    assert_eq!(steps[0].line, 1);
    assert_eq!(steps[1].line, 3);
    assert_eq!(steps[1].detail, "first question");
    assert!(
        steps[4].detail.starts_with("calls read_file"),
        "{}",
        steps[4].detail
    );
}

fn a_claimed_log_is_refused_to_a_second_owner_until_let_go(backend: &Backend) {
    let log = backend.log("claimed");
    let (mut sync, _, claim) = open(backend, &log);
    let mut c = Conversation::new();
    c.push(ChatMessage::user("mine"));
    commit(&mut sync, &c, Vec::new());
    // Another owner in this process, and another store (another node) on the same logs.
    let other = SessionClaim::new(backend.store.clone());
    let refused = SessionSync::open(&log, "solo", Some(&other)).unwrap_err();
    assert!(
        matches!(
            refused,
            SessionError::InUse { .. } | SessionError::Leased { .. }
        ),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("is in use by"), "{refused}");
    let elsewhere =
        SessionClaim::new(backend.another("elsewhere", std::time::Duration::from_secs(10)));
    let refused = SessionSync::open(&log, "solo", Some(&elsewhere)).unwrap_err();
    assert!(refused.to_string().contains("is in use by"), "{refused}");
    if backend.is_postgres() {
        assert!(refused.to_string().contains("in use by suite"), "{refused}");
    }
    // Nothing was written by the refused ones.
    assert_eq!(
        texts(&backend.store.load(&log).unwrap().conversation),
        ["mine"]
    );
    drop(sync);
    drop(claim);
    let (_sync, session) = SessionSync::open(&log, "solo", Some(&elsewhere)).unwrap();
    assert_eq!(texts(&session.conversation), ["mine"]);
}

fn a_reopened_log_goes_on_after_its_last_commit(backend: &Backend) {
    let log = backend.log("reopened");
    let (mut sync, _, claim) = open(backend, &log);
    let written = two_requests(&mut sync);
    drop(sync);
    drop(claim);
    let (mut sync, session, _claim) = open(backend, &log);
    assert_eq!(session.conversation, written);
    assert_eq!(sync.next_id(), written.next_id().0);
    let mut c = session.conversation;
    let id = c.push(ChatMessage::user("third"));
    assert_eq!(id, MessageId(written.next_id().0));
    commit(&mut sync, &c, Vec::new());
    let loaded = backend.store.load(&log).unwrap();
    assert_eq!(loaded.conversation.last().unwrap().text(), "third");
    assert_eq!(backend.store.steps(&log).unwrap().len(), 8);
}

fn every_kind_of_record_is_restored(backend: &Backend) {
    let log = backend.log("records");
    let (mut sync, _, _claim) = open(backend, &log);
    sync.note_model(None, "model-a").unwrap();
    let mut c = Conversation::new();
    for text in ["task", "a1", "q2", "a2"] {
        c.push(ChatMessage::user(text));
    }
    commit(&mut sync, &c, Vec::new());
    // A compaction: a summary replaces two messages, archived with the ledger and the files.
    let summary_id = c.allocate_id();
    let mut summary = ChatMessage::user("<summary>did things</summary>");
    summary.id = summary_id;
    let mut ledger = FileLedger::new();
    ledger.record(LedgerEntry::new("a.rs", FileAccess::Read));
    let entry = ArchiveEntry {
        replaced_by: Some(summary_id),
        after: None,
        original: StoredMessage::from(&*c.messages()[1]),
    };
    let kept = [
        ChatMessage::clone(&c.messages()[0]),
        summary,
        ChatMessage::clone(&c.messages()[3]),
    ];
    commit(
        &mut sync,
        &c,
        vec![SessionRecord::Compaction(Box::new(CompactionRecord {
            messages: kept.iter().map(StoredMessage::from).collect(),
            summary: Some("did things".into()),
            read_files: vec!["a.rs".into()],
            modified_files: vec!["b.rs".into()],
            archived: vec![MessageId(2), MessageId(3)],
            archive_entries: vec![entry],
            ledger: Some(ledger.clone()),
            report: None,
        }))],
    );
    let session = backend.store.load(&log).unwrap();
    assert_eq!(session.model.as_deref(), Some("model-a"));
    assert_eq!(session.conversation.len(), 3);
    assert_eq!(session.previous_summary.as_deref(), Some("did things"));
    assert_eq!(session.read_files, ["a.rs"]);
    assert_eq!(session.modified_files, ["b.rs"]);
    assert_eq!(session.archived, [MessageId(2), MessageId(3)]);
    assert_eq!(session.archive_entries.len(), 1);
    assert_eq!(session.ledger, Some(ledger));
    assert_eq!(session.compactions, 1);

    // A typed request in flight, paused for approval, one call started, one answered.
    let mut c = session.conversation;
    c.push(ChatMessage::user("do two things"));
    let format = LoggedFormat {
        name: "answer".into(),
        schema: serde_json::json!({"type": "object"}),
        strict: false,
    };
    commit(
        &mut sync,
        &c,
        vec![SessionRecord::RequestOpened {
            response_format: Some(format.clone()),
            request_id: None,
        }],
    );
    let calls = vec![
        ToolCall::new("k1", "shell", r#"{"command":"ls"}"#),
        ToolCall::new("k2", "shell", r#"{"command":"rm x"}"#),
    ];
    c.push(ChatMessage::assistant_tool_calls(None, calls));
    let approval = ApprovalId("solo:k2#1".to_string());
    let paused = |id: &str, ask: bool| PausedCall {
        call_id: id.into(),
        tool: "shell".into(),
        arguments: "{}".into(),
        ask,
        approval: ask.then(|| approval.clone()),
        started: false,
        result: None,
    };
    commit(
        &mut sync,
        &c,
        vec![
            SessionRecord::ModelAnswer { usage: usage(5, 1) },
            SessionRecord::Paused {
                calls: vec![paused("k1", false), paused("k2", true)],
            },
        ],
    );
    commit(
        &mut sync,
        &c,
        vec![SessionRecord::CallsStarted {
            call_ids: vec!["k1".into()],
        }],
    );
    commit(
        &mut sync,
        &c,
        vec![SessionRecord::CallResult {
            call_id: "k1".into(),
            content: "a b".into(),
        }],
    );
    let session = backend.store.load(&log).unwrap();
    assert!(session.in_flight);
    assert_eq!(
        session.in_flight_format.as_ref().map(|f| f.name.as_str()),
        Some("answer")
    );
    assert_eq!(session.paused.len(), 2);
    let k1 = &session.paused[0];
    assert!(k1.started && k1.result.as_deref() == Some("a b"), "{k1:?}");
    let k2 = &session.paused[1];
    assert!(k2.ask && !k2.started && k2.result.is_none(), "{k2:?}");
    assert_eq!(k2.approval.as_ref(), Some(&approval));

    // The request rolled back, then a clear: ids stay unique, the archive survives.
    let before: Vec<StoredMessage> = c.messages()[..4]
        .iter()
        .map(|m| StoredMessage::from(&**m))
        .collect();
    sync.persist_with(
        &c,
        &Archive::default(),
        &FileLedger::new(),
        None,
        vec![
            SessionRecord::RolledBack {
                messages: before,
                archive_entries: Vec::new(),
                report: None,
            },
            SessionRecord::RequestClosed {
                outcome: RequestOutcome::RolledBack,
            },
        ],
    )
    .unwrap();
    let session = backend.store.load(&log).unwrap();
    assert!(!session.in_flight);
    assert!(session.paused.is_empty());
    assert_eq!(session.conversation.len(), 4);
    let next = session.conversation.next_id();
    sync.clear().unwrap();
    let session = backend.store.load(&log).unwrap();
    assert!(session.conversation.is_empty());
    assert_eq!(
        session.conversation.next_id(),
        next,
        "ids stay unique after a clear"
    );
    assert_eq!(session.archived.len(), 2, "the archive survives a clear");
    let kinds: Vec<StepKind> = backend
        .store
        .steps(&log)
        .unwrap()
        .iter()
        .map(|s| s.kind)
        .collect();
    assert_eq!(kinds.last(), Some(&StepKind::Clear));
    assert!(kinds.contains(&StepKind::RolledBack), "{kinds:?}");
    assert!(
        kinds.contains(&StepKind::Paused) || kinds.contains(&StepKind::ModelCall),
        "{kinds:?}"
    );
}

fn a_fork_ends_at_its_step_and_refuses_what_it_cannot_write(backend: &Backend) {
    let log = backend.log("original");
    let (mut sync, _, claim) = open(backend, &log);
    two_requests(&mut sync);
    drop(sync);
    drop(claim);
    let fork = backend.log("fork");
    // Step 2 ends the first request.
    let session = backend.store.fork(&log, 2, &fork).unwrap();
    assert_eq!(
        texts(&session.conversation),
        ["first question", "first answer"]
    );
    assert_eq!(
        texts(&backend.store.load(&fork).unwrap().conversation),
        ["first question", "first answer"]
    );
    assert_eq!(backend.store.steps(&fork).unwrap().len(), 3);
    // The original is untouched; a fork in the middle of a request is a request in flight.
    assert_eq!(backend.store.steps(&log).unwrap().len(), 7);
    let mid = backend.log("mid");
    assert!(backend.store.fork(&log, 4, &mid).unwrap().in_flight);
    // Onto a log that exists, at a step the log lacks, of a log that does not exist.
    let exists = backend.store.fork(&log, 1, &fork).unwrap_err();
    assert!(matches!(exists, SessionError::Exists { .. }), "{exists:?}");
    let itself = backend.store.fork(&log, 1, &log).unwrap_err();
    assert!(matches!(itself, SessionError::Exists { .. }), "{itself:?}");
    let unknown = backend
        .store
        .fork(&log, 7, &backend.log("nope"))
        .unwrap_err();
    assert!(
        matches!(unknown, SessionError::UnknownStep { steps: 7, .. }),
        "{unknown:?}"
    );
    assert!(
        unknown.to_string().contains("its steps are 0 to 6"),
        "{unknown}"
    );
    let missing = backend
        .store
        .fork(&backend.log("absent"), 0, &backend.log("nope2"))
        .unwrap_err();
    assert!(
        matches!(&missing, SessionError::Io { cause, .. } if cause.kind() == std::io::ErrorKind::NotFound),
        "{missing:?}"
    );
    // The fork is a log like any other: an agent opens it and goes on from its end.
    let (mut sync, session, _claim) = open(backend, &fork);
    let mut c = session.conversation;
    c.push(ChatMessage::user("another path"));
    commit(&mut sync, &c, Vec::new());
    assert_eq!(backend.store.steps(&fork).unwrap().len(), 4);
}

fn a_missing_log_is_not_found(backend: &Backend) {
    let log = backend.log("never-written");
    for error in [
        backend.store.load(&log).unwrap_err(),
        backend.store.steps(&log).unwrap_err(),
    ] {
        assert!(
            matches!(&error, SessionError::Io { cause, .. } if cause.kind() == std::io::ErrorKind::NotFound),
            "{error:?}"
        );
    }
}

/// `commits` written raw are refused at load and at open, naming `line` of the log; the log is
/// left as it was.
fn refused(backend: &Backend, name: &str, commits: &[&[&str]], line: usize) -> String {
    let log = backend.log(name);
    backend.write_raw(&log, commits);
    let error = backend.store.load(&log).unwrap_err().to_string();
    assert!(
        error.contains(&format!("{}:{line}:", log.display())),
        "{error}"
    );
    let claim = SessionClaim::new(backend.store.clone());
    let opened = SessionSync::open(&log, "solo", Some(&claim))
        .unwrap_err()
        .to_string();
    assert_eq!(opened, error);
    assert_eq!(backend.store.load(&log).unwrap_err().to_string(), error);
    error
}

fn a_result_answering_no_open_call_is_refused_naming_its_line(backend: &Backend) {
    let stray = r#"{"type":"message","id":"m3","kind":"normal","message":{"role":"tool","tool_call_id":"c9","content":"?"}}"#;
    let error = refused(
        backend,
        "stray",
        &[&[HEADER, COMMIT], &[USER_M1, stray, COMMIT]],
        4,
    );
    assert!(error.contains("c9"), "{error}");
}

fn a_call_left_without_a_result_is_refused_naming_its_line(backend: &Backend) {
    let commits: &[&[&str]] = &[
        &[HEADER, COMMIT],
        &[USER_M1, CALLS_M2, RESULT_C1_M3, COMMIT],
    ];
    let error = refused(backend, "unanswered", commits, 4);
    assert!(error.contains("c2"), "{error}");
}

fn a_repeated_message_id_is_refused_naming_its_line(backend: &Backend) {
    let second_writer = r#"{"type":"message","id":"m1","kind":"normal","message":{"role":"user","content":"hello"}}"#;
    let commits: &[&[&str]] = &[
        &[HEADER, COMMIT],
        &[USER_M1, COMMIT],
        &[second_writer, COMMIT],
    ];
    let error = refused(backend, "repeated", commits, 5);
    assert!(error.contains("m1"), "{error}");
}

fn a_log_of_a_newer_format_is_refused(backend: &Backend) {
    let newer = r#"{"type":"session","version":99,"created_ms":1}"#;
    let error = refused(backend, "newer", &[&[newer, COMMIT]], 1);
    assert!(error.contains("written by a newer troupe"), "{error}");
}

fn an_unfinished_last_commit_is_dropped_and_opening_cuts_it_off(backend: &Backend) {
    let log = backend.log("unfinished");
    // The last commit lost its commit line: its records are not applied.
    backend.write_raw(&log, &[&[HEADER, COMMIT], &[USER_M1, COMMIT], &[CALLS_M2]]);
    if backend.is_postgres() {
        // A row is written whole or not at all, so a row that is not one commit was damaged
        // behind troupe's back: refused, naming its first line, never half applied.
        let error = backend.store.load(&log).unwrap_err();
        assert!(
            matches!(error, SessionError::Corrupt { line: 5, .. }),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("not one whole commit"),
            "{error}"
        );
        return;
    }
    let session = backend.store.load(&log).unwrap();
    assert_eq!(texts(&session.conversation), ["hi"]);
    assert_eq!(session.warnings.len(), 1, "{:?}", session.warnings);
    assert!(
        session.warnings[0].contains("unfinished commit"),
        "{:?}",
        session.warnings
    );
    assert_eq!(backend.store.steps(&log).unwrap().len(), 2);
    // Opening it cuts the unfinished commit off: the next commit follows the last whole one.
    let (mut sync, session, _claim) = open(backend, &log);
    let mut c = session.conversation;
    c.push(ChatMessage::user("next"));
    commit(&mut sync, &c, Vec::new());
    let session = backend.store.load(&log).unwrap();
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    assert_eq!(texts(&session.conversation), ["hi", "next"]);
    assert_eq!(backend.store.steps(&log).unwrap().len(), 3);
}

/// A request of an id opened and closed with `outcome`, its answer `answer` when there is one.
fn request_with_id(
    sync: &mut SessionSync,
    c: &mut Conversation,
    id: &str,
    answer: Option<&str>,
    outcome: RequestOutcome,
) {
    c.push(ChatMessage::user(format!("question {id}")));
    let opened = SessionRecord::RequestOpened {
        response_format: None,
        request_id: Some(id.to_string()),
    };
    commit(sync, c, vec![opened]);
    if let Some(answer) = answer {
        c.push(ChatMessage::assistant(answer));
    }
    commit(sync, c, vec![SessionRecord::RequestClosed { outcome }]);
}

fn the_requests_a_log_closed_are_known_by_their_ids(backend: &Backend) {
    let log = backend.log("ids");
    let (mut sync, _, claim) = open(backend, &log);
    let mut c = Conversation::new();
    request_with_id(
        &mut sync,
        &mut c,
        "r-1",
        Some("one"),
        RequestOutcome::Answered,
    );
    request_with_id(&mut sync, &mut c, "r-2", None, RequestOutcome::Failed);
    request_with_id(&mut sync, &mut c, "r-3", None, RequestOutcome::RolledBack);
    // One still in flight: known as in flight, not as handled.
    c.push(ChatMessage::user("question r-4"));
    let opened = SessionRecord::RequestOpened {
        response_format: None,
        request_id: Some("r-4".into()),
    };
    commit(&mut sync, &c, vec![opened]);
    drop((sync, claim));

    let session = backend.store.load(&log).unwrap();
    assert_eq!(
        session.handled.get("r-1"),
        Some(&HandledRequest::Answered("one".into()))
    );
    assert_eq!(session.handled.get("r-2"), Some(&HandledRequest::Failed));
    // A rolled-back request left nothing behind: it may run again.
    assert_eq!(session.handled.get("r-3"), None);
    assert_eq!(session.handled.len(), 2);
    assert!(session.in_flight);
    assert_eq!(session.in_flight_request.as_deref(), Some("r-4"));
}

fn usage(input_tokens: u64, output_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
        ..Usage::default()
    }
}
