//! The summary message: the six-section body, the file lists, the artifact blocks
//! ([`ArtifactLedger`]: `<commands>`, `<errors>`, `<tests>`, `<symbols>`), the `[replaces …]`
//! marker. Lists and blocks are read back only from after `</summary>`, where troupe writes them.
//!
//! ```text
//! <summary>
//! ## Goal
//! …
//! ## Critical Context
//! …
//! </summary>
//!
//! <read-files>
//! src/lib.rs
//! </read-files>
//!
//! <modified-files>
//! src/app.rs
//! </modified-files>
//!
//! <commands>
//! cargo test (exit 101)
//! </commands>
//!
//! [replaces m3..m17]
//! ```

use crate::tagged::{block_items, strip_blocks};
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use troupe_protocol::FileLedger;
use troupe_protocol::MessageId;

use super::prompt::{
    CONVERSATION_CLOSE, CONVERSATION_OPEN, MESSAGE_CLOSE, MESSAGE_OPEN, PREVIOUS_CLOSE,
    PREVIOUS_OPEN,
};
use super::render::parse_header;
use crate::artifacts::ArtifactLedger;
use crate::markers::{parse_replaces, replaces_line};

/// The six top-level sections, in order.
pub(super) const SECTIONS: [&str; 6] = [
    "Goal",
    "Constraints & Preferences",
    "Progress",
    "Key Decisions",
    "Next Steps",
    "Critical Context",
];

/// The subsections of "Progress", in order.
pub(super) const PROGRESS_SUBSECTIONS: [&str; 3] = ["Done", "In Progress", "Blocked"];

const SUMMARY_OPEN: &str = "<summary>";
const SUMMARY_CLOSE: &str = "</summary>";
const READ_OPEN: &str = "<read-files>";
const READ_CLOSE: &str = "</read-files>";
const MODIFIED_OPEN: &str = "<modified-files>";
const MODIFIED_CLOSE: &str = "</modified-files>";
const NOT_PROVIDED: &str = "- (not provided)";

/// The files a summary covers: read (and never modified) and modified.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLists {
    /// Files read.
    pub read: BTreeSet<String>,
    /// Files written or edited.
    pub modified: BTreeSet<String>,
}

impl FileLists {
    /// The files the ledger recorded for the given tool calls.
    pub fn from_ledger_calls<'a>(
        ledger: &FileLedger,
        call_ids: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let calls: BTreeSet<&str> = call_ids.into_iter().collect();
        let mut lists = FileLists::default();
        for entry in ledger.entries() {
            let Some(call) = entry.tool_call_id.as_deref() else {
                continue;
            };
            if !calls.contains(call) {
                continue;
            }
            if entry.access.is_modification() {
                lists.modified.insert(entry.path.clone());
            } else {
                lists.read.insert(entry.path.clone());
            }
        }
        lists
    }

    /// Add `other`'s files (lists accumulate across compactions).
    pub fn union(&mut self, other: &FileLists) {
        self.read.extend(other.read.iter().cloned());
        self.modified.extend(other.modified.iter().cloned());
    }

    /// Files read and never modified.
    pub fn read_only(&self) -> BTreeSet<String> {
        self.read.difference(&self.modified).cloned().collect()
    }

    /// Whether no file is listed.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.modified.is_empty()
    }

    /// The `<read-files>` / `<modified-files>` blocks (empty lists are left out).
    pub fn render(&self) -> String {
        let mut blocks = Vec::new();
        let read_only = self.read_only();
        if !read_only.is_empty() {
            blocks.push(block(READ_OPEN, READ_CLOSE, &read_only));
        }
        if !self.modified.is_empty() {
            blocks.push(block(MODIFIED_OPEN, MODIFIED_CLOSE, &self.modified));
        }
        blocks.join("\n\n")
    }

    /// The lists found in `text`'s `<read-files>` / `<modified-files>` blocks.
    pub fn parse(text: &str) -> Self {
        FileLists {
            read: block_lines(text, READ_OPEN, READ_CLOSE),
            modified: block_lines(text, MODIFIED_OPEN, MODIFIED_CLOSE),
        }
    }
}

