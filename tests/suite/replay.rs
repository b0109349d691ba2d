//! `replay_transcript`'s observer: what it is told, in what order, and that it agrees with the
//! report (the evaluation example and `troupe replay` read a replay through it).

use troupe::agents::{CompactionSettings, shared_counter};
use troupe::compaction::ContextPolicy;
use troupe::protocol::{ChatMessage, Conversation, ToolCall};
use troupe::tokens::TokenCounter;
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{
    Compressor, ReplayObserver, ReplayReport, ReplayRow, ReplayedCompaction, SkippedTrigger,
    replay_transcript,
};

/// A coding session long enough to cross a 4k window's trigger several times: each step is an
/// assistant tool call and a long tool result, then the assistant says what it saw.
fn long_session(steps: usize) -> TranscriptFile {
    let mut messages = vec![
        ChatMessage::system("You are a coding agent."),
        ChatMessage::user("Find why the parser rejects empty headers and fix it."),
    ];
    for step in 0..steps {
        let id = format!("c{step}");
        let args = serde_json::json!({ "command": format!("cat src/module_{step}.py") });
        messages.push(ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(&id, "execute_bash", args.to_string())],
        ));
        let output: String = (0..40)
            .map(|line| format!("line {line} of module {step}: def handler_{line}(header): pass\n"))
            .collect();
        messages.push(ChatMessage::tool_result(&id, output));
        messages.push(ChatMessage::assistant(format!(
            "Module {step} has no header check; looking at the next one."
        )));
        messages.push(ChatMessage::user(format!(
            "Go on with module {}.",
            step + 1
        )));
    }
    messages.push(ChatMessage::assistant("Done: the check lives in module 0."));
    TranscriptFile {
        envelope: Default::default(),
        messages,
        layout: Default::default(),
    }
}

/// What the observer saw, in order.
#[derive(Debug, PartialEq)]
enum Seen {
    Message(usize),
    Compaction(usize),
    Skip(usize),
    Finish,
}

/// Records everything, and checks each event against what it should describe.
struct Recorder {
    counter: std::sync::Arc<dyn TokenCounter>,
    seen: Vec<Seen>,
    /// Length of the live conversation as the events describe it.
    live: usize,
    rows: Vec<ReplayRow>,
    skip_reasons: Vec<String>,
    final_conversation: Option<Conversation>,
}

impl Recorder {
    fn new() -> Self {
        Recorder {
            counter: shared_counter(),
            seen: Vec::new(),
            live: 0,
            rows: Vec::new(),
            skip_reasons: Vec::new(),
            final_conversation: None,
        }
    }
}

impl ReplayObserver for Recorder {
    fn on_message(&mut self, fed: usize) {
        self.seen.push(Seen::Message(fed));
        self.live += 1;
    }

    fn on_compaction(&mut self, event: &ReplayedCompaction<'_>) {
        let before = event.before.messages();
        assert_eq!(
            before.len(),
            self.live,
            "`before` is the live conversation as it stood"
        );
        assert_eq!(
            self.counter.count_messages(&event.before.to_messages()),
            event.row.tokens_before,
            "`before` is what was compacted"
        );
        assert!(event.compaction.changed());
        assert_eq!(event.compaction.report.tokens_after, event.row.tokens_after);
        assert_eq!(
            self.counter.count_messages(&event.compaction.messages),
            event.row.tokens_after,
            "`compaction` is what the conversation became"
        );
        self.live = event.compaction.messages.len();
        self.seen.push(Seen::Compaction(event.row.at_message));
        self.rows.push(event.row.clone());
    }

    fn on_skip(&mut self, event: &SkippedTrigger<'_>) {
        assert!(event.report.skipped, "{:?}", event.report);
        self.seen.push(Seen::Skip(event.at_message));
        self.skip_reasons.push(event.report.reason.clone());
    }

    fn on_finish(&mut self, conversation: &Conversation) {
        self.seen.push(Seen::Finish);
        assert_eq!(
            conversation.len(),
            self.live,
            "the live conversation at the end"
        );
        self.final_conversation = Some(conversation.clone());
    }
}

/// `report` with its wall times, which differ from run to run, set to zero.
fn untimed(report: &ReplayReport) -> ReplayReport {
    let mut report = report.clone();
    report.ms = 0.0;
    for row in &mut report.compactions {
        row.ms = 0.0;
    }
    report
}

/// Replay `input` at a 4k window through a compression agent of its own.
async fn replay(input: &TranscriptFile, observer: &mut dyn ReplayObserver) -> ReplayReport {
    let policy = ContextPolicy::for_window(4_000);
    policy.validate().unwrap();
    let counter = shared_counter();
    let compressor = Compressor::start(None, counter.clone()).await.unwrap();
    let report = replay_transcript(input, &policy, counter.as_ref(), &compressor, observer).await;
    compressor.shutdown().await;
    report.unwrap()
}

