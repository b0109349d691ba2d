//! Laying the facts out as the six sections, merged with the summary being updated.

use super::facts::Facts;
use super::fit::{Section, SummaryBody};
use crate::summary::format::{PROGRESS_SUBSECTIONS, SECTIONS};

/// Most items a section keeps before fitting (the newest).
const MAX_ITEMS: usize = 12;
/// Characters of a quoted item.
const ITEM_CHARS: usize = 240;
/// Characters of the original request in the Goal.
const GOAL_CHARS: usize = 400;
/// Characters of a user correction in the Goal: they redirect, they need not be long.
const CORRECTION_CHARS: usize = 160;
/// User corrections the Goal keeps, the newest: a long session piles up dozens, and the Goal is
/// the last thing fitting drops, so unbounded it would crowd every other section out.
const MAX_CORRECTIONS: usize = 3;

/// Drop all but the newest [`MAX_CORRECTIONS`] correction lines of `goal`, keeping its order.
fn keep_newest_corrections(goal: &mut Vec<String>) {
    let is_correction = |line: &String| line.starts_with("- User correction:");
    let mut excess = goal
        .iter()
        .filter(|l| is_correction(l))
        .count()
        .saturating_sub(MAX_CORRECTIONS);
    goal.retain(|line| {
        if excess > 0 && is_correction(line) {
            excess -= 1;
            false
        } else {
            true
        }
    });
}

/// The six sections of the facts, every list already bounded; fit it with
/// [`SummaryBody::fit`].
pub(super) fn lay_out(facts: &Facts) -> SummaryBody {
    let previous = |key: &str| facts.previous.get(key).cloned().unwrap_or_default();

    let mut goal = previous("goal");
    if goal.is_empty()
        && let Some(first) = facts.user_requests.first()
    {
        goal.push(format!("- User asked: {}", quote(first, GOAL_CHARS)));
    }
    for correction in &facts.corrections {
        push_new(
            &mut goal,
            format!("- User correction: {}", quote(correction, CORRECTION_CHARS)),
        );
    }
    keep_newest_corrections(&mut goal);
    if let Some(focus) = &facts.focus {
        push_new(
            &mut goal,
            format!("- Focus requested for this summary: {focus}"),
        );
    }

    let constraints = merged(
        previous("constraints & preferences"),
        facts
            .constraints
            .iter()
            .map(|c| bullet(&quote(c, ITEM_CHARS))),
    );

    let mut done_new = Vec::new();
    if facts.assistant_turns > 0 || facts.user_messages > 0 {
        let tools: Vec<String> = facts
            .tool_counts
            .iter()
            .map(|(tool, n)| format!("{tool} ×{n}"))
            .collect();
        let tools = if tools.is_empty() {
            "no tools".to_string()
        } else {
            format!("tools used: {}", tools.join(", "))
        };
        done_new.push(format!(
            "- [x] Worked through {} user message(s) and {} assistant turn(s); {tools}",
            facts.user_messages, facts.assistant_turns
        ));
    }
    let done = merged(previous("progress/done"), done_new);
    let in_progress = match &facts.last_state {
        Some(last) => vec![format!("- [ ] Last state: {}", quote(last, ITEM_CHARS))],
        None => previous("progress/in progress"),
    };
    let blocked = merged(
        previous("progress/blocked"),
        facts
            .errors
            .iter()
            .map(|e| bullet(&condense(e, ITEM_CHARS))),
    );

    let decisions = merged(
        previous("key decisions"),
        facts
            .decisions
            .iter()
            .map(|d| bullet(&quote(d, ITEM_CHARS))),
    );

    let mut next = Vec::new();
    if let Some(intent) = &facts.last_intent {
        next.push(format!("Next intended step: {}", quote(intent, ITEM_CHARS)));
    }
    if facts.user_requests.len() > 1
        && let Some(last) = facts.user_requests.last()
    {
        next.push(format!("Latest user request: {}", quote(last, ITEM_CHARS)));
    }
    let next = if next.is_empty() {
        let carried = previous("next steps");
        match facts.user_requests.last() {
            // Nothing said yet about what comes next: the next step is the request itself.
            Some(request) if carried.is_empty() => vec![format!(
                "1. Carry out the user's request: {}",
                quote(request, ITEM_CHARS)
            )],
            _ => carried,
        }
    } else {
        next.iter()
            .enumerate()
            .map(|(i, step)| format!("{}. {step}", i + 1))
            .collect()
    };

    let context = merged(
        previous("critical context"),
        facts
            .user_requests
            .iter()
            .map(|r| format!("- User: {}", quote(r, ITEM_CHARS))),
    );

    let [
        goal_h,
        constraints_h,
        progress_h,
        decisions_h,
        next_h,
        context_h,
    ] = SECTIONS;
    let [done_h, in_progress_h, blocked_h] = PROGRESS_SUBSECTIONS;
    SummaryBody {
        sections: vec![
            Section::new(2, goal_h, goal),
            Section::new(2, constraints_h, constraints),
            Section::new(2, progress_h, Vec::new()),
            Section::new(3, done_h, done),
            Section::new(3, in_progress_h, in_progress),
            Section::new(3, blocked_h, blocked),
            Section::new(2, decisions_h, decisions),
            Section::new(2, next_h, next),
            Section::new(2, context_h, context),
        ],
    }
}

fn push_new(items: &mut Vec<String>, item: String) {
    if !items.contains(&item) {
        items.push(item);
    }
}

/// Previous items then new ones, without repeats, keeping the newest [`MAX_ITEMS`].
fn merged(previous: Vec<String>, new: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut items = previous;
    for item in new {
        push_new(&mut items, item);
    }
    let skip = items.len().saturating_sub(MAX_ITEMS);
    items.split_off(skip)
}

fn bullet(text: &str) -> String {
    format!("- {text}")
}

fn quote(text: &str, max_chars: usize) -> String {
    format!("\"{}\"", condense(text, max_chars))
}

/// Whitespace collapsed and cut to `max_chars` characters (with an ellipsis), at a word
/// boundary when one is near, without a dangling `:` or `,` before the ellipsis.
pub(super) fn condense(text: &str, max_chars: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= max_chars {
        return collapsed;
    }
    let cut: String = collapsed
        .chars()
        .take(max_chars.saturating_sub(1))
        .collect();
    let cut = match cut.rfind(' ') {
        Some(space) if space >= cut.len() / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches([' ', ':', ',', ';']))
}