fn block(open: &str, close: &str, paths: &BTreeSet<String>) -> String {
    let mut out = String::from(open);
    for path in paths {
        out.push('\n');
        out.push_str(path);
    }
    out.push('\n');
    out.push_str(close);
    out
}

fn block_lines(text: &str, open: &str, close: &str) -> BTreeSet<String> {
    block_items(text, open, close).into_iter().collect()
}

fn heading_name(line: &str, level: &str) -> Option<String> {
    let rest = line.trim().strip_prefix(level)?;
    if rest.starts_with('#') {
        return None;
    }
    Some(
        rest.trim()
            .trim_end_matches(':')
            .trim()
            .to_ascii_lowercase(),
    )
}

fn has_heading(lines: &[String], level: &str, name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    lines
        .iter()
        .any(|l| heading_name(l, level).as_deref() == Some(name.as_str()))
}

/// Sections (and "Progress" subsections, written `Progress / Done`) that `text` lacks.
pub fn missing_sections(text: &str) -> Vec<String> {
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut missing: Vec<String> = SECTIONS
        .iter()
        .filter(|s| !has_heading(&lines, "## ", s))
        .map(|s| s.to_string())
        .collect();
    missing.extend(
        PROGRESS_SUBSECTIONS
            .iter()
            .filter(|s| !has_heading(&lines, "### ", s))
            .map(|s| format!("Progress / {s}")),
    );
    missing
}

/// A summarizer's answer made into a clean structured body: file lists, artifact blocks,
/// summary tags and markers it may have echoed are removed (troupe computes those itself), and missing sections
/// are added as "(not provided)" so the structure always holds. `None` when nothing is left.
pub fn normalize_summary(text: &str) -> Option<String> {
    let text = strip_blocks(text, READ_OPEN, READ_CLOSE);
    let text = strip_blocks(&text, MODIFIED_OPEN, MODIFIED_CLOSE);
    let text = ArtifactLedger::strip_blocks(&text);
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| {
            let t = l.trim();
            t != SUMMARY_OPEN
                && t != SUMMARY_CLOSE
                && !t.starts_with(crate::markers::REPLACES_PREFIX)
        })
        .map(|l| l.replace(SUMMARY_OPEN, "").replace(SUMMARY_CLOSE, ""))
        .collect();
    trim_blank_ends(&mut lines);
    // Small models like to wrap the whole answer in a code fence (often without closing it).
    if lines.first().is_some_and(|l| is_fence(l)) {
        lines.remove(0);
    }
    if lines.last().is_some_and(|l| is_fence(l)) {
        lines.pop();
    }
    trim_blank_ends(&mut lines);
    if lines.iter().all(|l| l.trim().is_empty()) {
        return None;
    }
    if !has_heading(&lines, "## ", "Progress") {
        lines.push(String::new());
        lines.push("## Progress".to_string());
        for sub in PROGRESS_SUBSECTIONS {
            lines.push(format!("### {sub}"));
            lines.push(NOT_PROVIDED.to_string());
        }
    } else {
        add_missing_progress_subsections(&mut lines);
    }
    for section in SECTIONS {
        if !has_heading(&lines, "## ", section) {
            lines.push(String::new());
            lines.push(format!("## {section}"));
            lines.push(NOT_PROVIDED.to_string());
        }
    }
    Some(lines.join("\n"))
}

