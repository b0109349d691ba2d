//! Tagged blocks (`<tag>` … `</tag>`) in summary text: the file lists and artifact blocks troupe
//! renders after a summary's body, read back and stripped in one way.

/// The non-empty, trimmed lines inside every `open` … `close` block of `text`, in order; an
/// unclosed block runs to the end of the text.
pub(crate) fn block_items(text: &str, open: &str, close: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let after = &rest[start + open.len()..];
        let end = after.find(close).unwrap_or(after.len());
        items.extend(
            after[..end]
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
        rest = &after[end..];
    }
    items
}

/// `text` without any `open` … `close` block (an unclosed one is cut to the end).
pub(crate) fn strip_blocks(text: &str, open: &str, close: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        out.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        rest = match after.find(close) {
            Some(end) => &after[end + close.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}
