//! Tier 1: an oversized tool output becomes its head and tail around a marker saying what was cut.
//!
//! The head usually holds the command and the start of the output, the tail the result or the
//! error; the middle of a 40k-token log is what an agent can most afford to lose. The cut is
//! sized in tokens and placed at line breaks; the tools' byte cap (`troupe_protocol::cap_output`)
//! does the same job at dispatch, and both write `troupe_protocol::truncation_marker`.

use troupe_protocol::truncation_marker;

/// Share of the kept budget given to the head; the rest goes to the tail.
const HEAD_SHARE: f64 = 0.6;
/// A cut point moves to a line break if one lies within this share of the kept part.
const LINE_SNAP_SHARE: f64 = 0.2;

/// Tokens reserved in a cut message for the cut marker and the `[replaces …]` line, so the
/// result stays within its limit (and a truncated tool output is not picked for truncation
/// again).
const MARKER_TOKENS: usize = 48;

/// How many tokens of text a message cut to `limit` tokens keeps around its markers.
pub(crate) fn text_tokens_within(limit: usize) -> usize {
    limit.saturating_sub(MARKER_TOKENS).max(limit / 2)
}

/// `text` cut down to about `keep_tokens` tokens: head, a marker stating the cut, tail.
///
/// `text_tokens` is the token count of `text`; it sets the bytes-per-token ratio used to place
/// the cuts. Returns `None` when there is nothing worth cutting (the text already fits).
pub(crate) fn truncate_to_tokens(
    text: &str,
    text_tokens: usize,
    keep_tokens: usize,
) -> Option<String> {
    if text_tokens <= keep_tokens || text.is_empty() {
        return None;
    }
    let bytes_per_token = text.len() as f64 / text_tokens.max(1) as f64;
    let keep_bytes = keep_tokens as f64 * bytes_per_token;
    let head_target = (keep_bytes * HEAD_SHARE) as usize;
    let tail_target = (keep_bytes * (1.0 - HEAD_SHARE)) as usize;

    let head_end = snap_back_to_newline(text, floor_boundary(text, head_target), head_target);
    let tail_start = snap_forward_to_newline(
        text,
        ceil_boundary(text, text.len().saturating_sub(tail_target)),
        tail_target,
    );
    if head_end >= tail_start {
        return None;
    }
    let cut = &text[head_end..tail_start];
    let cut_lines = cut.matches('\n').count();
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 96);
    out.push_str(&text[..head_end]);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let cut_tokens = (cut.len() as f64 / bytes_per_token).round() as usize;
    out.push_str(&truncation_marker(
        text.len() as u64,
        head_end,
        text.len() - tail_start,
        Some(&format!("{cut_lines} lines, ~{cut_tokens} tokens")),
    ));
    out.push('\n');
    out.push_str(&text[tail_start..]);
    Some(out)
}

/// Move a head cut back to just after a line break, if one is near.
fn snap_back_to_newline(text: &str, cut: usize, kept: usize) -> usize {
    let window = (kept as f64 * LINE_SNAP_SHARE) as usize;
    match text[..cut].rfind('\n') {
        Some(nl) if cut - (nl + 1) <= window => nl + 1,
        _ => cut,
    }
}

/// Move a tail cut forward to just after a line break, if one is near.
fn snap_forward_to_newline(text: &str, cut: usize, kept: usize) -> usize {
    let window = (kept as f64 * LINE_SNAP_SHARE) as usize;
    match text[cut..].find('\n') {
        Some(offset) if offset < window && cut + offset + 1 < text.len() => cut + offset + 1,
        _ => cut,
    }
}

/// The largest char boundary at or below `index`.
pub(crate) fn floor_boundary(text: &str, index: usize) -> usize {
    let mut i = index.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary at or above `index`.
pub(crate) fn ceil_boundary(text: &str, index: usize) -> usize {
    let mut i = index.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_states_the_cut() {
        let text: String = (0..400).map(|i| format!("row {i:03} é\n")).collect();
        let tokens = text.len() / 4;
        let out = truncate_to_tokens(&text, tokens, 100).unwrap();
        assert!(out.len() < text.len() / 2);
        assert!(out.starts_with("row 000"));
        assert!(out.ends_with("row 399 é\n"));
        let marker = out.lines().find(|l| l.contains("bytes dropped")).unwrap();
        let cut_lines: usize = marker
            .split_once(" bytes dropped (")
            .unwrap()
            .1
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let kept_lines = out.lines().count() - 1;
        assert_eq!(kept_lines + cut_lines, 400);
    }

    #[test]
    fn states_the_cut_in_the_marker_the_tools_write() {
        let text: String = (0..400).map(|i| format!("row {i:03}\n")).collect();
        let out = truncate_to_tokens(&text, text.len() / 4, 100).unwrap();
        let marker = out.lines().find(|l| l.starts_with("[...")).unwrap();
        let kept_head = out.find(marker).unwrap();
        let kept_tail = out.len() - kept_head - marker.len() - 1;
        let cut = text.len() - kept_head - kept_tail;
        assert!(
            marker.starts_with(&format!("[... output truncated: {cut} bytes dropped (",)),
            "{marker}"
        );
        assert!(
            marker.ends_with(&format!(
                "the original was {} bytes, showing the first {kept_head} and the last \
                 {kept_tail} bytes ...]",
                text.len()
            )),
            "{marker}"
        );
    }

    #[test]
    fn refuses_when_nothing_to_cut() {
        assert_eq!(truncate_to_tokens("short", 2, 100), None);
        assert_eq!(truncate_to_tokens("", 0, 0), None);
    }

    #[test]
    fn never_splits_a_char() {
        let text = "é".repeat(5000);
        let out = truncate_to_tokens(&text, 5000, 100).unwrap();
        assert!(out.starts_with('é') && out.ends_with('é'));
    }

    #[test]
    fn truncate_to_tokens_keeps_head_and_tail() {
        let log: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let cut = truncate_to_tokens(&log, 2500, 250).unwrap();
        assert!(cut.starts_with("line 0\n"));
        assert!(cut.trim_end().ends_with("line 999"));
        assert!(cut.contains("bytes dropped ("));
    }
}
