//! The archive: every message compaction replaced or removed, kept verbatim by id.
//!
//! The archive is an undo log. Each entry stores one original message and what took its place:
//! a new message (`replaced_by`, shared by every original one summary replaced) or nothing (a
//! removed display-only message, with the message it followed). [`expand`] undoes the entries in
//! reverse, which restores the conversation exactly — ids and kinds included — even across
//! several compactions whose archives were concatenated.
//!
//! The serde form is JSONL-friendly: one [`ArchiveEntry`] per line.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use troupe_protocol::{ChatMessage, MessageId, StoredMessage};

/// One archived original and what replaced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchiveEntry {
    /// The message that took the original's place; `None` when the original was removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<MessageId>,
    /// For a removed original: the message it followed (`None`: it was first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<MessageId>,
    /// The original, with its id and kind.
    pub original: StoredMessage,
}

/// The archived originals of one or more compactions, in the order they were replaced.
///
/// Cloning is O(1): the entries are shared, and copied only when a clone that shares them
/// records more (an agent's checkpoint holds a clone of its archive after every request).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Archive {
    entries: Arc<Vec<ArchiveEntry>>,
}

impl Serialize for Archive {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.entries.as_slice().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Archive {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<ArchiveEntry>::deserialize(d).map(Archive::from)
    }
}

/// Why an archive file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// A line is not an archive entry.
    #[error("archive line {line}: {cause}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// The parse error.
        cause: serde_json::Error,
    },
    /// An entry could not be written.
    #[error("cannot serialize archive entry for {id}: {cause}")]
    Serialize {
        /// The original's id.
        id: MessageId,
        /// The serde error.
        cause: serde_json::Error,
    },
}

/// Why a compacted conversation cannot be expanded with an archive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// The archive names a replacing message the conversation does not contain.
    #[error(
        "the archive says {replacement} replaced {original}, but {replacement} is not in the conversation"
    )]
    MissingReplacement {
        /// The replacing message.
        replacement: MessageId,
        /// One original it replaced.
        original: MessageId,
    },
    /// A removed message's neighbour is gone.
    #[error("{original} was removed after {anchor}, but {anchor} is not in the conversation")]
    MissingAnchor {
        /// The removed message.
        original: MessageId,
        /// The message it followed.
        anchor: MessageId,
    },
}

/// An archive of `entries`, oldest first (e.g. those a session log recorded).
impl From<Vec<ArchiveEntry>> for Archive {
    fn from(entries: Vec<ArchiveEntry>) -> Self {
        Archive {
            entries: Arc::new(entries),
        }
    }
}

impl Archive {
    /// An empty archive.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entries in the order they were recorded.
    pub fn entries(&self) -> &[ArchiveEntry] {
        &self.entries
    }

    /// How many originals are archived.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is archived.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Record that `originals` (in conversation order) were replaced by `replacement`.
    pub fn record_replacement<M: Into<StoredMessage>>(
        &mut self,
        replacement: MessageId,
        originals: impl IntoIterator<Item = M>,
    ) {
        Arc::make_mut(&mut self.entries).extend(originals.into_iter().map(|m| ArchiveEntry {
            replaced_by: Some(replacement),
            after: None,
            original: m.into(),
        }));
    }

    /// Record that `original` was removed; it followed `after`.
    pub fn record_removal(&mut self, original: impl Into<StoredMessage>, after: Option<MessageId>) {
        Arc::make_mut(&mut self.entries).push(ArchiveEntry {
            replaced_by: None,
            after,
            original: original.into(),
        });
    }

    /// Append another archive (a later compaction's entries).
    pub fn extend(&mut self, later: &Archive) {
        if later.entries.is_empty() {
            return;
        }
        Arc::make_mut(&mut self.entries).extend(later.entries.iter().cloned());
    }

    /// The archived original with this id.
    pub fn original(&self, id: MessageId) -> Option<&StoredMessage> {
        self.entries
            .iter()
            .map(|e| &e.original)
            .find(|m| m.id == id)
    }

    /// The originals `replacement` stands for, in conversation order.
    pub fn replaced_by(&self, replacement: MessageId) -> Vec<&StoredMessage> {
        self.entries
            .iter()
            .filter(|e| e.replaced_by == Some(replacement))
            .map(|e| &e.original)
            .collect()
    }

    /// One JSON entry per line.
    pub fn to_jsonl(&self) -> Result<String, ArchiveError> {
        let mut out = String::new();
        for entry in self.entries.iter() {
            let line = serde_json::to_string(entry).map_err(|source| ArchiveError::Serialize {
                id: entry.original.id,
                cause: source,
            })?;
            out.push_str(&line);
            out.push('\n');
        }
        Ok(out)
    }

    /// Read entries written by [`Archive::to_jsonl`] (blank lines are skipped).
    pub fn from_jsonl(text: &str) -> Result<Self, ArchiveError> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let entry = serde_json::from_str(line).map_err(|source| ArchiveError::BadLine {
                line: i + 1,
                cause: source,
            })?;
            entries.push(entry);
        }
        Ok(Archive::from(entries))
    }
}

