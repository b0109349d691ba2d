//! Fitting a structured summary body into a budget by dropping its least important items
//! first.
//!
//! The order is the order in which a resumed agent would miss things least: Critical Context
//! details, then older Progress items, Key Decisions, the last state, constraints, next steps,
//! and the Goal last (its first item, the original request, last of all). Within a section the
//! oldest item goes first. The same fitting serves the mechanical summarizer (which measures
//! characters) and compaction (which measures a model's answer with its token counter).

use troupe_tokens::TokenCounter;

/// Sections (lowercase keys, `progress/…` for subsections) in the order their items are
/// dropped. Sections not listed (a model's extras) and text before the first heading go
/// before all of these.
const DROP_ORDER: [&str; 8] = [
    "critical context",
    "progress/done",
    "progress/blocked",
    "key decisions",
    "progress/in progress",
    "constraints & preferences",
    "next steps",
    "goal",
];

/// Shown under a section left without items, so the structure stays complete.
const EMPTY_ITEM: &str = "- (none)";
/// A goal item shorter than this says nothing; it is dropped instead of cut further.
const MIN_GOAL_CHARS: usize = 24;

/// One `## ` or `### ` section and its item lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
    /// The heading line as written (empty for text before the first heading).
    pub heading: String,
    /// Lowercase name, `progress/…` for subsections.
    pub key: String,
    /// Non-empty lines under the heading.
    pub items: Vec<String>,
}

impl Section {
    /// A section with `heading` at `level` (2 or 3) under `parent`'s key.
    pub(crate) fn new(level: usize, name: &str, items: Vec<String>) -> Self {
        let key = name.to_ascii_lowercase();
        Section {
            heading: format!("{} {name}", "#".repeat(level)),
            key: if level == 3 {
                format!("progress/{key}")
            } else {
                key
            },
            items,
        }
    }

    fn is_subsection(&self) -> bool {
        self.heading.starts_with("### ")
    }
}

/// A structured body as sections of items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SummaryBody {
    /// In order of appearance.
    pub sections: Vec<Section>,
}

impl SummaryBody {
    /// The sections of `text` (headings `## ` and `### `; blank lines are dropped).
    pub(crate) fn parse(text: &str) -> Self {
        let mut sections = vec![Section {
            heading: String::new(),
            key: String::new(),
            items: Vec::new(),
        }];
        let mut parent = String::new();
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(name) = trimmed.strip_prefix("### ") {
                sections.push(Section {
                    heading: trimmed.to_string(),
                    key: format!("{parent}/{}", key_of(name)),
                    items: Vec::new(),
                });
            } else if let Some(name) = trimmed.strip_prefix("## ") {
                parent = key_of(name);
                sections.push(Section {
                    heading: trimmed.to_string(),
                    key: parent.clone(),
                    items: Vec::new(),
                });
            } else if !trimmed.is_empty()
                && let Some(last) = sections.last_mut()
            {
                last.items.push(line.trim_end().to_string());
            }
        }
        sections.retain(|s| !s.heading.is_empty() || !s.items.is_empty());
        SummaryBody { sections }
    }

    /// The body as text: a blank line before each `## ` section, `- (none)` under an empty
    /// section that has no subsections.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        for (i, section) in self.sections.iter().enumerate() {
            if !section.heading.is_empty() {
                if !out.is_empty() {
                    out.push('\n');
                    if !section.is_subsection() {
                        out.push('\n');
                    }
                }
                out.push_str(&section.heading);
            }
            let has_subsections = self
                .sections
                .get(i + 1)
                .is_some_and(|next| next.is_subsection() && !section.is_subsection());
            let placeholder = [EMPTY_ITEM.to_string()];
            let items: &[String] = if section.items.is_empty() && !has_subsections {
                &placeholder
            } else {
                &section.items
            };
            for item in items {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(item);
            }
        }
        out
    }

    /// The rendered body, with items dropped (least important first) until `measure` of it
    /// is at most `limit`. When every item is gone the bare structure is returned, whatever
    /// it measures.
    pub(crate) fn fit(mut self, limit: usize, measure: impl Fn(&str) -> usize) -> String {
        loop {
            let text = self.render();
            if measure(&text) <= limit || !self.drop_one() {
                return text;
            }
        }
    }

    /// Remove (or shorten) the least important item; `false` when none is left.
    fn drop_one(&mut self) -> bool {
        let rank = |key: &str| {
            DROP_ORDER
                .iter()
                .position(|k| *k == key)
                .map_or(0, |p| p + 1)
        };
        let Some(section) = self
            .sections
            .iter_mut()
            .filter(|s| !s.items.is_empty())
            .min_by_key(|s| rank(&s.key))
        else {
            return false;
        };
        if section.key != "goal" {
            section.items.remove(0);
            return true;
        }
        // The goal keeps its first item (the original request) longest, and shortens it
        // before giving it up.
        if section.items.len() > 1 {
            section.items.remove(1);
            return true;
        }
        let item = &section.items[0];
        let chars = item.chars().count();
        if chars <= MIN_GOAL_CHARS {
            section.items.clear();
        } else {
            let keep: String = item.chars().take(chars * 2 / 3).collect();
            section.items[0] = format!("{}…", keep.trim_end());
        }
        true
    }
}

