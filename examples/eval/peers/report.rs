//! The peers mode's rows: one JSON object each, and the markdown table.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::tally::{COST_MODELS, Outcome};

/// One strategy's life over one transcript at one window.
pub(super) struct PeerRow {
    pub(super) transcript: String,
    /// `dev` or `check`.
    pub(super) split: &'static str,
    pub(super) window: usize,
    pub(super) strategy: &'static str,
    pub(super) outcome: Outcome,
}

impl PeerRow {
    /// The recall the bar compares: a strategy that had nothing at risk lost nothing.
    pub(super) fn recall_or_one(&self) -> f64 {
        self.outcome.artifact_recall.unwrap_or(1.0)
    }

    pub(super) fn to_json(&self) -> Value {
        let o = &self.outcome;
        let per_model = |v: [f64; 2], digits: i32| {
            let round = |x: f64| (x * 10f64.powi(digits)).round() / 10f64.powi(digits);
            json!({ COST_MODELS[0]: round(v[0]), COST_MODELS[1]: round(v[1]) })
        };
        json!({
            "transcript": self.transcript,
            "split": self.split,
            "window": self.window,
            "strategy": self.strategy,
            "billed_tokens": per_model(o.billed, 0),
            "compaction_billed_tokens": per_model(o.compaction_billed, 0),
            "cache_hit": per_model(o.cache_hit, 4),
            "compactions": o.compactions,
            "agent_calls": o.agent_calls,
            "artifact_recall": o.artifact_recall.map(|r| (r * 10_000.0).round() / 10_000.0),
            "recall_at": o.recall_at.label(),
            "max_prompt_tokens": o.max_prompt_tokens,
            "invariants_ok": o.invariants_ok,
        })
    }
}

/// One line per row, troupe's row of each transcript and window first; the peers' cost is
/// also given as a multiple of troupe's.
pub(super) fn table(rows: &[PeerRow], troupe: &str) -> String {
    let mut md = String::from(
        "| transcript | set | window | strategy | billed openai (× troupe) | billed anthropic (× troupe) | cache hit openai / anthropic | of it compaction (openai) | compactions | strict recall (at) | max prompt | invariants |\n\
         | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for r in rows {
        let o = &r.outcome;
        let base = rows
            .iter()
            .find(|b| b.strategy == troupe && b.transcript == r.transcript && b.window == r.window);
        let billed = |i: usize| match base {
            Some(b) if b.outcome.billed[i] > 0.0 => format!(
                "{:.0} ({:.2})",
                o.billed[i],
                o.billed[i] / b.outcome.billed[i]
            ),
            _ => format!("{:.0}", o.billed[i]),
        };
        let recall = match o.artifact_recall {
            Some(v) => format!("{:.1} %", 100.0 * v),
            None => "–".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {}k | {} | {} | {} | {:.1} % / {:.1} % | {:.0} | {} | {recall} ({}) | {} | {} |",
            r.transcript,
            r.split,
            r.window / 1000,
            r.strategy,
            billed(0),
            billed(1),
            100.0 * o.cache_hit[0],
            100.0 * o.cache_hit[1],
            o.compaction_billed[0],
            o.compactions,
            o.recall_at.label(),
            o.max_prompt_tokens,
            if o.invariants_ok { "ok" } else { "FAILED" },
        );
    }
    md
}
