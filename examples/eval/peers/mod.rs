//! `--mode peers`: troupe's compaction side by side with the field's (issue #31). Every
//! strategy lives every transcript like an agent — before each assistant message a model call
//! whose prompt is its current context; at its trigger it compacts, its summarizer call billed
//! as the compaction's — and every prompt is billed through both providers' emulated prompt
//! caches (`troupe::compaction::economics::PromptCache`: OpenAI's automatic prefix caching,
//! Anthropic's breakpoints with the one placement rule troupe uses). All strategies summarize
//! with the same summarizer (troupe's mechanical one, the `--model none` road), with the same
//! body bound, so the comparison is about strategy, and deterministic.
//!
//! The strategies, emulated from their documentation (the parameters and where they come from
//! are in each file; absolute token figures assume a 200k window and are scaled to the window):
//! `claude-code` ([`claude_code`]), `codex` ([`codex`]), `pi` ([`pi`]), `openhands-masking`
//! ([`openhands`]), and troupe's own roads ([`troupe_road`]): `troupe` as it ships and the
//! variants in [`STRATEGIES`], the one list.
//!
//! Per row: billed-equivalent input tokens and cache hit rate per cost model, compactions,
//! strict artifact recall (issue #28's definition, over every artifact the transcript named so
//! far, on the context right after each compaction, averaged — or, for a strategy that never
//! compacted, on its last prompt, which `recall_at` says), the largest prompt, and whether
//! every prompt kept tool calls and results paired (plus troupe's `validate` of each of its
//! compactions). The bar ([`bar`]): for every transcript, window and cost model, no peer is both
//! cheaper than `troupe` and at least as good on recall; and over the whole run no peer bills
//! less in total than `troupe` under either cost model ([`totals`], issue #42).

mod bar;
mod claude_code;
mod codex;
mod live;
mod memo;
mod openhands;
mod pi;
mod report;
mod summarizer;
mod tally;
#[cfg(test)]
mod tests;
mod totals;
mod troupe_road;

use troupe::compaction::ContextPolicy;
use troupe::tokens::{TiktokenCounter, TokenCounter};
use troupe_cli::transcript_file::TranscriptFile;

use self::live::{Env, Peer, live};
use self::report::PeerRow;
use self::tally::Outcome;
use self::troupe_road::{SummaryCall, TroupeVariant, live_troupe};

/// A compaction strategy to live the transcripts with.
#[derive(Debug, Clone, Copy)]
enum Strategy {
    ClaudeCode,
    Codex,
    Pi,
    OpenHandsMasking,
    Troupe(TroupeVariant),
}

/// The row the bar compares every peer against.
const TROUPE: &str = "troupe";

/// Every strategy the mode runs, in the table's order. Troupe's own roads are named `troupe…`
/// (the bar compares the peers against `troupe` alone); a variant is one line here.
const STRATEGIES: [(&str, Strategy); 9] = [
    // As it ships: the shipped policy for the window, the compressor summarizing with the
    // agent's own model (the default), its call riding the agent's cache.
    (TROUPE, troupe(None, None, SummaryCall::Inline)),
    // A summarizer model of its own: billed exactly as `troupe replay --cost` bills it.
    ("troupe-separate", troupe(None, None, SummaryCall::Separate)),
    // The fixed 40 % target instead of the cost-aware one.
    (
        "troupe-fixed-target",
        troupe(None, Some(false), SummaryCall::Inline),
    ),
    // A harder fixed target: fewer compactions, more re-read per compaction.
    (
        "troupe-target-0.3",
        troupe(Some(0.3), Some(false), SummaryCall::Inline),
    ),
    // A later trigger (the shipped one is 80 %, less the answer's room).
    (
        "troupe-trigger-0.85",
        Strategy::Troupe(TroupeVariant {
            target: None,
            trigger: Some(0.85),
            cost_aware: None,
            summary_call: SummaryCall::Inline,
        }),
    ),
    ("claude-code", Strategy::ClaudeCode),
    ("codex", Strategy::Codex),
    ("pi", Strategy::Pi),
    ("openhands-masking", Strategy::OpenHandsMasking),
];

