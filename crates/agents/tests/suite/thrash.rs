//! The compaction death spiral: an agent whose target cannot be reached must not recompact
//! after every turn. The anti-thrash guard holds automatic triggers back until
//! `ContextPolicy::min_freeable_tokens` new tokens could be freed, on the live path too.

use std::sync::Arc;

use troupe_agents::compression::CompressionConfig;
use troupe_agents::compression::CompressorModel;
use troupe_agents::{
    AgentSpec, CompactionSettings, WorkAhead, shared_counter, spawn_agent, spawn_compression_agent,
};
use troupe_compaction::ContextPolicy;
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{ChatMessage, ChatModel, Event};
use troupe_runtime::{Team, TeamConfig};
use troupe_tokens::TokenCounter;

/// Instructions that alone are over the trigger: the system prompt is protected, so no
/// compaction can reach the target.
fn huge_instructions(counter: &dyn TokenCounter, tokens: usize) -> String {
    let mut text = String::from("You are a careful engineer. Project notes follow.\n");
    let mut i = 0;
    while counter.count_messages(&[ChatMessage::system(text.clone())]) < tokens {
        text.push_str(&format!(
            "note {i}: the build uses cargo and the tests live in tests/\n"
        ));
        i += 1;
    }
    text
}

const TURNS: usize = 20;

/// What 20 turns over an unreachable target did: compactions skipped by the guard, run, the
/// tokens the turns added, and the compressor model's calls.
struct Spiral {
    skipped: usize,
    compactions: usize,
    new_tokens: usize,
    model_calls: usize,
}

#[tokio::test]
async fn an_unreachable_target_compacts_at_most_once_per_min_freeable_tokens_over_20_turns() {
    // The blocking road: past the trigger after every turn, so the trigger fires every turn.
    let spiral = spiral(WorkAhead::Off).await;
    assert!(
        spiral.skipped + spiral.compactions >= TURNS - 1,
        "{} skipped, {} ran",
        spiral.skipped,
        spiral.compactions
    );
    assert_held_back(&spiral);
}

#[tokio::test]
async fn working_ahead_over_an_unreachable_target_is_held_back_the_same() {
    // The background road: past the trigger a job starts whenever none runs (and the request
    // grew a step since the last one changed nothing); the guard holds it back the same.
    let spiral = spiral(WorkAhead::AtWarning).await;
    assert!(
        spiral.skipped + spiral.compactions >= 1,
        "no compaction tried"
    );
    assert_held_back(&spiral);
}

/// A compaction ran at most once per `min_freeable_tokens` of new material, and each cost at
/// most its iteration budget.
fn assert_held_back(spiral: &Spiral) {
    let policy = ContextPolicy::for_window(8_000);
    let allowed = 1 + spiral.new_tokens / policy.min_freeable_tokens;
    assert!(
        spiral.compactions <= allowed,
        "{} compactions in {TURNS} turns adding {} tokens (at most {allowed})",
        spiral.compactions,
        spiral.new_tokens
    );
    assert!(
        spiral.model_calls
            <= spiral.compactions * troupe_agents::compression::DEFAULT_MAX_ITERATIONS as usize,
        "the compressor's model ran {} times for {} compactions",
        spiral.model_calls,
        spiral.compactions
    );
}

async fn spiral(work_ahead: WorkAhead) -> Spiral {
    let counter = shared_counter();
    let policy = ContextPolicy::for_window(8_000);
    assert_eq!(policy.min_freeable_tokens, 800);
    let team = Team::start(TeamConfig::default()).await.unwrap();
    // A compressor model that never stops working: every compaction it gets to run costs its
    // whole iteration budget, which is what makes a spiral expensive.
    let compressor_model = Arc::new(ScriptedModel::new(
        "compressor-model",
        (0..400).map(|_| ScriptedReply::call("get_compression_metadata", "{}")),
    ));
    let mut config = CompressionConfig::new(counter.clone());
    config.model = CompressorModel::Fixed(compressor_model.clone() as Arc<dyn ChatModel>);
    spawn_compression_agent(&team, config).await.unwrap();

    let agent_model = Arc::new(ScriptedModel::new("coder", []).with_fallback("Noted, done."));
    let spec = AgentSpec::new("coder", agent_model)
        .instructions(huge_instructions(counter.as_ref(), 6_600))
        .compaction(CompactionSettings {
            policy: Some(policy.clone()),
            // No room kept for answers: the 6.6k-token prompt and a reserve would not fit the
            // 8k window, and that refusal is `precall.rs`'s subject; this is the trigger's.
            output_reserve: Some(0),
            work_ahead,
            ..CompactionSettings::default()
        });
    spawn_agent(&team, spec).await.unwrap();
    let mut events = team.subscribe();

    let mut new_tokens = 0;
    for turn in 0..TURNS {
        let text = format!("Turn {turn}: please note that module m{turn} is finished.");
        new_tokens += counter.count_messages(&[ChatMessage::user(text.clone())]) + 8;
        team.ask("coder", &text).await.unwrap();
    }

    let (mut compactions, mut skipped) = (0, 0);
    while let Ok(record) = events.try_recv() {
        if let Event::CompactionFinished { agent, report, .. } = record.event {
            assert_eq!(agent, "coder");
            if report.skipped {
                skipped += 1;
            } else {
                compactions += 1;
                assert!(!report.reached, "the target is unreachable: {report:?}");
            }
        }
    }
    let model_calls = compressor_model.requests().len();
    team.shutdown().await;
    Spiral {
        skipped,
        compactions,
        new_tokens,
        model_calls,
    }
}
