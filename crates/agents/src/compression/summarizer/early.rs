//! A summary known to be unusable before it ends: read as it streams, an answer is given up
//! as soon as no continuation could pass [`vet_summary`] — it has copied the prompt back, or
//! repeated a line or a block past the limit (more text only adds to either), or it has passed
//! so many of the six section headings with nothing under them that the sections left cannot
//! make up the three a summary must fill.

use troupe_compaction::summary::{
    SummaryKind, SummaryPrompt, SummaryRejection, segment_prompt, summary_has_substance,
    vet_summary,
};

use crate::compaction_settings::shared_counter;

/// The sections of a summary, in order (the compaction crate's structure).
const SECTIONS: usize = 6;
/// Sections a summary must fill (`vet_summary`'s rule).
const MIN_FILLED: usize = 3;

/// Why `text` — the answer so far — can no longer become a usable summary, if it cannot.
/// Only its complete lines are judged.
pub(super) fn hopeless(text: &str) -> Option<SummaryRejection> {
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    if complete.trim().is_empty() {
        return None;
    }
    if let Some(rejection) = lasting_rejection(complete) {
        return Some(rejection);
    }
    let (reached, filled_before_last) = sections_so_far(complete);
    // The section being written may still be filled, and so may each one not started.
    let could_fill =
        filled_before_last + usize::from(reached > 0) + (SECTIONS - reached.min(SECTIONS));
    if reached == 0 || could_fill >= MIN_FILLED {
        return None;
    }
    Some(if filled_before_last == 0 {
        SummaryRejection::Skeleton
    } else {
        SummaryRejection::ThinSections {
            filled: filled_before_last,
            required: MIN_FILLED,
        }
    })
}

/// What [`vet_summary`] says of `complete` that no more text could undo: the prompt's framing
/// or instructions copied back, a line or a block repeated past the limit.
fn lasting_rejection(complete: &str) -> Option<SummaryRejection> {
    // The instructions the answer must not copy are the same in every segment prompt.
    let prompt = SummaryPrompt {
        kind: SummaryKind::Segment,
        max_output_tokens: usize::MAX / 2,
        ..segment_prompt("", None, None, 0)
    };
    match vet_summary(complete, &prompt, shared_counter().as_ref()) {
        Err(
            r @ (SummaryRejection::EchoesPrompt(_)
            | SummaryRejection::EchoesInstructions { .. }
            | SummaryRejection::RepeatedLine { .. }
            | SummaryRejection::RepeatedBlock { .. }),
        ) => Some(r),
        _ => None,
    }
}

/// How many `## ` section headings `complete` has reached, and how many of the sections before
/// the last one say anything.
fn sections_so_far(complete: &str) -> (usize, usize) {
    let mut reached = 0;
    let mut filled = 0;
    let mut body = String::new();
    for line in complete.lines() {
        let t = line.trim_start();
        if t.starts_with("## ") {
            if reached > 0 && summary_has_substance(&body) {
                filled += 1;
            }
            reached += 1;
            body.clear();
        } else if reached > 0 {
            body.push_str(line);
            body.push('\n');
        }
    }
    (reached, filled)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_skeleton_is_given_up_before_its_last_sections() {
        let skeleton = "## Goal\n- (not provided)\n## Constraints & Preferences\n- (none)\n\
                        ## Progress\n### Done\n- (none)\n## Key Decisions\n- (none)\n";
        assert_eq!(
            hopeless(skeleton),
            None,
            "two sections could still be filled"
        );
        let further = format!("{skeleton}## Next Steps\n");
        assert_eq!(hopeless(&further), Some(SummaryRejection::Skeleton));
    }

    #[test]
    fn a_summary_with_content_is_never_given_up() {
        let text = "## Goal\n- Fix the parser in src/lib.rs\n## Constraints & Preferences\n- (none)\n\
                    ## Progress\n### Done\n- [x] Found the bug in parse_expr\n## Key Decisions\n\
                    - (none)\n## Next Steps\n1. Run cargo test\n## Critical Context\n";
        assert_eq!(hopeless(text), None);
        assert_eq!(hopeless("## Go"), None, "an incomplete line is not judged");
    }

    #[test]
    fn an_echo_of_the_prompt_is_given_up_at_once() {
        let text = "## Goal\n- fix it\n[m12 tool read_file]\n";
        assert!(matches!(
            hopeless(text),
            Some(SummaryRejection::EchoesPrompt(_))
        ));
    }
}
