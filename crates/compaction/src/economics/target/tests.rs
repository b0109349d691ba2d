//! The cost-aware target's tests: the closed form against a simulated cycle, hand-computed
//! optima, the bounds, and compactions that take the chosen aim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::*;
use crate::economics::Rates;
use crate::summary::MechanicalSummarizer;
use crate::{CompactOptions, Compaction, compact};
use troupe_tokens::TiktokenCounter;

fn inputs(window: usize, growth: f64, road: SummaryRoad) -> TargetInputs {
    TargetInputs {
        window,
        trigger_tokens: window * 8 / 10,
        head_tokens: 2_000,
        floor_tokens: window / 10,
        growth_per_turn: growth,
        refetch_tokens: 1_500.0,
        summary: road,
    }
}

const CACHED: SummaryRoad = SummaryRoad::CachedPrompt {
    instruction_tokens: 500,
};

/// The per-turn bill by playing the cycle turn by turn: the first call after a compaction
/// reads the head cached and the rest fresh, each later call reads the one before cached
/// and its new tokens fresh; the summarizer is paid once; a miss happens at each turn with
/// its probability. An independent computation of what `billed_per_turn` writes in closed
/// form (which averages the prompt over the cycle).
fn simulated(inputs: &TargetInputs, model: &CostModel, rule: &TargetRule, x: f64) -> f64 {
    let rates = model.rates();
    let (c, f) = (rates.cached_read, model.fresh_prefix_rate());
    let t = inputs.trigger_tokens as f64;
    let (g, h) = (inputs.growth_per_turn, inputs.head_tokens as f64);
    let turns = ((t - x) / g).round() as usize;
    let mut billed = 0.0;
    for k in 0..turns {
        let prompt = x + (k as f64 + 0.5) * g;
        billed += c * prompt + (f - c) * g;
        billed += f * inputs.refetch_tokens * (-(prompt - h) / rule.reach_tokens).exp();
    }
    billed += (f - c) * (x - h);
    billed += match inputs.summary {
        SummaryRoad::CachedPrompt { instruction_tokens } => c * t + f * instruction_tokens as f64,
        SummaryRoad::OwnPrompt { instruction_tokens } => f * (t - x + instruction_tokens as f64),
        SummaryRoad::Either {
            inline_instruction_tokens,
            own_instruction_tokens,
        } => (c * t + f * inline_instruction_tokens as f64)
            .min(f * (t - x + own_instruction_tokens as f64)),
        SummaryRoad::NoModel => 0.0,
    };
    billed / turns as f64
}

#[test]
fn the_closed_form_matches_a_turn_by_turn_cycle() {
    let rule = TargetRule::default();
    let either = SummaryRoad::Either {
        inline_instruction_tokens: 500,
        own_instruction_tokens: 400,
    };
    for road in [CACHED, either, SummaryRoad::NoModel] {
        let inputs = inputs(100_000, 1_000.0, road);
        for x in [20_000.0, 40_000.0, 60_000.0] {
            let closed = billed_per_turn(&inputs, &CostModel::openai(), &rule, x);
            let played = simulated(&inputs, &CostModel::openai(), &rule, x);
            assert!(
                (closed - played).abs() / played < 0.02,
                "{x}: {closed} vs {played}"
            );
        }
    }
}

#[test]
fn a_hand_computed_optimum() {
    // Window 100k, trigger 80k, head 2k, 1k tokens a turn, re-fetches of 1.5k tokens, a
    // reach of 16k, OpenAI rates (c = 0.1, f = 1), summary on the cached prompt (0.1·80k +
    // 500 = 8.5k a compaction). Per turn, with n = (80k − x)/1k:
    //   J(x) = 0.05·(x + 80k) + 900 + (0.9·(x − 2k) + 8.5k)/n + 1.5k·miss(x)
    //   miss(x) = 16k/(80k − x)·(exp(−(x − 2k)/16k) − exp(−78k/16k))
    // J(20k) = 5000 + 900 + 24.7k/60 (411.7) + 1.5k·0.08454 (126.8) = 6438.5
    // J(30k) = 5500 + 900 + 33.7k/50 (674.0) + 1.5k·0.05316 (79.7)  = 7153.7
    // so the lowest target wins: at these rates keeping context costs more than fetching
    // again what the agent reaches for.
    let inputs = inputs(100_000, 1_000.0, CACHED);
    let rule = TargetRule::default();
    let model = CostModel::openai();
    let j20 = billed_per_turn(&inputs, &model, &rule, 20_000.0);
    let j30 = billed_per_turn(&inputs, &model, &rule, 30_000.0);
    assert!((j20 - 6438.5).abs() < 0.1, "{j20}");
    assert!((j30 - 7153.7).abs() < 0.1, "{j30}");
    // The floor is 0.2 of the window capped at 16k tokens: 0.16 of 100k.
    let j16 = billed_per_turn(&inputs, &model, &rule, 16_000.0);
    assert!(j16 < j20, "{j16} vs {j20}");
    assert!((cost_aware_target(&inputs, &model, &rule) - 0.16).abs() < 1e-9);
    // A long reach and costly re-fetches (the agent keeps going back to large outputs) make
    // misses the larger cost: with λ = 30k and re-fetches of 20k tokens the optimum moves
    // inside the bounds, to 0.298 of the window by a scan of J in steps of 100 tokens.
    let far = TargetRule {
        reach_tokens: 30_000.0,
        min_cap_tokens: 30_000,
        ..rule
    };
    let heavy = TargetInputs {
        refetch_tokens: 20_000.0,
        ..inputs
    };
    let chosen = cost_aware_target(&heavy, &model, &far);
    assert!((chosen - 0.298).abs() < 0.002, "{chosen}");
    let at = |f: f64| billed_per_turn(&heavy, &model, &far, f * 100_000.0);
    assert!(at(chosen) <= at(chosen - 0.01) && at(chosen) <= at(chosen + 0.01));
}

