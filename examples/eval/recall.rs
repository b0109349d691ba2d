//! `--mode recall`: artifact recall after one manual compaction per transcript and window.

use std::fmt::Write as _;

use troupe::compaction::ContextPolicy;
use troupe::compaction::invariants::ProtectedSet;
use troupe::protocol::{ChatMessage, Conversation};
use troupe::tokens::{TiktokenCounter, TokenCounter};
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{
    ArtifactCategory, Compressor, RecallReport, TranscriptOpError, artifact_recall,
    compact_transcript, strict_artifact_recall, transcript_policy,
};

/// The categories in the strict table's order.
const STRICT_ORDER: [ArtifactCategory; 5] = [
    ArtifactCategory::Path,
    ArtifactCategory::Error,
    ArtifactCategory::Test,
    ArtifactCategory::Symbol,
    ArtifactCategory::Command,
];

/// Artifact recall after one manual compaction of one transcript at one window.
pub(super) struct RecallRow {
    transcript: String,
    window: usize,
    model: String,
    /// Tokens before → after, and whether the target was reached.
    tokens: (usize, usize, bool),
    /// Tokens of the protected messages, and the target.
    protected_tokens: (usize, usize),
    /// The recall (lenient, strict), or why the compaction failed.
    recall: Result<(RecallReport, RecallReport), String>,
}

/// One manual compaction of `input` at `window` through `compressor`, as `troupe compact` runs
/// it, and the artifact recall of its result.
pub(super) async fn recall_row(
    name: &str,
    input: &TranscriptFile,
    window: usize,
    model: &str,
    compressor: &Compressor,
) -> anyhow::Result<RecallRow> {
    let defaults = ContextPolicy::for_window(window);
    let policy = transcript_policy(window, defaults.target, defaults.protected_recent)?;
    let mut row = RecallRow {
        transcript: name.to_string(),
        window,
        model: model.to_string(),
        tokens: (0, 0, false),
        protected_tokens: (0, defaults.target_tokens()),
        recall: Err(String::new()),
    };
    let original_text = input.to_text()?;
    match compact_transcript(input, &original_text, &policy, None, compressor).await {
        Ok(compacted) => {
            // The messages `compact_transcript` keeps verbatim whatever it does.
            let messages =
                Conversation::from_messages(input.messages.iter().cloned()).to_messages();
            let protected_ids = ProtectedSet::compute(&messages, policy.protected_recent);
            let protected: Vec<ChatMessage> = messages
                .into_iter()
                .filter(|m| protected_ids.contains(m.id))
                .collect();
            let report = &compacted.report;
            row.tokens = (report.tokens_before, report.tokens_after, report.reached);
            row.protected_tokens.0 = TiktokenCounter::default().count_messages(&protected);
            row.recall = Ok((
                artifact_recall(&input.messages, &protected, &compacted.file.messages),
                strict_artifact_recall(&input.messages, &protected, &compacted.file.messages),
            ));
        }
        // Not worth writing for `troupe compact`, so nothing to measure here either.
        Err(e @ TranscriptOpError::DoesNotFit { .. }) => row.recall = Err(e.to_string()),
        Err(e) => return Err(e.into()),
    }
    Ok(row)
}

fn percent(kept: usize, total: usize) -> String {
    if total == 0 {
        "–".into()
    } else {
        format!("{:.1} %", 100.0 * kept as f64 / total as f64)
    }
}

/// `kept/total` and the percentage, or `–` when nothing was at risk.
fn cell(kept: usize, total: usize) -> String {
    if total == 0 {
        "–".into()
    } else {
        format!("{} ({kept}/{total})", percent(kept, total))
    }
}

/// One row per transcript × window: strict recall per category and overall (issue #28's
/// definition), the lenient overall beside it, and the room the protected messages leave.
pub(super) fn strict_table(rows: &[RecallRow]) -> String {
    let mut md = String::from(
        "| transcript | set | window | protected / target tokens | tokens after | paths | errors | tests | symbols | commands | **strict all** | lenient all |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let set = if super::DEV.contains(&r.transcript.as_str()) {
            "dev"
        } else {
            "check"
        };
        let (protected, target) = r.protected_tokens;
        let Ok((lenient, strict)) = &r.recall else {
            let _ = writeln!(
                md,
                "| {} | {set} | {}k | – | – | no compaction | | | | | | |",
                r.transcript,
                r.window / 1000
            );
            continue;
        };
        let mut cells = Vec::new();
        for category in STRICT_ORDER {
            let c = strict.category(category).cloned().unwrap_or_default();
            cells.push(cell(c.kept, c.total));
        }
        let all = strict.overall();
        let lenient_all = lenient.overall();
        let _ = writeln!(
            md,
            "| {} | {set} | {}k | {protected} / {target} | {} | {} | **{}** | {} |",
            r.transcript,
            r.window / 1000,
            r.tokens.1,
            cells.join(" | "),
            cell(all.kept, all.total),
            percent(lenient_all.kept, lenient_all.total),
        );
    }
    md
}

/// One markdown table per transcript × window: the recall of each category and overall, by
/// the strict definition and the lenient one.
pub(super) fn recall_tables(rows: &[RecallRow], list_missing: bool) -> String {
    let mut md = String::new();
    for r in rows {
        let (before, after, reached) = r.tokens;
        let _ = writeln!(
            md,
            "\n#### {} @ {}k ({}): {} → {} tokens{}\n",
            r.transcript,
            r.window / 1000,
            r.model,
            before,
            after,
            if reached { "" } else { " (target not reached)" }
        );
        let (lenient, strict) = match &r.recall {
            Ok(reports) => reports,
            Err(why) => {
                let _ = writeln!(md, "No recall: {why}");
                continue;
            }
        };
        md.push_str(
            "| category | strict at risk | kept | **strict recall** | named by protected | lenient recall |\n",
        );
        md.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
        for category in STRICT_ORDER {
            if let (Some(c), Some(l)) = (strict.category(category), lenient.category(category)) {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | **{}** | {} | {} |",
                    category.label(),
                    c.total,
                    c.kept,
                    percent(c.kept, c.total),
                    c.named_by_protected,
                    percent(l.kept, l.total),
                );
            }
        }
        let all = strict.overall();
        let lenient_all = lenient.overall();
        let _ = writeln!(
            md,
            "| **all** | {} | {} | **{}** | {} | {} |",
            all.total,
            all.kept,
            percent(all.kept, all.total),
            all.named_by_protected,
            percent(lenient_all.kept, lenient_all.total),
        );
        if list_missing {
            for (category, c) in &strict.categories {
                if !c.missing.is_empty() {
                    let _ = writeln!(
                        md,
                        "\nNo longer named, strict ({}): {}",
                        category.label(),
                        c.missing
                            .iter()
                            .map(|k| format!("`{}`", k.replace('`', "'")))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
            }
        }
    }
    md
}
