//! `troupe chat` when the agent's budget pauses its request (`on_exceeded = "pause"`): it asks
//! for new limits for the spent budget — `output_tokens=50000 cost=10`, the limits not named
//! stay as they were — and raises them, or, on an empty line, ends the request (what it added
//! is kept). The raise goes to the budget the agent shares with the chat's copy of its spec
//! (`AgentBudget::raise`), not to the agent, which waits inside its request.

use tokio::io::AsyncRead;
use troupe::agents::spend::AgentBudget;
use troupe::protocol::{BudgetExceeded, SpendLimit};

use super::input::{Line, Lines};
use super::interrupts::Interrupts;

/// How asking ended.
pub(super) enum Asked {
    /// The limit was raised: the request goes on.
    Raised,
    /// The user wants the request ended as it is.
    End,
    /// Ctrl-C.
    Interrupted,
}

/// Ask for a new limit for the budget `exceeded` names and raise `budget`'s.
pub(super) async fn ask<R: AsyncRead + Unpin>(
    budget: &AgentBudget,
    exceeded: &BudgetExceeded,
    lines: &mut Lines<R>,
    interrupts: &mut Interrupts,
) -> Asked {
    println!(
        "raise the {} budget? new limits as input_tokens=N output_tokens=N cost=X; empty ends the request",
        exceeded.scope
    );
    loop {
        print!("raise? > ");
        crate::out::flush_stdout();
        let line = tokio::select! {
            line = lines.next() => line,
            () = interrupts.next() => return Asked::Interrupted,
        };
        let text = match line {
            Ok(Some(Line::Text(text))) => text.trim().to_string(),
            // No more input, or none readable: nobody is there to raise it.
            Ok(Some(Line::NotUtf8)) | Ok(None) | Err(_) => return Asked::End,
        };
        if text.is_empty() {
            return Asked::End;
        }
        let limit = match raised(exceeded.limit, &text) {
            Ok(limit) => limit,
            Err(why) => {
                println!("{why}");
                continue;
            }
        };
        // A limit the spend still reaches would leave the agent waiting with nothing asked.
        if limit.reached_by(&exceeded.spent) {
            println!(
                "spent {}: a limit of {limit} is still reached; give a higher one",
                exceeded.spent
            );
            continue;
        }
        return match budget.raise(exceeded.scope, limit) {
            Ok(()) => {
                println!("[{} budget raised to {limit}]", exceeded.scope);
                Asked::Raised
            }
            Err(e) => {
                println!("({e})");
                Asked::End
            }
        };
    }
}

/// `limit` with the limits `text` names (`key=value`, space-separated) replaced.
fn raised(mut limit: SpendLimit, text: &str) -> Result<SpendLimit, String> {
    for part in text.split_whitespace() {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` is not key=value"))?;
        let tokens = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{key} must be a whole number, got `{value}`"))
        };
        match key {
            "input_tokens" => limit.input_tokens = Some(tokens()?),
            "output_tokens" => limit.output_tokens = Some(tokens()?),
            "cost" => {
                let cost = value
                    .parse::<f64>()
                    .ok()
                    .filter(|c| c.is_finite() && *c >= 0.0)
                    .ok_or_else(|| format!("cost must be a number of at least 0, got `{value}`"))?;
                limit.cost_micros = Some((cost * 1_000_000.0).round() as u64);
            }
            _ => {
                return Err(format!(
                    "no limit `{key}` (input_tokens, output_tokens, cost)"
                ));
            }
        }
    }
    Ok(limit)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn named_limits_replace_the_old_ones_and_bad_ones_are_refused() {
        let old = SpendLimit {
            input_tokens: Some(5),
            output_tokens: Some(10),
            ..SpendLimit::default()
        };
        let new = raised(old, "output_tokens=100 cost=1.5").unwrap();
        assert_eq!(new.input_tokens, Some(5));
        assert_eq!(new.output_tokens, Some(100));
        assert_eq!(new.cost_micros, Some(1_500_000));
        assert!(
            raised(old, "tokens=5")
                .unwrap_err()
                .contains("no limit `tokens`")
        );
        assert!(
            raised(old, "output_tokens=lots")
                .unwrap_err()
                .contains("whole number")
        );
        assert!(raised(old, "cost=-1").unwrap_err().contains("at least 0"));
        assert!(raised(old, "cost").unwrap_err().contains("key=value"));
    }
}
