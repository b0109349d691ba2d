//! `--mode recall`: artifact recall after one manual compaction per transcript and window.

use std::fmt::Write as _;

use troupe::compaction::{BudgetPolicy, ProtectedSet};
use troupe::runtime::{ChatMessage, Conversation};
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{
    ArtifactCategory, CompactGoal, Compressor, RecallReport, TranscriptOpError, artifact_recall,
    compact_transcript,
};

/// Artifact recall after one manual compaction of one transcript at one window.
pub(super) struct RecallRow {
    transcript: String,
    window: usize,
    model: String,
    /// Tokens before → after, and whether the target was reached.
    tokens: (usize, usize, bool),
    /// The recall, or why the compaction failed.
    recall: Result<RecallReport, String>,
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
    let defaults = BudgetPolicy::for_window(window);
    let request = CompactGoal {
        window,
        target: defaults.target,
        protected: defaults.protected_recent,
        instructions: None,
    };
    let mut row = RecallRow {
        transcript: name.to_string(),
        window,
        model: model.to_string(),
        tokens: (0, 0, false),
        recall: Err(String::new()),
    };
    let original_text = input.to_text()?;
    match compact_transcript(input, &original_text, &request, compressor).await {
        Ok(compacted) => {
            // The messages `compact_transcript` keeps verbatim whatever it does.
            let messages =
                Conversation::from_messages(input.messages.iter().cloned()).to_messages();
            let protected_ids = ProtectedSet::compute(&messages, request.protected);
            let protected: Vec<ChatMessage> = messages
                .into_iter()
                .filter(|m| protected_ids.contains(m.id))
                .collect();
            let report = &compacted.report;
            row.tokens = (report.tokens_before, report.tokens_after, report.reached);
            row.recall = Ok(artifact_recall(
                &input.messages,
                &protected,
                &compacted.file.messages,
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

/// One markdown table per transcript × window: the recall of each category and overall.
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
        let report = match &r.recall {
            Ok(report) => report,
            Err(why) => {
                let _ = writeln!(md, "No recall: {why}");
                continue;
            }
        };
        md.push_str("| category | artifacts | kept | recall | named by protected messages |\n");
        md.push_str("| --- | ---: | ---: | ---: | ---: |\n");
        for category in ArtifactCategory::ALL {
            if let Some(c) = report.category(category) {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} |",
                    category.label(),
                    c.total,
                    c.kept,
                    percent(c.kept, c.total),
                    c.named_by_protected
                );
            }
        }
        let all = report.overall();
        let _ = writeln!(
            md,
            "| **all** | {} | {} | **{}** | {} |",
            all.total,
            all.kept,
            percent(all.kept, all.total),
            all.named_by_protected
        );
        if list_missing {
            for (category, c) in &report.categories {
                if !c.missing.is_empty() {
                    let _ = writeln!(
                        md,
                        "\nNo longer named ({}): {}",
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
