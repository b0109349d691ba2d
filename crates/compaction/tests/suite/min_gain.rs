//! The minimum-gain rule (#31): an automatic compaction that would re-bill more than it saves
//! over the turns until the next one is declined before it runs — never a manual or emergency
//! one, and never when the window needs it.

use troupe_compaction::economics::CostModel;
use troupe_compaction::{CompactOptions, Compaction, ContextPolicy, compact};
use troupe_protocol::CompactTrigger;
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, Conversation, ToolCall};
use troupe_tokens::{CharEstimateCounter, TokenCounter};

use super::support::block_on;

/// A 32k window whose trigger is lowered as an agent's is for its answer's room (60 %), with
/// the fixed 40 % target (a cost-aware target shrinks further here, and then compacting pays).
fn policy() -> ContextPolicy {
    ContextPolicy {
        trigger: 0.6,
        warning: 0.5,
        cost_aware: false,
        ..ContextPolicy::for_window(32_000)
    }
}

/// A system prompt, a task, then reads of about 1,000 tokens each until `tokens` are reached.
fn session(tokens: usize) -> Conversation {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a careful coding agent."));
    c.push(ChatMessage::user("Fix the parser bug."));
    for t in 0.. {
        if CharEstimateCounter.count_messages(&c.to_messages()) >= tokens {
            break;
        }
        let id = format!("r{t}");
        c.push(ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                &id,
                "read",
                format!(r#"{{"path":"src/m{t}.rs"}}"#),
            )],
        ));
        c.push(ChatMessage::tool_result(
            &id,
            format!("fn f{t}() {{}}\n").repeat(400),
        ));
    }
    c
}

fn run(conversation: &Conversation, trigger: CompactTrigger) -> Compaction {
    run_priced(conversation, trigger, None)
}

fn run_priced(
    conversation: &Conversation,
    trigger: CompactTrigger,
    pricing: Option<CostModel>,
) -> Compaction {
    let options = CompactOptions {
        trigger,
        ..CompactOptions::default()
    };
    block_on(compact(
        conversation,
        &FileLedger::new(),
        &ContextPolicy {
            pricing,
            ..policy()
        },
        &CharEstimateCounter,
        None,
        options,
    ))
    .unwrap()
}

#[test]
fn an_automatic_compaction_that_would_rebill_more_than_it_saves_is_declined() {
    // ~20k tokens, ~1k a turn: it would keep ~12.8k, all re-billed, to save ~7k tokens read
    // cached for ~6 turns. The window (less a quarter for the answer) still has room.
    let conversation = session(20_000);
    let declined = run(&conversation, CompactTrigger::Automatic);
    assert!(
        declined.report.skipped && !declined.changed(),
        "{:?}",
        declined.report
    );
    assert!(
        declined
            .report
            .reason
            .starts_with("compaction skipped: declined: would re-bill "),
        "{}",
        declined.report.reason
    );
    assert!(
        declined.report.reason.contains("turns"),
        "{}",
        declined.report.reason
    );
    // The agent's own tool is rate-limited like the trigger: declined too.
    assert!(run(&conversation, CompactTrigger::AgentTool).report.skipped);
    // A person and an emergency are never declined.
    for trigger in [CompactTrigger::Manual, CompactTrigger::Emergency] {
        let compaction = run(&conversation, trigger);
        assert!(
            compaction.changed() && !compaction.report.skipped,
            "{trigger}"
        );
    }
}

#[test]
fn an_automatic_compaction_runs_when_the_window_needs_it() {
    // ~23.5k tokens: one more ~1k turn passes 24k, the window less the largest answer room.
    let conversation = session(23_500);
    let compaction = run(&conversation, CompactTrigger::Automatic);
    assert!(
        compaction.changed() && !compaction.report.skipped,
        "{}",
        compaction.report.reason
    );
}

#[test]
fn a_policy_that_names_its_pricing_is_weighed_under_it_alone() {
    // Unnamed, a compaction is declined when it loses under either provider's caching; named,
    // only under that one. The system prompt is the prefix a compaction keeps cached: as it
    // grows, less is re-billed, and somewhere the two providers disagree (Anthropic's cache
    // write makes a rewrite dearer).
    let mut disagree = 0;
    for system_tokens in (6_000..=12_000).step_by(250) {
        let mut conversation = Conversation::new();
        conversation.push(ChatMessage::system(
            "Keep to the rules. ".repeat(system_tokens / 5),
        ));
        for m in session(20_000 - system_tokens)
            .to_messages()
            .into_iter()
            .skip(1)
        {
            conversation.push(m);
        }
        let declined = |pricing| {
            run_priced(&conversation, CompactTrigger::Automatic, pricing)
                .report
                .skipped
        };
        let either = declined(None);
        let openai = declined(Some(CostModel::openai()));
        let anthropic = declined(Some(CostModel::anthropic()));
        assert_eq!(either, openai || anthropic, "{system_tokens} system tokens");
        if openai != anthropic {
            assert!(anthropic && !openai, "{system_tokens} system tokens");
            disagree += 1;
        }
    }
    assert!(disagree > 0, "the two providers never disagreed");
}
