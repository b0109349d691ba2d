//! Unit tests of the session log's writing and replay (integration tests:
//! `tests/suite/session_log.rs`, and `tests/suite/session.rs` for the agent's own log).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use troupe_compaction::ArchiveEntry;
use troupe_protocol::{ChatMessage, Conversation, MessageId, StoredMessage};
use troupe_protocol::{FileAccess, FileLedger, LedgerEntry};

use super::*;

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("troupe-session-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("log.jsonl")
}

/// Three committed turns of two messages each.
fn write_three_turns(path: &Path) -> Conversation {
    let (mut log, _) = SessionLog::open_for(path, Some("solo")).unwrap();
    let mut c = Conversation::new();
    for turn in 1..=3 {
        for m in [
            ChatMessage::user(format!("q{turn}")),
            ChatMessage::assistant(format!("a{turn}")),
        ] {
            let id = c.push(m);
            log.append_message(c.get(id).unwrap());
        }
        log.flush().unwrap();
    }
    c
}

#[test]
fn committed_turns_round_trip() {
    let path = temp_path("round-trip");
    let written = write_three_turns(&path);
    let session = load(&path).unwrap();
    assert_eq!(session.conversation, written);
    assert_eq!(session.agent.as_deref(), Some("solo"));
    assert!(session.warnings.is_empty());
}

#[test]
fn a_torn_last_line_loses_only_that_turn_and_open_repairs_it() {
    let path = temp_path("torn");
    write_three_turns(&path);
    let full = std::fs::read(&path).unwrap();
    // Cut the file in the middle of every byte of the last turn's lines: each loses turn 3 only.
    let turn3_start = {
        let text = String::from_utf8(full.clone()).unwrap();
        text.match_indices("\"q3\"").next().unwrap().0
    };
    let turn3_line_start = full[..turn3_start]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    // (A cut of only the final newline leaves a whole commit line: that turn is complete.)
    for cut in turn3_line_start + 1..full.len() - 1 {
        std::fs::write(&path, &full[..cut]).unwrap();
        let session = load(&path).unwrap();
        let texts: Vec<String> = session
            .conversation
            .messages()
            .iter()
            .map(|m| m.text())
            .collect();
        assert_eq!(texts, ["q1", "a1", "q2", "a2"], "cut at {cut}");
        assert!(
            !session.warnings.is_empty(),
            "cut at {cut}: the loss is reported"
        );
    }
    // Reopening cuts the unfinished tail so the next turn follows turn 2.
    let (mut log, session) = SessionLog::open(&path).unwrap();
    assert_eq!(session.conversation.len(), 4);
    let mut c = session.conversation;
    let id = c.push(ChatMessage::user("q3 again"));
    assert_eq!(id, MessageId(5));
    log.append_message(c.get(id).unwrap());
    log.flush().unwrap();
    let session = load(&path).unwrap();
    assert!(session.warnings.is_empty(), "{:?}", session.warnings);
    assert_eq!(session.conversation.last().unwrap().text(), "q3 again");
}

