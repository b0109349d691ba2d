//! Compaction hooks (#33) on the one compaction road: the before hook sees the preview and may
//! veto (honoured for an automatic compaction, ignored and reported for an emergency), pin a
//! message for this compaction, and add preserve hints that are checked; the after hook sees
//! the report, the receipt and the summary.

use std::sync::{Arc, Mutex};

use troupe_agents::compression::hooks::{
    AfterCompaction, BeforeCompaction, CompactionHooks, HookVerdict,
};
use troupe_agents::compression::{
    CompactionCaller, CompactionRequest, CompressionConfig, CompressorModel, compact,
};
use troupe_agents::shared_counter;
use troupe_agents::spawn_compression_agent;
use troupe_compaction::session::MessageFate;
use troupe_compaction::transcript::ledger_from_transcript;
use troupe_compaction::{Compaction, ContextPolicy};
use troupe_protocol::CompactTrigger;
use troupe_protocol::{
    ChatMessage, Conversation, HookNote, MessageId, MessageKind, ToolCall, TraceContext,
};
use troupe_runtime::{Team, TeamConfig};

/// A team whose compression agent summarizes mechanically.
async fn team() -> Team {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::None;
    spawn_compression_agent(&team, config).await.unwrap();
    team
}

fn words(tag: &str, n: usize) -> String {
    (0..n).map(|i| format!("{tag}{i} ")).collect()
}

/// A long session: old turns of prose and command output (the output of turn 3 holds
/// `ZEBRA-7781`), then a recent exchange that names `KEEP-ME-42`. With long prose and short
/// output (`summarized`) masking cannot reach the target and a summary is written; with short
/// prose and long output masking alone reaches it.
fn conversation(summarized: bool) -> Conversation {
    let (prose, output) = if summarized { (200, 40) } else { (20, 300) };
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a coding agent."));
    c.push(ChatMessage::user("Make the tests pass."));
    for t in 0..30 {
        let id = format!("call_{t}");
        let command = format!(r#"{{"command":"cargo test -p part{t}"}}"#);
        c.push(ChatMessage::assistant_tool_calls(
            Some(format!("Looking at part {t}. {}", words("why", prose))),
            vec![ToolCall::new(&id, "bash", command)],
        ));
        let text = if t == 3 {
            format!(
                "{}\nZEBRA-7781\n{}",
                words("out", output / 2),
                words("more", output / 2)
            )
        } else {
            words("out", output)
        };
        c.push(ChatMessage::tool_result(&id, text));
        c.push(ChatMessage::user(format!(
            "Part {t} done. {}",
            words("ok", prose / 5)
        )));
    }
    c.push(ChatMessage::assistant(
        "Remember KEEP-ME-42 for the release.",
    ));
    c.push(ChatMessage::user("Go on."));
    c
}

fn request(conversation: &Conversation, trigger: CompactTrigger) -> CompactionRequest {
    let tokens = shared_counter().count_messages(&conversation.to_messages());
    // The conversation is past the trigger: the window needs the compaction, so the
    // minimum-gain rule never declines it.
    let policy = ContextPolicy {
        protected_recent: 2,
        ..ContextPolicy::for_window(tokens * 10 / 9)
    };
    CompactionRequest::new(
        "coder",
        conversation.clone(),
        ledger_from_transcript(conversation.messages()),
        policy,
        trigger,
    )
}

async fn run(team: &Team, mut request: CompactionRequest, hooks: CompactionHooks) -> Compaction {
    request.in_process.hooks = hooks;
    let counter = shared_counter();
    let caller = CompactionCaller {
        directory: team.directory(),
        events: team.events(),
        trace: TraceContext::new_root(),
        counter: counter.as_ref(),
    };
    compact(&caller, request).await.unwrap()
}

fn vetoing(seen: Arc<Mutex<Vec<BeforeCompaction>>>) -> CompactionHooks {
    CompactionHooks::new().before(move |before| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(before);
            HookVerdict::veto("the user is reviewing the log")
        }
    })
}

