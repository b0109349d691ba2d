//! Keeping tool output within the size the registry allows.

/// The default output cap: 64 KiB.
pub const DEFAULT_OUTPUT_CAP: usize = 64 * 1024;

/// `content` cut to at most `cap` bytes (plus the marker): the head and the tail are kept,
/// because the end of an output (an error, a summary line) matters as much as its start.
pub fn truncate_output(content: String, cap: usize) -> String {
    let total = content.len();
    if total <= cap {
        return content;
    }
    let head_end = floor_char_boundary(&content, cap * 2 / 3);
    let tail_start = ceil_char_boundary(&content, total - (cap - head_end));
    let kept_head = &content[..head_end];
    let kept_tail = &content[tail_start..];
    format!(
        "{kept_head}\n[... output truncated: the original was {total} bytes; {} bytes were cut \
         from the middle, showing the first {} and the last {} bytes ...]\n{kept_tail}",
        tail_start - head_end,
        kept_head.len(),
        kept_tail.len()
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
