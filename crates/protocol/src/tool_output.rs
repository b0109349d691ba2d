//! Keeping tool output within the size the registry allows.

/// The default output cap: 64 KiB.
pub const DEFAULT_OUTPUT_CAP: usize = 64 * 1024;

/// `content` cut to at most `cap` bytes (plus the marker): the head and the tail are kept,
/// because the end of an output (an error, a summary line) matters as much as its start.
///
/// Two thirds of the cap go to the head, the rest to the tail — the same split the `shell` tool
/// keeps while it streams, so an output reads the same whichever cap cut it.
pub fn cap_output(content: String, cap: usize) -> String {
    let total = content.len();
    if total <= cap {
        return content;
    }
    let head_end = floor_char_boundary(&content, cap * 2 / 3);
    let tail_start = ceil_char_boundary(&content, total - (cap - head_end));
    let kept_head = &content[..head_end];
    let kept_tail = &content[tail_start..];
    let marker = truncation_marker(total as u64, kept_head.len(), kept_tail.len(), None);
    format!("{kept_head}\n{marker}\n{kept_tail}")
}

/// The line that stands where the middle of an output was cut, in one wording for every cut
/// (the registry's cap, `shell`'s streaming cap, compaction's tier 1), so a model learns one
/// form: `[... output truncated: D bytes dropped (DETAIL); the original was T bytes, showing the
/// first H and the last L bytes ...]`.
///
/// `total` is the original size in bytes, `head` and `tail` the bytes kept on either side;
/// `detail` (e.g. lines and tokens cut) goes in parentheses after the dropped count.
///
/// ```
/// let line = troupe_protocol::truncation_marker(100, 20, 10, None);
/// assert_eq!(
///     line,
///     "[... output truncated: 70 bytes dropped; the original was 100 bytes, \
///      showing the first 20 and the last 10 bytes ...]"
/// );
/// ```
pub fn truncation_marker(total: u64, head: usize, tail: usize, detail: Option<&str>) -> String {
    let dropped = total.saturating_sub((head + tail) as u64);
    let detail = detail.map(|d| format!(" ({d})")).unwrap_or_default();
    format!(
        "[... output truncated: {dropped} bytes dropped{detail}; the original was {total} bytes, \
         showing the first {head} and the last {tail} bytes ...]"
    )
}

fn floor_char_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at += 1;
    }
    at
}
