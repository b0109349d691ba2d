//! The machine-readable line every stub and summary ends with: `[replaces m3..m17, m20]`.
//!
//! The archive is the authority on what a message replaced; this line makes the same fact
//! visible to the model and recoverable from a transcript that lost troupe's metadata.

use troupe_protocol::MessageId;

/// The prefix of the marker line.
pub(crate) const REPLACES_PREFIX: &str = "[replaces ";

/// `ids` written compactly, in the given order: runs of consecutive ids become `mA..mB`.
pub(crate) fn format_id_list(ids: &[MessageId]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        let mut end = start;
        while i + 1 < ids.len() && ids[i + 1].0 == end.0 + 1 {
            i += 1;
            end = ids[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}..{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

/// The ids of a list written by [`format_id_list`].
pub(crate) fn parse_id_list(text: &str) -> Option<Vec<MessageId>> {
    let mut ids = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once("..") {
            Some((start, end)) => {
                let start: MessageId = start.parse().ok()?;
                let end: MessageId = end.parse().ok()?;
                if end.0 < start.0 {
                    return None;
                }
                ids.extend((start.0..=end.0).map(MessageId));
            }
            None => ids.push(part.parse().ok()?),
        }
    }
    Some(ids)
}

/// The marker line for a message that replaces `ids`.
pub(crate) fn replaces_line(ids: &[MessageId]) -> String {
    format!("{REPLACES_PREFIX}{}]", format_id_list(ids))
}

/// The ids named by the marker on the last line of `text`, if it ends with one.
pub(crate) fn parse_replaces(text: &str) -> Option<Vec<MessageId>> {
    let last = text.trim_end().lines().next_back()?;
    let inner = last
        .trim()
        .strip_prefix(REPLACES_PREFIX)?
        .strip_suffix(']')?;
    parse_id_list(inner)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_out_of_order_lists() {
        let ids: Vec<MessageId> = [50, 3, 4, 5, 7, 6].into_iter().map(MessageId).collect();
        let line = replaces_line(&ids);
        assert_eq!(line, "[replaces m50, m3..m5, m7, m6]");
        assert_eq!(parse_replaces(&format!("body\n{line}\n")), Some(ids));
        assert_eq!(parse_replaces("no marker here"), None);
        assert_eq!(parse_id_list("m5..m3"), None);
    }

    #[test]
    fn format_id_list_writes_runs_as_ranges() {
        use troupe_protocol::MessageId;
        let ids = [3, 4, 5, 9, 12, 13].map(MessageId);
        assert_eq!(format_id_list(&ids), "m3..m5, m9, m12..m13");
    }
}
