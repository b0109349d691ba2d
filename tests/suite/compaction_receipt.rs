//! Every compaction that changes a conversation carries a receipt (#31): its report says what
//! it kept cached, what it re-bills and what it saves, and its `compaction` span says the same.

use std::sync::Arc;

use troupe::agents::compression::{
    CompactionCaller, CompactionRequest, CompressionConfig, CompressorModel, compact,
};
use troupe::agents::spawn_compression_agent;
use troupe::compaction::ContextPolicy;
use troupe::compaction::economics::CostModel;
use troupe::protocol::CompactTrigger;
use troupe::protocol::FileLedger;
use troupe::protocol::{ChatMessage, Conversation, Role, ToolCall, TraceContext};
use troupe::runtime::{Team, TeamConfig};
use troupe::tokens::{CharEstimateCounter, TokenCounter};

use super::support::trace::{block_on, spans};
use super::support::with_trace_file;

/// A system prompt, a task, and eight reads with big results: over a 4,000-token trigger.
fn long_conversation() -> Conversation {
    let mut messages = vec![
        ChatMessage::system("You are a careful coder. ".repeat(20)),
        ChatMessage::user("Fix the parser bug in src/parse.rs."),
    ];
    for i in 0..8 {
        let id = format!("call_{i}");
        messages.push(ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                &id,
                "read",
                format!("{{\"path\":\"src/f{i}.rs\"}}"),
            )],
        ));
        messages.push(ChatMessage::tool_result(
            &id,
            (0..60)
                .map(|l| format!("line {l} of file {i}: some code here\n"))
                .collect::<String>(),
        ));
    }
    messages.push(ChatMessage::assistant("I have read everything."));
    Conversation::from_messages(messages)
}

#[test]
fn a_compactions_report_and_span_carry_its_receipt() {
    // No pricing named: OpenAI's default rates, cached at 0.1, a fresh prefix at 1.0.
    carries_its_receipt(None, 0.9, "openai");
}

#[test]
fn a_receipt_is_priced_under_the_pricing_the_policy_names() {
    // Anthropic's: a fresh prefix is written at 1.25, read back at 0.1.
    carries_its_receipt(Some(CostModel::anthropic()), 1.15, "anthropic");
}

/// Compacts through the client under a policy with `pricing`, and checks the receipt by hand:
/// a re-billed token costs `rebill_rate` over a cached one, and the receipt says `name`.
fn carries_its_receipt(pricing: Option<CostModel>, rebill_rate: f64, name: &str) {
    let counter: Arc<dyn TokenCounter> = Arc::new(CharEstimateCounter);
    let conversation = long_conversation();
    let before = conversation.to_messages();
    let policy = ContextPolicy {
        tool_output_limit_tokens: 100_000,
        pricing,
        ..ContextPolicy::for_window(5_000)
    };
    assert!(counter.count_messages(&before) > policy.trigger_tokens());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let compaction = with_trace_file(&path, false, || {
        block_on(async {
            let team = Team::start(TeamConfig::default()).await.unwrap();
            let mut config = CompressionConfig::new(counter.clone());
            config.model = CompressorModel::None;
            spawn_compression_agent(&team, config).await.unwrap();
            let caller = CompactionCaller {
                directory: team.directory(),
                events: team.events(),
                trace: TraceContext::new_root(),
                counter: counter.as_ref(),
            };
            let request = CompactionRequest::new(
                "coder",
                conversation,
                FileLedger::new(),
                policy.clone(),
                CompactTrigger::Manual,
            );
            let compaction = compact(&caller, request).await.unwrap();
            team.shutdown().await;
            compaction
        })
    });
    let after = &compaction.messages;
    let receipt = compaction
        .report
        .receipt
        .expect("a changed conversation is priced");

    // By hand: the kept prefix is the leading messages left as they were.
    let kept = before
        .iter()
        .zip(after)
        .take_while(|(b, a)| b.role == a.role && b.text() == a.text() && b.calls() == a.calls())
        .count();
    assert!(
        kept >= 2 && kept < after.len(),
        "kept {kept} of {}",
        after.len()
    );
    let tokens = |m: &[ChatMessage]| m.iter().map(|m| counter.count_message(m)).sum::<usize>();
    let priming = counter.overhead().reply_priming;
    let (tokens_before, tokens_after) = (tokens(&before) + priming, tokens(after) + priming);
    assert_eq!(receipt.tokens_before, tokens_before);
    assert_eq!(receipt.tokens_after, tokens_after);
    assert_eq!(receipt.cached_prefix_kept, tokens(&after[..kept]));
    assert_eq!(receipt.rebilled_tokens, tokens(&after[kept..]));
    // The mechanical summarizer calls no model: nothing billed for it.
    assert_eq!(
        receipt.summarizer_billed,
        compaction.report.summarizer.input_tokens as f64
    );
    // Expected turns: the room under the trigger over the mean growth per assistant turn.
    let grown = tokens(&before[1..]) as f64;
    let turns = before.iter().filter(|m| m.role == Role::Assistant).count() as f64;
    let room = (policy.trigger_tokens() - compaction.report.tokens_after) as f64;
    let expected_turns = (room / (grown / turns)).max(1.0);
    assert!((receipt.expected_turns - expected_turns).abs() < 1e-9);
    let net = (tokens_before - tokens_after) as f64 * 0.1 * expected_turns
        - receipt.rebilled_tokens as f64 * rebill_rate
        - receipt.summarizer_billed;
    assert_eq!(receipt.pricing, name);
    assert!(
        (receipt.net_saving - net).abs() < 1e-6,
        "{} vs {net}",
        receipt.net_saving
    );

    let spans = spans(&path);
    let span = spans
        .iter()
        .find(|s| s.name == "compaction")
        .expect("a compaction span");
    let attr =
        |name: &str| span.attributes[format!("troupe.compaction.receipt.{name}").as_str()].clone();
    assert_eq!(attr("cached_prefix_kept"), receipt.cached_prefix_kept);
    assert_eq!(attr("tokens_rebilled"), receipt.rebilled_tokens);
    assert!((attr("net_saving").as_f64().unwrap() - receipt.net_saving).abs() < 1e-6);
    assert!((attr("expected_turns").as_f64().unwrap() - receipt.expected_turns).abs() < 1e-9);
    assert!(attr("summarizer_billed").is_number());
    assert_eq!(attr("pricing"), name);
}
