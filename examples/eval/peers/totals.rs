//! Each strategy's billed total over every transcript and window of the run, beside troupe's
//! (issue #42: troupe's total is at most every peer's, under both cost models).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::report::PeerRow;
use super::tally::COST_MODELS;

/// One strategy's billed-equivalent input tokens summed over the run, per cost model.
pub(super) struct Total {
    pub(super) strategy: &'static str,
    pub(super) billed: [f64; 2],
}

/// Every strategy's total, in the order the rows first name them.
pub(super) fn totals(rows: &[PeerRow]) -> Vec<Total> {
    let mut out: Vec<Total> = Vec::new();
    for row in rows {
        let at = match out.iter().position(|t| t.strategy == row.strategy) {
            Some(at) => at,
            None => {
                out.push(Total {
                    strategy: row.strategy,
                    billed: [0.0; 2],
                });
                out.len() - 1
            }
        };
        for (sum, billed) in out[at].billed.iter_mut().zip(row.outcome.billed) {
            *sum += billed;
        }
    }
    out
}

/// (peer, index into [`COST_MODELS`]) wherever a peer — a strategy that is not one of troupe's
/// own roads — bills less in total than `troupe`.
pub(super) fn cheaper_in_total<'a>(totals: &'a [Total], troupe: &str) -> Vec<(&'a Total, usize)> {
    let Some(base) = totals.iter().find(|t| t.strategy == troupe) else {
        return Vec::new();
    };
    totals
        .iter()
        .filter(|t| !t.strategy.starts_with(troupe))
        .flat_map(|t| (0..COST_MODELS.len()).map(move |m| (t, m)))
        .filter(|(t, m)| t.billed[*m] < base.billed[*m])
        .collect()
}

/// The totals as a markdown table, each also as a multiple of troupe's.
pub(super) fn table(totals: &[Total], troupe: &str) -> String {
    let base = totals.iter().find(|t| t.strategy == troupe);
    let mut md = String::from(
        "| strategy | billed total, openai (× troupe) | billed total, anthropic (× troupe) |\n\
         | --- | ---: | ---: |\n",
    );
    for t in totals {
        let cell = |m: usize| match base {
            Some(b) if b.billed[m] > 0.0 => {
                format!("{:.0} ({:.3})", t.billed[m], t.billed[m] / b.billed[m])
            }
            _ => format!("{:.0}", t.billed[m]),
        };
        let _ = writeln!(md, "| {} | {} | {} |", t.strategy, cell(0), cell(1));
    }
    md
}

pub(super) fn to_json(totals: &[Total]) -> Value {
    Value::Array(
        totals
            .iter()
            .map(|t| {
                json!({
                    "strategy": t.strategy,
                    "billed_tokens": {
                        COST_MODELS[0]: t.billed[0].round(),
                        COST_MODELS[1]: t.billed[1].round(),
                    },
                })
            })
            .collect(),
    )
}
