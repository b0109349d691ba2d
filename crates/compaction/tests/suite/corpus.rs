//! Every real transcript of the shared corpus, compacted at 32k and 128k windows.

use troupe_compaction::{
    BudgetPolicy, CompactOptions, TiktokenCounter, TokenCache, TokenCounter, compact, expand,
    ledger_from_transcript, parse_transcript, validate,
};
use troupe_runtime::Conversation;

use super::support::{FixedSummarizer, block_on, corpus_files, visible_text};

#[test]
fn corpus_transcripts_compact_validly_and_keep_every_file_named() {
    let Some(files) = corpus_files() else { return };
    let counter = TiktokenCounter::default();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let transcript = parse_transcript(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let conversation = Conversation::from_messages(transcript.messages);
        let ledger = ledger_from_transcript(conversation.messages());
        let cache = TokenCache::new();
        for window in [32_000, 128_000] {
            let policy = BudgetPolicy::for_window(window);
            // A summarizer with a small window of its own, so long segments must be folded.
            let summarizer =
                FixedSummarizer::with_counter(8_000, Box::new(TiktokenCounter::default()));
            let options = CompactOptions {
                token_cache: Some(cache.clone()),
                ..CompactOptions::default()
            };
            let compaction = block_on(compact(
                &conversation,
                &ledger,
                &policy,
                &counter,
                Some(&summarizer),
                options,
            ))
            .unwrap_or_else(|e| panic!("{name} @ {window}: {e}"));
            let report = &compaction.report;
            println!(
                "{name} @ {window}: {} → {} tokens (target {}), tiers {:?}, {} summarizer calls, {:.1} ms: {}",
                report.tokens_before,
                report.tokens_after,
                report.target_tokens,
                report.tiers,
                report.summarizer.calls,
                report.duration_ms,
                report.reason
            );
            validate(
                &conversation.to_messages(),
                &compaction.messages,
                &compaction.archive,
                &policy,
                &counter,
            )
            .unwrap_or_else(|e| panic!("{name} @ {window}: {e}"));
            assert_eq!(
                report.tokens_after,
                counter.count_messages(&compaction.messages)
            );
            assert_eq!(
                expand(&compaction.messages, &compaction.archive).unwrap(),
                conversation.to_messages(),
                "{name} @ {window}"
            );
            assert!(
                report.reached || report.reason.starts_with("target unreachable"),
                "{name} @ {window}: not reached and no honest reason: {}",
                report.reason
            );
            assert!(
                summarizer
                    .largest_request
                    .load(std::sync::atomic::Ordering::SeqCst)
                    <= summarizer.window,
                "{name} @ {window}: request above the summarizer's window"
            );
            let visible = visible_text(&compaction.messages);
            for file in ledger.all_files() {
                assert!(
                    visible.contains(&file),
                    "{name} @ {window}: {file} is no longer named"
                );
            }
        }
    }
}