fn trim_blank_ends(lines: &mut Vec<String>) {
    while lines.first().is_some_and(|l| l.trim().is_empty()) {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
}

/// A code-fence line: three backticks and at most a language tag.
fn is_fence(line: &str) -> bool {
    line.trim()
        .strip_prefix("```")
        .is_some_and(|tag| tag.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// Whether a summary says anything of its own: some line that is not a heading, a fence, a
/// summary tag or a placeholder such as `- (not provided)` or `- (none)` — and no echo of the
/// prompt (its `<conversation>` tags or `[m12 tool read_file]` message headers). A weak model
/// can answer with the bare skeleton, or copy the transcript it was given; either would replace
/// real messages with nothing better.
///
/// ```
/// use troupe_compaction::summary::summary_has_substance;
/// assert!(!summary_has_substance("## Goal\n- (not provided)\n## Progress\n### Done\n- (none)"));
/// assert!(!summary_has_substance("[m23 tool read_file]\nfile text\n</conversation>\n## Goal\n- x"));
/// assert!(summary_has_substance("## Goal\n- Fix the parser in src/lib.rs"));
/// ```
pub fn summary_has_substance(text: &str) -> bool {
    let echoes_prompt = text.lines().any(|line| {
        let t = line.trim();
        [
            CONVERSATION_OPEN,
            CONVERSATION_CLOSE,
            PREVIOUS_OPEN,
            PREVIOUS_CLOSE,
            MESSAGE_OPEN,
            MESSAGE_CLOSE,
        ]
        .contains(&t)
            || parse_header(t).is_some()
    });
    !echoes_prompt
        && text.lines().any(|line| {
            let t = line.trim();
            let bare = t.trim_start_matches(['-', '*', ' ']).trim();
            !(t.is_empty()
                || t.starts_with('#')
                || is_fence(t)
                || t == SUMMARY_OPEN
                || t == SUMMARY_CLOSE
                || bare.is_empty()
                || bare.starts_with("(none")
                || bare.starts_with("(not provided")
                || bare.eq_ignore_ascii_case("none")
                || bare.eq_ignore_ascii_case("n/a"))
        })
}

fn add_missing_progress_subsections(lines: &mut Vec<String>) {
    let Some(start) = lines
        .iter()
        .position(|l| heading_name(l, "## ").as_deref() == Some("progress"))
    else {
        return;
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| heading_name(l, "## ").is_some())
        .map_or(lines.len(), |offset| start + 1 + offset);
    let section = lines[start..end].to_vec();
    let mut insert = Vec::new();
    for sub in PROGRESS_SUBSECTIONS {
        if !has_heading(&section, "### ", sub) {
            insert.push(format!("### {sub}"));
            insert.push(NOT_PROVIDED.to_string());
        }
    }
    lines.splice(end..end, insert);
}

/// The full text of a summary message: the body in summary tags, then the file lists and the
/// artifact blocks (only here, after `</summary>`, are they read back), then the marker.
pub(crate) fn summary_message_text(
    body: &str,
    files: &FileLists,
    artifacts: &str,
    replaced: &[MessageId],
) -> String {
    let mut text = format!("{SUMMARY_OPEN}\n{}\n{SUMMARY_CLOSE}", body.trim());
    for blocks in [files.render().as_str(), artifacts] {
        if !blocks.is_empty() {
            text.push_str("\n\n");
            text.push_str(blocks);
        }
    }
    text.push_str("\n\n");
    text.push_str(&replaces_line(replaced));
    text
}

/// A summary message taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSummary {
    /// The structured body (between the summary tags).
    pub body: String,
    /// The file lists after it.
    pub files: FileLists,
    /// The artifact blocks after it (commands, errors, tests, symbols).
    pub artifacts: ArtifactLedger,
    /// The ids it names as replaced (empty when it has no marker, e.g. a pasted summary).
    pub replaces: Vec<MessageId>,
}

/// Recognise a summary message by its text (it starts with `<summary>`).
pub fn parse_summary_message(text: &str) -> Option<ParsedSummary> {
    let rest = text.trim_start().strip_prefix(SUMMARY_OPEN)?;
    let end = rest.find(SUMMARY_CLOSE)?;
    let tail = &rest[end + SUMMARY_CLOSE.len()..];
    Some(ParsedSummary {
        body: rest[..end].trim().to_string(),
        files: FileLists::parse(tail),
        // Only the part troupe writes: a model's text lives inside the summary tags.
        artifacts: ArtifactLedger::parse(tail),
        replaces: parse_replaces(tail).unwrap_or_default(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_protocol::{FileAccess, LedgerEntry};

    #[test]
    fn normalize_strips_model_file_lists_and_fills_sections() {
        let raw = "<summary>\n## Goal\nfix it\n## Progress\n### Done\n- x\n## Next Steps\n1. y\n</summary>\n<read-files>\ninvented.rs\n</read-files>";
        let body = normalize_summary(raw).unwrap();
        assert!(!body.contains("invented.rs"));
        assert!(!body.contains("<summary>"));
        assert!(missing_sections(&body).is_empty(), "{body}");
        // Missing subsections land inside Progress, before the next section.
        let progress = body.find("## Progress").unwrap();
        let blocked = body.find("### Blocked").unwrap();
        let next = body.find("## Next Steps").unwrap();
        assert!(progress < blocked && blocked < next);
        assert_eq!(normalize_summary(" \n<summary>\n</summary>\n"), None);
    }

    #[test]
    fn a_wrapping_code_fence_is_dropped_and_a_skeleton_has_no_substance() {
        let body = normalize_summary("```markdown\n## Goal\n- ship it\n```").unwrap();
        assert!(!body.contains("```"), "{body}");
        assert!(body.starts_with("## Goal\n- ship it"), "{body}");
        // An unclosed fence (the answer was cut off) goes too.
        let body = normalize_summary("```\n\n## Goal\n- ship it").unwrap();
        assert!(body.starts_with("## Goal"), "{body}");
        assert!(summary_has_substance(&body));
        let skeleton = normalize_summary("```\n## Progress\n### Done\n- (not provided)").unwrap();
        assert!(!summary_has_substance(&skeleton), "{skeleton}");
    }

    #[test]
    fn artifact_blocks_round_trip_and_are_read_only_after_the_body() {
        let mut artifacts = ArtifactLedger::default();
        artifacts.commands.record("cargo test", Some(101));
        artifacts
            .tests
            .record("a::b", crate::artifacts::TestStatus::Failed);
        // A body that smuggles blocks in (normalize_summary would strip them; even unstripped
        // they sit inside the summary tags, where nothing is read back).
        let body = "## Goal\ng\n<commands>\nrm -rf /\n</commands>";
        let text = summary_message_text(
            body,
            &FileLists::default(),
            &artifacts.render(),
            &[MessageId(3)],
        );
        let parsed = parse_summary_message(&text).unwrap();
        assert_eq!(parsed.artifacts, artifacts);
        assert_eq!(parsed.replaces, vec![MessageId(3)]);
        assert!(!normalize_summary(body).unwrap().contains("rm -rf"));
    }

    #[test]
    fn summary_message_round_trips() {
        let mut ledger = FileLedger::new();
        ledger.record(LedgerEntry::new("a.rs", FileAccess::Read).with_call("c1"));
        ledger.record(LedgerEntry::new("b.rs", FileAccess::Read).with_call("c1"));
        ledger.record(LedgerEntry::new("b.rs", FileAccess::Edited).with_call("c2"));
        ledger.record(LedgerEntry::new("other.rs", FileAccess::Edited).with_call("c9"));
        let files = FileLists::from_ledger_calls(&ledger, ["c1", "c2"]);
        let text = summary_message_text("## Goal\ng", &files, "", &[MessageId(3), MessageId(4)]);
        assert!(text.contains("<read-files>\na.rs\n</read-files>"));
        assert!(text.contains("<modified-files>\nb.rs\n</modified-files>"));
        assert!(text.ends_with("[replaces m3..m4]"));
        let parsed = parse_summary_message(&text).unwrap();
        assert_eq!(parsed.body, "## Goal\ng");
        assert_eq!(parsed.replaces, vec![MessageId(3), MessageId(4)]);
        assert_eq!(parsed.files.read_only(), files.read_only());
        assert_eq!(parsed.files.modified, files.modified);
        assert!(parse_summary_message("plain text").is_none());
    }
}
