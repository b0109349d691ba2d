//! Overflow safety: a segment too large for the summarizer is summarized in chunks, each chunk
//! updating the running summary of the ones before ("prompt is too long" during compaction is
//! the classic way compaction itself fails).

use serde::{Deserialize, Serialize};

use super::format::normalize_summary;
use super::prompt::{SummaryPrompt, segment_prompt};
use super::summarizer::{Summarizer, SummarizerError};
use crate::truncate::floor_boundary;
use troupe_tokens::TokenCounter;

/// Tokens kept free in every request: BPE counts of concatenated parts can differ slightly from
/// the sum of their counts, and a summarizer's tokenizer may differ from ours.
const SLACK_TOKENS: usize = 32;
/// A chunk smaller than this cannot carry useful material.
const MIN_CHUNK_TOKENS: usize = 64;

/// The result of summarizing a whole segment, however many requests it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldOutcome {
    /// The final structured body (normalized).
    pub summary: String,
    /// Requests sent.
    pub calls: usize,
    /// Input tokens of all requests (without the reserved output).
    pub input_tokens: usize,
    /// Output tokens of all answers.
    pub output_tokens: usize,
}

/// What a fold spent before it failed, so reports stay honest about failed attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FoldSpend {
    pub calls: usize,
    pub input_tokens: usize,
    pub output_tokens: usize,
}

/// Summarize `blocks` (rendered messages, oldest first), starting from `previous` if given.
///
/// Blocks are packed greedily into requests that fit `summarizer.context_window()`; a single
/// block larger than a request is clipped. Every request is measured with `counter` before it
/// is sent and never exceeds the window.
pub async fn summarize_folded(
    blocks: &[String],
    previous: Option<&str>,
    focus: Option<&str>,
    max_output_tokens: usize,
    summarizer: &dyn Summarizer,
    counter: &dyn TokenCounter,
) -> Result<FoldOutcome, SummarizerError> {
    let mut spend = FoldSpend::default();
    fold_with_spend(
        blocks,
        previous,
        focus,
        max_output_tokens,
        summarizer,
        counter,
        &mut spend,
    )
    .await
}

pub(crate) async fn fold_with_spend(
    blocks: &[String],
    previous: Option<&str>,
    focus: Option<&str>,
    max_output_tokens: usize,
    summarizer: &dyn Summarizer,
    counter: &dyn TokenCounter,
    spend: &mut FoldSpend,
) -> Result<FoldOutcome, SummarizerError> {
    let window = summarizer.context_window();
    // Leave most of a small window to the input: a summary larger than a quarter of the
    // summarizer's window could not be carried into the next fold anyway.
    let max_output = max_output_tokens.min(window / 4).max(1);
    let block_tokens: Vec<usize> = blocks.iter().map(|b| counter.count(b)).collect();
    let mut running: Option<String> = previous.map(str::to_string);
    let mut next = 0;
    while next < blocks.len() {
        let empty = segment_prompt("", running.as_deref(), focus, max_output);
        let base = empty.request_tokens(counter) + SLACK_TOKENS;
        if base + MIN_CHUNK_TOKENS > window {
            return Err(SummarizerError::WindowTooSmall {
                window,
                needed: base + MIN_CHUNK_TOKENS,
            });
        }
        let available = window - base;
        let (chunk, taken) = pack_chunk(blocks, &block_tokens, next, available, counter);
        let prompt = fit_prompt(
            chunk,
            running.as_deref(),
            focus,
            max_output,
            window,
            counter,
        )?;
        spend.calls += 1;
        spend.input_tokens += prompt.request_tokens(counter) - prompt.max_output_tokens;
        let answer = summarizer.summarize(prompt).await?;
        spend.output_tokens += counter.count(&answer);
        running = Some(normalize_summary(&answer).ok_or(SummarizerError::Empty)?);
        next += taken;
    }
    let summary = match running {
        Some(summary) => summary,
        None => return Err(SummarizerError::Empty),
    };
    Ok(FoldOutcome {
        summary,
        calls: spend.calls,
        input_tokens: spend.input_tokens,
        output_tokens: spend.output_tokens,
    })
}

/// The text of the next chunk, starting at `blocks[start]`, and how many blocks it consumed
/// (at least one: a block too big on its own is clipped to fit).
fn pack_chunk(
    blocks: &[String],
    block_tokens: &[usize],
    start: usize,
    available: usize,
    counter: &dyn TokenCounter,
) -> (String, usize) {
    let mut chunk = String::new();
    let mut used = 0;
    let mut index = start;
    while index < blocks.len() {
        // +1 for the newline joining blocks.
        let cost = block_tokens[index] + 1;
        if used + cost > available {
            break;
        }
        chunk.push_str(&blocks[index]);
        chunk.push('\n');
        used += cost;
        index += 1;
    }
    if index == start {
        chunk = clip_to_tokens(&blocks[start], available, counter);
        index += 1;
    }
    (chunk, index - start)
}

/// `text` cut to at most `max_tokens` tokens, with a note that it was clipped.
pub(crate) fn clip_to_tokens(text: &str, max_tokens: usize, counter: &dyn TokenCounter) -> String {
    const NOTE: &str = "\n[… clipped to fit the summarizer's window …]\n";
    let note_tokens = counter.count(NOTE);
    let budget = max_tokens.saturating_sub(note_tokens);
    let total = counter.count(text).max(1);
    let mut keep = (text.len() as f64 * budget as f64 / total as f64 * 0.9) as usize;
    loop {
        let cut = floor_boundary(text, keep);
        let candidate = format!("{}{NOTE}", &text[..cut]);
        if counter.count(&candidate) <= max_tokens || cut == 0 {
            return candidate;
        }
        keep = cut * 3 / 4;
    }
}

/// The prompt for `chunk`, shrunk until it provably fits `window`.
fn fit_prompt(
    mut chunk: String,
    previous: Option<&str>,
    focus: Option<&str>,
    max_output: usize,
    window: usize,
    counter: &dyn TokenCounter,
) -> Result<SummaryPrompt, SummarizerError> {
    for _ in 0..8 {
        let prompt = segment_prompt(chunk.trim_end(), previous, focus, max_output);
        let needed = prompt.request_tokens(counter);
        if needed <= window {
            return Ok(prompt);
        }
        let chunk_tokens = counter.count(&chunk);
        let over = needed - window;
        chunk = clip_to_tokens(
            &chunk,
            chunk_tokens.saturating_sub(over + SLACK_TOKENS),
            counter,
        );
    }
    let prompt = segment_prompt(chunk.trim_end(), previous, focus, max_output);
    Err(SummarizerError::WindowTooSmall {
        window,
        needed: prompt.request_tokens(counter),
    })
}