#[test]
fn the_floor_and_the_trigger_bound_the_choice() {
    let mut inputs = inputs(32_000, 500.0, CACHED);
    inputs.floor_tokens = 16_000;
    let chosen = cost_aware_target(&inputs, &CostModel::openai(), &TargetRule::default());
    assert!((chosen - 0.5).abs() < 1e-9, "{chosen}");
    // A trigger at 45 %: the target stays a hundredth below it.
    inputs.floor_tokens = 1_000;
    inputs.trigger_tokens = 14_400;
    let chosen = cost_aware_target(
        &inputs,
        &CostModel::openai(),
        &TargetRule {
            min: 0.5,
            ..TargetRule::default()
        },
    );
    assert!((chosen - 0.44).abs() < 1e-9, "{chosen}");
}

/// system, task, 30 turns of a read and its ~600-token result, a last question: at the
/// trigger of a 32k window.
fn session() -> troupe_protocol::Conversation {
    use troupe_protocol::ToolCall;
    let mut messages = vec![
        ChatMessage::system("You are a coder."),
        ChatMessage::user("Read the files."),
    ];
    for i in 0..30 {
        let call = ToolCall::new(format!("c{i}"), "read", format!(r#"{{"path":"f{i}"}}"#));
        messages.push(ChatMessage::assistant_tool_calls(None, vec![call]));
        let body: String = (0..40)
            .map(|l| format!("line {l} of f{i}: some words of content\n"))
            .collect();
        messages.push(ChatMessage::tool_result(format!("c{i}"), body));
    }
    messages.push(ChatMessage::user("and now?"));
    troupe_protocol::Conversation::from_messages(messages)
}

/// `session()` under `policy`: the policy the rule chooses for an automatic compaction.
fn chosen_for_session(policy: &ContextPolicy) -> Option<ContextPolicy> {
    let summarizer = MechanicalSummarizer::new();
    let summarizer: &dyn Summarizer = &summarizer;
    let messages = session();
    cost_aware_policy(
        policy,
        messages.messages(),
        counter(),
        Some(summarizer),
        CompactTrigger::Automatic,
    )
}

/// `session()` compacted under `policy` as `trigger` asks, with the mechanical summarizer.
async fn compact_session(policy: &ContextPolicy, trigger: CompactTrigger) -> Compaction {
    let options = CompactOptions {
        trigger,
        ..CompactOptions::default()
    };
    let summarizer = MechanicalSummarizer::new();
    let ledger = troupe_protocol::FileLedger::new();
    compact(
        &session(),
        &ledger,
        policy,
        counter(),
        Some(&summarizer),
        options,
    )
    .await
    .unwrap()
}

/// One exact counter for these tests (its tables are expensive to build).
fn counter() -> &'static TiktokenCounter {
    static COUNTER: std::sync::LazyLock<TiktokenCounter> =
        std::sync::LazyLock::new(TiktokenCounter::default);
    &COUNTER
}

#[tokio::test]
async fn an_automatic_compaction_never_aims_above_the_conversation() {
    let current: usize = session()
        .messages()
        .iter()
        .map(|m| counter().count_message(m))
        .sum();
    // 15 % of the window, as a job worked ahead may find it: the rule's lowest aim (20 %) is
    // above the conversation, and would leave it as it is.
    let policy = ContextPolicy {
        cost_aware: true,
        min_freeable_tokens: 0,
        target: 0.05,
        ..ContextPolicy::for_window(current * 100 / 15)
    };
    let chosen = chosen_for_session(&policy).unwrap();
    assert!(chosen.target_tokens() < current, "{}", chosen.target);
    let compaction = compact_session(&policy, CompactTrigger::Automatic).await;
    assert!(compaction.changed(), "{:?}", compaction.report);
    assert!(compaction.report.tokens_after < current);
    // The agent's own `compact` tool is asked, not due: under the rule's aim, nothing to do.
    let asked = compact_session(&policy, CompactTrigger::AgentTool).await;
    assert!(!asked.changed(), "{:?}", asked.report);
}

#[tokio::test]
async fn automatic_compactions_take_the_chosen_target_and_manual_ones_the_configured() {
    let policy = ContextPolicy {
        cost_aware: true,
        min_freeable_tokens: 0,
        ..ContextPolicy::for_window(32_000)
    };
    let chosen = chosen_for_session(&policy).unwrap();
    // Growth ~700 tokens a turn, re-fetches ~600: cost says compact as hard as allowed.
    assert!((chosen.target - 0.2).abs() < 1e-9, "{}", chosen.target);
    let off = ContextPolicy {
        cost_aware: false,
        ..policy.clone()
    };
    assert_eq!(chosen_for_session(&off), None);
    let manual = compact_session(&policy, CompactTrigger::Manual).await;
    assert_eq!(manual.report.target_tokens, policy.target_tokens());
    let automatic = compact_session(&policy, CompactTrigger::Automatic).await;
    assert_eq!(automatic.report.target_tokens, chosen.target_tokens());
}

fn any_inputs() -> impl Strategy<Value = TargetInputs> {
    (
        prop_oneof![Just(32_000usize), Just(128_000), Just(200_000)],
        100.0f64..4_000.0,
        0usize..4_000,
        100.0f64..8_000.0,
        0usize..3,
    )
        .prop_map(|(window, growth, head, refetch, road)| TargetInputs {
            window,
            trigger_tokens: window * 8 / 10,
            head_tokens: head,
            floor_tokens: head + 2_000,
            growth_per_turn: growth,
            refetch_tokens: refetch,
            summary: match road {
                0 => CACHED,
                1 => SummaryRoad::OwnPrompt {
                    instruction_tokens: 600,
                },
                _ => SummaryRoad::NoModel,
            },
        })
}

fn any_rule() -> impl Strategy<Value = TargetRule> {
    (
        0.1f64..0.35,
        0.4f64..0.7,
        1_000.0f64..300_000.0,
        1_000usize..100_000,
    )
        .prop_map(|(min, max, reach, cap)| TargetRule {
            min,
            min_cap_tokens: cap,
            max,
            reach_tokens: reach,
        })
}

proptest! {
    #[test]
    fn the_choice_stays_within_its_bounds(
        inputs in any_inputs(),
        rule in any_rule(),
        cached in 0.0f64..1.0,
    ) {
        let model = CostModel::openai().with_rates(Rates { cached_read: cached, ..Rates::OPENAI });
        let chosen = cost_aware_target(&inputs, &model, &rule);
        let floor = inputs.floor_tokens as f64 / inputs.window as f64;
        let lowest = rule.floor_fraction(inputs.window);
        prop_assert!(chosen >= lowest.max(floor).min(0.79) - 1e-9, "{chosen}");
        prop_assert!(chosen <= rule.max.max(floor) + 1e-9, "{chosen}");
        prop_assert!(chosen < 0.8);
    }

    /// The rule's floor in tokens never shrinks as the window grows, and never asks for more
    /// than its cap or its fraction.
    #[test]
    fn the_floor_in_tokens_never_shrinks_with_the_window(
        rule in any_rule(),
        window in 1_000usize..1_000_000,
        more in 0usize..1_000_000,
    ) {
        let tokens = |w: usize| rule.floor_fraction(w) * w as f64;
        prop_assert!(tokens(window + more) + 1e-6 >= tokens(window));
        prop_assert!(tokens(window) <= rule.min_cap_tokens as f64 + 1e-6);
        prop_assert!(tokens(window) <= rule.min * window as f64 + 1e-6);
    }

    /// Cheaper cached reads never lower the target when the summary rides the cached
    /// prompt (`∂²J/∂x∂c > 0`); a grid step of slack for the search.
    #[test]
    fn cheaper_cached_reads_never_lower_the_target(
        inputs in any_inputs(),
        rule in any_rule(),
        cheap in 0.0f64..0.5,
        extra in 0.0f64..0.5,
    ) {
        let inputs = TargetInputs { summary: CACHED, ..inputs };
        let at = |cached: f64| {
            let model = CostModel::anthropic()
                .with_rates(Rates { cached_read: cached, ..Rates::ANTHROPIC });
            cost_aware_target(&inputs, &model, &rule)
        };
        let step = (rule.max - rule.floor_fraction(inputs.window)) / SEARCH_STEPS as f64;
        prop_assert!(at(cheap) >= at(cheap + extra) - step - 1e-9);
    }
}