#[test]
fn a_corrupt_complete_line_is_an_error_naming_it() {
    let path = temp_path("corrupt");
    write_three_turns(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[3] = "{\"type\":\"message\",\"id\":\"m2\"";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = load(&path).unwrap_err().to_string();
    assert!(err.contains("log.jsonl:4: corrupt record"), "{err}");
    // Opening a corrupt log changes nothing on disk.
    let before = std::fs::read(&path).unwrap();
    assert!(SessionLog::open(&path).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn compaction_clear_and_model_change_are_restored() {
    let path = temp_path("records");
    let (mut log, _) = SessionLog::open(&path).unwrap();
    let mut c = Conversation::new();
    for text in ["task", "a1", "q2", "a2"] {
        let id = c.push(ChatMessage::user(text));
        log.append_message(c.get(id).unwrap());
    }
    log.flush().unwrap();
    let summary_id = c.allocate_id();
    let mut ledger = FileLedger::new();
    ledger.record(LedgerEntry::new("a.rs", FileAccess::Read));
    let mut summary = ChatMessage::user("<summary>did things</summary>");
    summary.id = summary_id;
    let kept: Vec<ChatMessage> = vec![
        ChatMessage::clone(&c.messages()[0]),
        summary,
        ChatMessage::clone(&c.messages()[3]),
    ];
    log.append(SessionRecord::Compaction(Box::new(CompactionRecord {
        messages: kept.iter().map(StoredMessage::from).collect(),
        summary: Some("did things".into()),
        read_files: vec!["a.rs".into()],
        modified_files: vec!["b.rs".into()],
        archived: vec![MessageId(2), MessageId(3)],
        archive_entries: vec![ArchiveEntry {
            replaced_by: Some(summary_id),
            after: None,
            original: StoredMessage::from(&*c.messages()[1]),
        }],
        ledger: Some(ledger.clone()),
        report: None,
    })));
    log.append(SessionRecord::ModelChange {
        model: "gpt".into(),
    });
    log.flush().unwrap();
    let session = load(&path).unwrap();
    assert_eq!(session.conversation.len(), 3);
    assert_eq!(session.conversation.next_id(), MessageId(6));
    assert_eq!(session.previous_summary.as_deref(), Some("did things"));
    assert_eq!(session.read_files, ["a.rs"]);
    assert_eq!(session.archived, [MessageId(2), MessageId(3)]);
    assert_eq!(session.archive_entries.len(), 1);
    assert_eq!(session.model.as_deref(), Some("gpt"));
    assert_eq!(session.ledger, Some(ledger));

    log.append(SessionRecord::Clear);
    log.flush().unwrap();
    let session = load(&path).unwrap();
    assert!(session.conversation.is_empty());
    assert_eq!(
        session.conversation.next_id(),
        MessageId(6),
        "ids stay unique after a clear"
    );
    assert_eq!(session.previous_summary, None);
    assert_eq!(session.archived.len(), 2, "the archive survives a clear");
}

/// A request refused after a compaction it committed is rolled back (`rolled_back`) to the
/// messages the compaction had archived: the log loads with those messages back, their
/// archive entries kept — harmless, since an entry is the original under its own id, so
/// recalling it gives the message the conversation holds — and the rollback counted as no
/// compaction of its own.
#[test]
fn a_rollback_past_a_committed_compaction_keeps_its_archive_entries_harmlessly() {
    let path = temp_path("rollback-past-compaction");
    let before = write_three_turns(&path);
    let (mut log, _) = SessionLog::open(&path).unwrap();
    let mut summary = ChatMessage::user("<summary>q1 a1 q2</summary>");
    summary.id = MessageId(7);
    let kept = [summary, ChatMessage::clone(&before.messages()[3])];
    log.append(SessionRecord::RequestOpened {
        response_format: None,
        request_id: None,
    });
    log.append(SessionRecord::Compaction(Box::new(CompactionRecord {
        messages: kept.iter().map(StoredMessage::from).collect(),
        summary: Some("q1 a1 q2".into()),
        archived: vec![MessageId(1), MessageId(2), MessageId(3)],
        archive_entries: before.messages()[..3]
            .iter()
            .map(|m| ArchiveEntry {
                replaced_by: Some(MessageId(7)),
                after: None,
                original: StoredMessage::from(&**m),
            })
            .collect(),
        ..CompactionRecord::default()
    })));
    log.flush().unwrap();
    log.append(SessionRecord::RolledBack {
        messages: before
            .messages()
            .iter()
            .map(|m| StoredMessage::from(&**m))
            .collect(),
        archive_entries: Vec::new(),
        report: None,
    });
    log.append(SessionRecord::RequestClosed {
        outcome: RequestOutcome::RolledBack,
    });
    log.flush().unwrap();
    // The next request's message takes an id no record used.
    log.append_message(&{
        let mut next = ChatMessage::user("again");
        next.id = MessageId(8);
        next
    });
    log.flush().unwrap();
    drop(log);

    let session = load(&path).unwrap();
    let texts: Vec<String> = session
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["q1", "a1", "q2", "a2", "q3", "a3", "again"]);
    assert_eq!(session.compactions, 1, "the rollback is no compaction");
    assert!(!session.in_flight);
    let archive = troupe_compaction::Archive::from(session.archive_entries.clone());
    for message in &before.messages()[..3] {
        let original = archive.original(message.id).expect("its entry");
        assert_eq!(ChatMessage::from(original.clone()).text(), message.text());
    }
}
