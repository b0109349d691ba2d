//! The bar of issue #31: for every transcript, window and cost model, no emulated strategy is
//! both cheaper than troupe and at least as good on artifact recall.

use serde_json::{Value, json};

use super::report::PeerRow;
use super::tally::COST_MODELS;

/// Recall differences below this are ties (averages of ratios).
const RECALL_EPSILON: f64 = 1e-9;

/// A peer strategy that beats troupe somewhere.
pub(super) struct Beat<'a> {
    pub(super) row: &'a PeerRow,
    pub(super) troupe: &'a PeerRow,
    /// Index into [`COST_MODELS`].
    pub(super) model: usize,
}

impl Beat<'_> {
    pub(super) fn to_json(&self) -> Value {
        json!({
            "transcript": self.row.transcript,
            "split": self.row.split,
            "window": self.row.window,
            "cost_model": COST_MODELS[self.model],
            "strategy": self.row.strategy,
            "billed": self.row.outcome.billed[self.model].round(),
            "troupe_billed": self.troupe.outcome.billed[self.model].round(),
            "recall": self.row.recall_or_one(),
            "troupe_recall": self.troupe.recall_or_one(),
        })
    }

    pub(super) fn line(&self) -> String {
        format!(
            "{} @ {}k ({}): {} bills {:.0} against troupe's {:.0} with recall {:.1} % against {:.1} %",
            self.row.transcript,
            self.row.window / 1000,
            COST_MODELS[self.model],
            self.row.strategy,
            self.row.outcome.billed[self.model],
            self.troupe.outcome.billed[self.model],
            100.0 * self.row.recall_or_one(),
            100.0 * self.troupe.recall_or_one(),
        )
    }
}

/// Every (row, cost model) where a peer — a strategy that is not one of troupe's own roads —
/// is cheaper than `troupe`'s row of the same transcript and window and recalls at least as
/// much (a strategy with nothing at risk counts as recalling everything).
pub(super) fn beats<'a>(rows: &'a [PeerRow], troupe: &str) -> Vec<Beat<'a>> {
    let mut out = Vec::new();
    for base in rows.iter().filter(|r| r.strategy == troupe) {
        for row in rows.iter().filter(|r| {
            !r.strategy.starts_with(troupe)
                && r.transcript == base.transcript
                && r.window == base.window
        }) {
            for model in 0..COST_MODELS.len() {
                if row.outcome.billed[model] < base.outcome.billed[model]
                    && row.recall_or_one() + RECALL_EPSILON >= base.recall_or_one()
                {
                    out.push(Beat {
                        row,
                        troupe: base,
                        model,
                    });
                }
            }
        }
    }
    out
}

/// Per peer strategy, over every transcript, window and cost model: how often it is cheaper
/// than troupe, how often it recalls at least as much, how often both — which axis troupe
/// still has to win on.
pub(super) fn axes(rows: &[PeerRow], troupe: &str) -> Value {
    let mut out = serde_json::Map::new();
    for base in rows.iter().filter(|r| r.strategy == troupe) {
        for row in rows.iter().filter(|r| {
            !r.strategy.starts_with(troupe)
                && r.transcript == base.transcript
                && r.window == base.window
        }) {
            let entry = out
                .entry(row.strategy.to_string())
                .or_insert_with(|| json!({"of": 0, "cheaper": 0, "recall_at_least": 0, "both": 0}));
            let recall = row.recall_or_one() + RECALL_EPSILON >= base.recall_or_one();
            for model in 0..COST_MODELS.len() {
                let cheaper = row.outcome.billed[model] < base.outcome.billed[model];
                for (key, hit) in [
                    ("of", true),
                    ("cheaper", cheaper),
                    ("recall_at_least", recall),
                    ("both", cheaper && recall),
                ] {
                    if hit {
                        entry[key] = json!(entry[key].as_u64().unwrap_or(0) + 1);
                    }
                }
            }
        }
    }
    Value::Object(out)
}

/// The bar's JSON: whether it holds, the rule, every place it does not, and the axes.
pub(super) fn verdict(rows: &[PeerRow], troupe: &str) -> Value {
    let beaten = beats(rows, troupe);
    json!({
        "ok": beaten.is_empty(),
        "rule": "for every transcript, window and cost model: no peer strategy is both cheaper than troupe and at least as good on artifact recall",
        "beaten": beaten.iter().map(Beat::to_json).collect::<Vec<_>>(),
        "axes": axes(rows, troupe),
    })
}
