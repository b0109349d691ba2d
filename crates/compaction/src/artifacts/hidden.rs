//! Whatever hides an artifact keeps its name: the one rule every operation that takes text out
//! of the context follows.
//!
//! Tier 1 cuts the middle out of a tool output, tier 2 masks a tool result into a stub, tier 3
//! replaces a segment by a summary or shortens a message on its own. Before this rule only a
//! summary carried the artifact ledger, so a compaction with room to spare — one that only
//! masked and truncated — took the error lines, error types and test names of old tool output
//! out of the context with nothing left naming them, and a larger window kept less than a
//! smaller one whose summary listed them.
//!
//! The rule: a replacement names the artifacts its originals named that nothing it keeps still
//! names — by this crate's own extractor ([`ArtifactLedger::from_messages`]), reading a tool
//! result together with the call it answers ([`hidden_artifacts`]) — in the ledger's own
//! blocks (`<errors>`, `<tests>`, `<seen>`, …), newest first, within a room
//! ([`name_within`]). What does not fit is reported as dropped for room, with the tokens its
//! line would have taken (`CompactionReport::dropped_for_room`). A summary follows the same
//! rule over its whole segment: its ledger lists every artifact of what it replaces, and what
//! its room leaves out is reported the same way ([`unnamed`]).
//!
//! Why each replacement names what it hides, rather than one ledger message written whenever a
//! compaction hid anything: a stub is a replacement of one message, recorded in the archive
//! like every other, so `expand`, the `[replaces …]` marker, the splice of a background
//! compaction onto a newer conversation and the prompt cache (nothing before the first
//! replaced message changes) all stay as they are; a separate ledger message would replace
//! nothing, and every later compaction would have to rewrite it. The names sit where the
//! output sat, their cost is counted as part of the stub (so the planner still stops at the
//! target), and a later summary over the stub reads them back ([`ArtifactLedger::parse`] of
//! what troupe wrote), so they travel on into its ledger.
//!
//! A display-only message is never sent to a model: dropping it hides nothing from the context.

use std::collections::HashSet;

use troupe_protocol::{ChatMessage, DroppedArtifact};

use super::extract::Reading;
use super::ledger::ArtifactLedger;
use troupe_tokens::TokenCounter;

/// The artifacts `before` names that `after` no longer does, both read after `context` (a
/// tool result and its replacement after the call they answer, read once for both). `before`
/// is the messages a replacement takes out; `after` is the replacement. An artifact counts as
/// still named when the ledger of `context` and `after` has it or their text (contents and
/// tool-call arguments, whitespace collapsed) contains it.
pub(crate) fn hidden_artifacts<'a>(
    context: &[&'a ChatMessage],
    before: impl IntoIterator<Item = &'a ChatMessage>,
    after: &[&'a ChatMessage],
) -> ArtifactLedger {
    let mut read = Reading::default();
    read.read_all(context.iter().copied());
    let mut hidden = read.clone();
    hidden.read_all(before);
    let mut hidden = hidden.ledger;
    if hidden.is_empty() {
        return hidden;
    }
    read.read_all(after.iter().copied());
    let kept: HashSet<String> = read.ledger.names().into_iter().collect();
    let text = named_text(context.iter().chain(after).copied());
    hidden.retain_names(|name| !kept.contains(name) && !text.contains(&collapsed(name)));
    hidden
}

/// The blocks that name a replacement's hidden artifacts, and what did not fit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Named {
    /// The ledger's blocks (empty when nothing is hidden).
    pub(crate) blocks: String,
    /// The hidden artifacts the blocks leave out for room.
    pub(crate) dropped: Vec<DroppedArtifact>,
}

/// `hidden` as the ledger's blocks within about `room` tokens: every item when they fit, else
/// the newest of each block ([`ArtifactLedger::render_within`]); and the items left out.
pub(crate) fn name_within(
    hidden: &ArtifactLedger,
    room: usize,
    counter: &dyn TokenCounter,
) -> Named {
    if hidden.is_empty() {
        return Named::default();
    }
    let blocks = hidden.render_within(room, counter);
    let dropped = unnamed(hidden, &blocks, counter);
    Named { blocks, dropped }
}