#[tokio::test]
async fn the_observer_sees_every_message_compaction_and_the_final_conversation() {
    let input = long_session(14);
    let counter = shared_counter();
    let mut recorder = Recorder::new();
    let report = replay(&input, &mut recorder).await;

    assert!(!report.compactions.is_empty(), "{report:?}");
    assert_eq!(
        recorder.rows, report.compactions,
        "one event per row, same row"
    );
    assert_eq!(recorder.skip_reasons.len(), report.skipped);
    assert_eq!(
        recorder.skip_reasons.last(),
        report.last_skip_reason.as_ref()
    );

    // Every message is announced once, in order; a compaction or a skip comes right after the
    // message it was triggered at (an emergency one right after the automatic one); the end
    // comes last.
    let messages: Vec<usize> = recorder
        .seen
        .iter()
        .filter_map(|s| match s {
            Seen::Message(n) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(messages, (1..=input.messages.len()).collect::<Vec<_>>());
    for (i, seen) in recorder.seen.iter().enumerate() {
        if let Seen::Compaction(at) | Seen::Skip(at) = seen {
            let fed = recorder.seen[..i]
                .iter()
                .rev()
                .find(|s| !matches!(s, Seen::Compaction(a) | Seen::Skip(a) if a == at));
            assert_eq!(fed, Some(&Seen::Message(*at)), "{:?}", recorder.seen);
        }
    }
    assert_eq!(recorder.seen.last(), Some(&Seen::Finish));

    // The final conversation is the live one the report measured, ending as the transcript does.
    let last = recorder.final_conversation.expect("on_finish was called");
    assert_eq!(
        counter.count_messages(&last.to_messages()),
        report.final_tokens
    );
    assert!(report.final_tokens < report.raw_tokens, "{report:?}");
    assert_eq!(
        last.messages().last().map(|m| m.text()),
        input.messages.last().map(|m| m.text())
    );
}

#[tokio::test]
async fn watching_a_replay_does_not_change_it() {
    let input = long_session(14);
    let quiet = replay(&input, &mut ()).await;
    let mut messages_seen = 0;
    struct CountMessages<'a>(&'a mut usize);
    impl ReplayObserver for CountMessages<'_> {
        fn on_message(&mut self, fed: usize) {
            *self.0 = fed;
        }
    }
    let watched = replay(&input, &mut CountMessages(&mut messages_seen)).await;
    assert!(!quiet.compactions.is_empty(), "{quiet:?}");
    assert!(quiet.invariants_ok);
    assert_eq!(untimed(&quiet), untimed(&watched));
    assert_eq!(messages_seen, input.messages.len());
}

/// A session whose system prompt alone is over a 4k window's trigger: nothing is freeable, so
/// the anti-thrash guard holds back every automatic trigger.
fn crowded_session() -> TranscriptFile {
    let rules: String = (0..280)
        .map(|i| format!("Rule {i}: never touch the generated files under build/.\n"))
        .collect();
    let messages = vec![
        ChatMessage::system(rules),
        ChatMessage::user("Fix the build."),
        ChatMessage::assistant("Looking."),
        ChatMessage::user("Any news?"),
        ChatMessage::assistant("Not yet."),
    ];
    TranscriptFile {
        envelope: Default::default(),
        messages,
        layout: Default::default(),
    }
}

#[tokio::test]
async fn the_observer_sees_the_triggers_the_guard_skipped() {
    let input = crowded_session();
    let mut recorder = Recorder::new();
    let report = replay(&input, &mut recorder).await;
    assert!(report.peak_tokens >= 3_200, "{report:?}");
    assert!(report.compactions.is_empty(), "{report:?}");
    let skips: Vec<&Seen> = recorder
        .seen
        .iter()
        .filter(|s| matches!(s, Seen::Skip(_)))
        .collect();
    assert_eq!(
        skips,
        [&Seen::Skip(2), &Seen::Skip(4)],
        "{:?}",
        recorder.seen
    );
    assert_eq!(report.skipped, 2);
    assert_eq!(
        recorder.skip_reasons.last(),
        report.last_skip_reason.as_ref()
    );
    assert_eq!(recorder.seen.last(), Some(&Seen::Finish));
}

#[tokio::test]
async fn no_model_call_of_a_replay_is_sent_more_than_the_window_minus_the_answers_room() {
    let input = long_session(14);
    let report = replay(&input, &mut ()).await;
    let reserve = CompactionSettings::default().output_reserve_for(None, 4_000);
    assert_eq!(report.output_reserve, reserve);
    assert!(report.max_prompt_tokens > 0, "{report:?}");
    assert!(report.max_prompt_tokens <= report.peak_tokens, "{report:?}");
    assert!(
        report.max_prompt_tokens + reserve <= report.window,
        "{report:?}"
    );
}

/// `troupe replay` mirrors the live agent on every corpus transcript (`--model none`): no model
/// call of the replay would have been sent more than the window at 32k, 64k and 128k.
#[tokio::test]
async fn every_corpus_replay_keeps_every_model_call_within_the_window() {
    let Some(files) = super::support::corpus_files() else {
        return;
    };
    let counter = shared_counter();
    for file in files {
        let input = TranscriptFile::read(&file).unwrap();
        for window in [32_000, 64_000, 128_000] {
            let policy = ContextPolicy::for_window(window);
            let compressor = Compressor::start(None, counter.clone()).await.unwrap();
            let report = replay_transcript(&input, &policy, counter.as_ref(), &compressor, &mut ())
                .await
                .unwrap();
            compressor.shutdown().await;
            let name = file.display();
            assert!(
                report.max_prompt_tokens <= window,
                "{name} at {window}: a model call of {} tokens",
                report.max_prompt_tokens
            );
            assert!(report.invariants_ok, "{name} at {window}");
        }
    }
}