fn key_of(name: &str) -> String {
    name.trim()
        .trim_end_matches(':')
        .trim()
        .to_ascii_lowercase()
}

/// `body` (a structured summary) fitted to at most `budget` tokens of `counter`, dropping its
/// least important items first; unchanged when it already fits.
pub(crate) fn fit_summary(body: &str, budget: usize, counter: &dyn TokenCounter) -> String {
    if counter.count(body) <= budget {
        return body.to_string();
    }
    SummaryBody::parse(body).fit(budget, |text| counter.count(text))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::summary::format::missing_sections;
    use troupe_tokens::CharEstimateCounter;

    const BODY: &str = "## Goal\n- Fix the parser\n- User correction: keep the API\n\n## Constraints & Preferences\n- Keep the API\n\n## Progress\n### Done\n- [x] Read the lexer\n- [x] Wrote a test\n### In Progress\n- [ ] Fixing the bound\n### Blocked\n- (none)\n\n## Key Decisions\n- Use an inclusive bound\n\n## Next Steps\n1. Run the tests\n\n## Critical Context\n- The bound is in src/lexer.rs line 40\n- The CI runs on stable";

    #[test]
    fn parse_and_render_round_trip() {
        assert_eq!(SummaryBody::parse(BODY).render(), BODY);
    }

    #[test]
    fn critical_context_goes_first_and_the_goal_last() {
        let full = CharEstimateCounter.count(BODY);
        let fitted = fit_summary(BODY, full - 5, &CharEstimateCounter);
        assert!(!fitted.contains("line 40"), "{fitted}");
        assert!(fitted.contains("The CI runs on stable"), "{fitted}");
        let tight = fit_summary(BODY, 70, &CharEstimateCounter);
        assert!(tight.contains("Fix the parser"), "{tight}");
        assert!(!tight.contains("inclusive bound"), "{tight}");
        assert!(missing_sections(&tight).is_empty(), "{tight}");
    }

    proptest! {
        #[test]
        fn a_fitted_body_never_exceeds_a_budget_above_its_structure(
            items in proptest::collection::vec("[a-z ]{1,80}", 0..40),
            budget in 70usize..600,
        ) {
            let mut body = String::from(BODY);
            for (i, item) in items.iter().enumerate() {
                let section = ["Key Decisions", "Critical Context", "Goal"][i % 3];
                body = body.replace(
                    &format!("## {section}\n"),
                    &format!("## {section}\n- {item}\n"),
                );
            }
            let fitted = fit_summary(&body, budget, &CharEstimateCounter);
            prop_assert!(CharEstimateCounter.count(&fitted) <= budget, "{}", fitted);
            prop_assert!(missing_sections(&fitted).is_empty());
        }
    }
}