/// The artifacts of `ledger` that `text` does not name, each with the tokens its line would
/// take.
pub(crate) fn unnamed(
    ledger: &ArtifactLedger,
    text: &str,
    counter: &dyn TokenCounter,
) -> Vec<DroppedArtifact> {
    let mut seen = HashSet::new();
    ledger
        .names()
        .into_iter()
        .filter(|name| !text.contains(name.as_str()) && seen.insert(name.clone()))
        .map(|name| DroppedArtifact {
            // The item's line: its text and the line break.
            tokens: counter.count(&name) + 1,
            name,
        })
        .collect()
}

/// `body` with `blocks` after it (nothing when `blocks` is empty), ready for the marker line.
pub(crate) fn with_names(body: &str, blocks: &str) -> String {
    let body = body.trim_end();
    if blocks.is_empty() {
        body.to_string()
    } else {
        format!("{body}\n\n{blocks}")
    }
}

/// Everything `messages` say: contents and the string values of tool-call arguments, with
/// whitespace runs collapsed (a ledger item is one line).
fn named_text<'a>(messages: impl IntoIterator<Item = &'a ChatMessage>) -> String {
    let mut all = String::new();
    for message in messages {
        all.push_str(&message.text());
        all.push('\n');
        for call in message.calls() {
            match serde_json::from_str::<serde_json::Value>(&call.function.arguments) {
                Ok(value) => push_strings(&value, &mut all),
                Err(_) => all.push_str(&call.function.arguments),
            }
            all.push('\n');
        }
    }
    collapsed(&all)
}

fn push_strings(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| push_strings(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| push_strings(v, out)),
        _ => {}
    }
}

fn collapsed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_protocol::ToolCall;
    use troupe_tokens::CharEstimateCounter;

    fn call() -> ChatMessage {
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                "a",
                "bash",
                r#"{"command":"pytest -x\n  tests/"}"#,
            )],
        )
    }

    #[test]
    fn a_stub_hides_what_only_the_output_named_and_not_what_its_call_still_names() {
        let call = call();
        let output = ChatMessage::tool_result(
            "a",
            "tests/test_io.py::test_roundtrip FAILED\nKeyError: 'id'\nsee test_helpers\nExit code: 1",
        );
        let stub = ChatMessage::tool_result("a", "[compressed] bash returned 4 lines, exit code 1");
        let hidden = hidden_artifacts(&[&call], [&output], &[&stub]);
        let mut names = hidden.names();
        names.sort();
        assert_eq!(
            names,
            [
                "KeyError: 'id'",
                "test_helpers",
                "tests/test_io.py::test_roundtrip"
            ],
            "the command is still in the call, whitespace and all"
        );
        // A replacement that keeps the error line in its text hides it no more.
        let said = ChatMessage::tool_result("a", "[compressed] first error: KeyError: 'id'");
        assert!(
            !hidden_artifacts(&[&call], [&output], &[&said])
                .names()
                .contains(&"KeyError: 'id'".to_string())
        );
    }

    #[test]
    fn what_the_room_leaves_out_is_reported_with_its_tokens() {
        let mut hidden = ArtifactLedger::default();
        for i in 0..30 {
            hidden.seen.record(format!("test_case_{i}_done"), ());
        }
        let counter = CharEstimateCounter;
        let all = name_within(&hidden, usize::MAX, &counter);
        assert!(all.dropped.is_empty() && all.blocks.contains("test_case_0_done"));
        let tight = name_within(&hidden, 20, &counter);
        assert!(tight.blocks.contains("test_case_29_done"), "newest first");
        assert!(!tight.dropped.is_empty());
        assert_eq!(
            tight.dropped.len() + ArtifactLedger::parse(&tight.blocks).seen.len(),
            30
        );
        let first = &tight.dropped[0];
        assert_eq!(first.tokens, counter.count(&first.name) + 1);
        assert_eq!(with_names("body\n", ""), "body");
        assert_eq!(
            with_names("body\n", "<seen>\nx\n</seen>"),
            "body\n\n<seen>\nx\n</seen>"
        );
    }
}