const fn troupe(
    target: Option<f64>,
    cost_aware: Option<bool>,
    summary_call: SummaryCall,
) -> Strategy {
    Strategy::Troupe(TroupeVariant {
        target,
        trigger: None,
        cost_aware,
        summary_call,
    })
}

/// Live one transcript at one window with one strategy.
async fn outcome(
    strategy: Strategy,
    input: &TranscriptFile,
    window: usize,
    counter: &dyn TokenCounter,
) -> anyhow::Result<Outcome> {
    let env = Env {
        window,
        counter,
        summary_tokens: ContextPolicy::for_window(window).summary_max_tokens,
    };
    let messages = &input.messages;
    let mut peer: Box<dyn Peer> = match strategy {
        Strategy::Troupe(variant) => {
            return live_troupe(input, window, variant, counter).await;
        }
        Strategy::ClaudeCode => Box::<claude_code::ClaudeCode>::default(),
        Strategy::Codex => Box::<codex::Codex>::default(),
        Strategy::Pi => Box::<pi::Pi>::default(),
        Strategy::OpenHandsMasking => {
            Box::new(openhands::OpenHandsMasking::for_transcript(messages))
        }
    };
    Ok(live(messages, peer.as_mut(), &env))
}

/// Run every strategy on every transcript at every window; print the JSON line (and, without
/// `json`, the markdown table first). Returns whether the bar holds.
pub(super) async fn run(
    inputs: &[(String, TranscriptFile)],
    windows: &[usize],
    dev: &[&str],
    json: bool,
) -> anyhow::Result<bool> {
    let counter = memo::MemoCounter::new(TiktokenCounter::default());
    let mut rows = Vec::new();
    for &window in windows {
        for (name, input) in inputs {
            for (strategy_name, strategy) in STRATEGIES {
                eprintln!("{name} @ {window}: {strategy_name}");
                rows.push(PeerRow {
                    transcript: name.clone(),
                    split: if dev.contains(&name.as_str()) {
                        "dev"
                    } else {
                        "check"
                    },
                    window,
                    strategy: strategy_name,
                    outcome: outcome(strategy, input, window, &counter).await?,
                });
            }
        }
    }
    let beaten = bar::beats(&rows, TROUPE);
    let totals = totals::totals(&rows);
    let cheaper = totals::cheaper_in_total(&totals, TROUPE);
    let total_line = |(t, m): &(&totals::Total, usize)| {
        format!(
            "{} bills {:.0} in total under {} against troupe's {:.0}",
            t.strategy,
            t.billed[*m],
            tally::COST_MODELS[*m],
            totals
                .iter()
                .find(|b| b.strategy == TROUPE)
                .map_or(0.0, |b| b.billed[*m]),
        )
    };
    if !json {
        println!("{}", report::table(&rows, TROUPE));
        println!("{}", totals::table(&totals, TROUPE));
        if beaten.is_empty() && cheaper.is_empty() {
            println!(
                "The bar holds: no peer is both cheaper than troupe and at least as good on recall, and none bills less in total.\n"
            );
        } else {
            println!("The bar fails ({} places):", beaten.len() + cheaper.len());
            for beat in &beaten {
                println!("- {}", beat.line());
            }
            for total in &cheaper {
                println!("- {}", total_line(total));
            }
            println!();
        }
    }
    let mut verdict = bar::verdict(&rows, TROUPE);
    verdict["ok"] = serde_json::json!(beaten.is_empty() && cheaper.is_empty());
    verdict["cheaper_in_total"] =
        serde_json::json!(cheaper.iter().map(total_line).collect::<Vec<_>>());
    let line = serde_json::json!({
        "rows": rows.iter().map(PeerRow::to_json).collect::<Vec<_>>(),
        "totals": totals::to_json(&totals),
        "bar": verdict,
    });
    println!("{}", serde_json::to_string(&line)?);
    for beat in &beaten {
        eprintln!("beats troupe: {}", beat.line());
    }
    for total in &cheaper {
        eprintln!("cheaper in total: {}", total_line(total));
    }
    Ok(beaten.is_empty() && cheaper.is_empty())
}