/// Restore the conversation `compacted` came from, by undoing the archive's entries in reverse.
///
/// With the archive of one compaction this returns that compaction's input exactly
/// (`expand(compact(x)) == x`); with the concatenated archives of several, the oldest input.
pub fn expand(
    compacted: &[ChatMessage],
    archive: &Archive,
) -> Result<Vec<ChatMessage>, ExpandError> {
    Ok(restore(compacted, archive)?
        .into_iter()
        .map(Restored::to_message)
        .collect())
}

/// One message of a restored conversation, borrowed from where it lives: a message the
/// compaction kept, or an archived original. The invariant check compares a restored
/// conversation with the input through these, so checking a compaction copies no output.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Restored<'a> {
    /// A message of the compacted conversation.
    Kept(&'a ChatMessage),
    /// An original the archive holds.
    Archived(&'a StoredMessage),
}

impl Restored<'_> {
    pub(crate) fn id(self) -> MessageId {
        match self {
            Restored::Kept(m) => m.id,
            Restored::Archived(s) => s.id,
        }
    }

    fn to_message(self) -> ChatMessage {
        match self {
            Restored::Kept(m) => m.clone(),
            Restored::Archived(s) => ChatMessage::from(s.clone()),
        }
    }

    /// Whether this is `m`: what `to_message() == *m` says, without the copy.
    pub(crate) fn is(self, m: &ChatMessage) -> bool {
        match self {
            Restored::Kept(kept) => kept == m,
            Restored::Archived(stored) => {
                // Every field named, none with `..`: a field added to `ChatMessage` must be
                // compared here too, or this does not compile.
                let ChatMessage {
                    role,
                    content,
                    tool_calls,
                    tool_call_id,
                    extra,
                    id: _,
                    kind: _,
                    pinned: _,
                } = &stored.message;
                stored.id == m.id
                    && stored.kind == m.kind
                    && stored.pinned == m.pinned
                    && *role == m.role
                    && *content == m.content
                    && *tool_calls == m.tool_calls
                    && *tool_call_id == m.tool_call_id
                    && *extra == m.extra
            }
        }
    }
}

/// [`expand`], borrowing every message instead of copying it.
pub(crate) fn restore<'a>(
    compacted: &'a [ChatMessage],
    archive: &'a Archive,
) -> Result<Vec<Restored<'a>>, ExpandError> {
    let mut messages: Vec<Restored<'a>> = compacted.iter().map(Restored::Kept).collect();
    let entries = archive.entries();
    let mut end = entries.len();
    while end > 0 {
        let last = &entries[end - 1];
        match last.replaced_by {
            Some(replacement) => {
                let mut start = end - 1;
                while start > 0 && entries[start - 1].replaced_by == Some(replacement) {
                    start -= 1;
                }
                let position = messages.iter().position(|m| m.id() == replacement).ok_or(
                    ExpandError::MissingReplacement {
                        replacement,
                        original: last.original.id,
                    },
                )?;
                let originals = entries[start..end]
                    .iter()
                    .map(|e| Restored::Archived(&e.original));
                messages.splice(position..=position, originals);
                end = start;
            }
            None => {
                let position = match last.after {
                    None => 0,
                    Some(anchor) => {
                        messages.iter().position(|m| m.id() == anchor).ok_or(
                            ExpandError::MissingAnchor {
                                original: last.original.id,
                                anchor,
                            },
                        )? + 1
                    }
                };
                messages.insert(position, Restored::Archived(&last.original));
                end -= 1;
            }
        }
    }
    Ok(messages)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_protocol::Conversation;

    #[test]
    fn undo_restores_replacements_and_removals_in_order() {
        let original = Conversation::from_messages([
            ChatMessage::user("a"),
            ChatMessage::assistant("b").with_kind(troupe_protocol::MessageKind::DisplayOnly),
            ChatMessage::assistant("c"),
            ChatMessage::user("d"),
        ]);
        let m = original.to_messages();
        let mut archive = Archive::new();
        // Remove the display-only message, then summarize c+d into m10, then replace m10 by m11.
        archive.record_removal(&m[1], Some(m[0].id));
        let summary = ChatMessage {
            id: MessageId(10),
            ..ChatMessage::user("sum")
        };
        archive.record_replacement(MessageId(10), &m[2..4]);
        let resummary = ChatMessage {
            id: MessageId(11),
            ..ChatMessage::user("sum2")
        };
        archive.record_replacement(MessageId(11), std::slice::from_ref(&summary));
        let compacted = vec![m[0].clone(), resummary];
        assert_eq!(expand(&compacted, &archive).unwrap(), m);

        let text = archive.to_jsonl().unwrap();
        assert_eq!(text.lines().count(), 4);
        assert_eq!(Archive::from_jsonl(&text).unwrap(), archive);
        assert_eq!(archive.replaced_by(MessageId(10)).len(), 2);
    }

    #[test]
    fn missing_replacement_is_an_error() {
        let c = Conversation::from_messages([ChatMessage::user("a")]);
        let mut archive = Archive::new();
        archive.record_replacement(MessageId(99), c.to_messages());
        let err = expand(&[], &archive).unwrap_err();
        assert!(err.to_string().contains("m99"));
    }
}