#[tokio::test]
async fn a_veto_holds_an_automatic_compaction_and_the_hook_saw_what_it_would_do() {
    let team = team().await;
    let c = conversation(true);
    // Without a hook the same compaction goes ahead.
    let free = run(
        &team,
        request(&c, CompactTrigger::Automatic),
        CompactionHooks::new(),
    )
    .await;
    assert!(free.changed(), "{}", free.report.reason);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let vetoed = run(
        &team,
        request(&c, CompactTrigger::Automatic),
        vetoing(seen.clone()),
    )
    .await;
    assert!(!vetoed.changed());
    assert!(vetoed.report.skipped);
    assert_eq!(vetoed.messages, c.to_messages());
    assert_eq!(
        vetoed.report.hook_notes,
        [HookNote::Vetoed {
            reason: "the user is reviewing the log".into()
        }]
    );
    assert!(
        vetoed
            .report
            .reason
            .contains("vetoed by the before-compaction hook"),
        "{}",
        vetoed.report.reason
    );
    // What the hook saw: every message by id, with its tokens and fate, and the artifacts.
    let seen = seen.lock().unwrap().clone();
    let preview = &seen[0].preview;
    assert_eq!(seen[0].agent, "coder");
    assert_eq!(preview.trigger, CompactTrigger::Automatic);
    let ids: Vec<MessageId> = preview.messages.iter().map(|m| m.id).collect();
    let expected: Vec<MessageId> = c.messages().iter().map(|m| m.id).collect();
    assert_eq!(ids, expected);
    assert!(preview.messages.iter().all(|m| m.tokens > 0));
    assert!(preview.messages.iter().any(|m| m.fate.is_compressed()));
    assert!(matches!(
        preview.messages[0].fate,
        MessageFate::Protected(_)
    ));
    assert!(preview.tokens_after < preview.tokens_before);
    assert!(!preview.artifacts.is_empty());
    team.shutdown().await;
}

#[tokio::test]
async fn a_veto_of_an_emergency_compaction_is_ignored_and_said_so() {
    let team = team().await;
    let c = conversation(true);
    let seen = Arc::new(Mutex::new(Vec::new()));
    for trigger in [CompactTrigger::Emergency, CompactTrigger::Manual] {
        let forced = run(&team, request(&c, trigger), vetoing(seen.clone())).await;
        assert!(forced.changed(), "{}", forced.report.reason);
        assert_eq!(
            forced.report.hook_notes,
            [HookNote::VetoIgnored {
                trigger,
                reason: "the user is reviewing the log".into()
            }]
        );
    }
    assert_eq!(seen.lock().unwrap().len(), 2);
    team.shutdown().await;
}

#[tokio::test]
async fn a_missing_preserve_hint_is_reported_and_a_hook_pin_keeps_it() {
    let team = team().await;
    let c = conversation(false);
    // The output of turn 3, which holds the hint `ZEBRA-7781`.
    let zebra = c.messages()[12].id;
    assert!(c.messages()[12].text().contains("ZEBRA-7781"));
    let hooks = |pin: bool| {
        CompactionHooks::new().before(move |before: BeforeCompaction| async move {
            // The hook sees that the output would be masked.
            assert_eq!(before.preview.messages[12].fate, MessageFate::Masked);
            let verdict = HookVerdict::proceed()
                .preserve("KEEP-ME-42")
                .preserve("ZEBRA-7781");
            if pin {
                verdict.pin(zebra).pin(MessageId(99_999))
            } else {
                verdict
            }
        })
    };
    let masked = run(&team, request(&c, CompactTrigger::Manual), hooks(false)).await;
    assert!(masked.changed());
    assert!(
        masked
            .messages
            .iter()
            .all(|m| m.kind != MessageKind::Summary)
    );
    // In a recent message: kept. In the masked output: gone with it, and reported.
    assert_eq!(
        masked.report.hook_notes,
        [HookNote::HintMissing {
            hint: "ZEBRA-7781".into()
        }]
    );

    let pinned = run(&team, request(&c, CompactTrigger::Manual), hooks(true)).await;
    assert!(pinned.changed());
    // Kept byte-identical, and unpinned again: the pin held for this compaction only.
    let kept = pinned.messages.iter().find(|m| m.id == zebra).unwrap();
    assert_eq!(kept, c.get(zebra).unwrap());
    assert!(!kept.pinned);
    assert_eq!(
        pinned.report.hook_notes,
        [HookNote::UnknownPin {
            id: MessageId(99_999)
        }]
    );
    team.shutdown().await;
}

#[tokio::test]
async fn the_after_hook_sees_the_report_the_receipt_and_the_summary() {
    let team = team().await;
    let c = conversation(true);
    let seen: Arc<Mutex<Vec<AfterCompaction>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let hooks = CompactionHooks::new().after(move |after| {
        let sink = sink.clone();
        async move { sink.lock().unwrap().push(after) }
    });
    let compacted = run(&team, request(&c, CompactTrigger::Manual), hooks).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let after = &seen[0];
    assert_eq!(after.agent, "coder");
    assert_eq!(after.trigger, CompactTrigger::Manual);
    assert_eq!(after.report, compacted.report);
    assert!(after.receipt.is_some());
    assert_eq!(after.receipt, compacted.report.receipt);
    let summary = compacted
        .messages
        .iter()
        .find(|m| m.kind == MessageKind::Summary)
        .map(|m| m.text());
    assert!(summary.is_some());
    assert_eq!(after.summary, summary);
    team.shutdown().await;
}
