//! An agent's conversation and its archive as the page shows them: every message with its
//! kind, pin and tool calls, each summary or stub with the archived originals it stands for,
//! and an original read back from the archive by id, as `recall` reads it.

use std::collections::HashMap;

use serde::Serialize;
use troupe_agents::ConversationCopy;
use troupe_compaction::Archive;
use troupe_protocol::{ChatMessage, MessageId, StoredMessage};

/// The most archive entries one listing names (the newest).
const ARCHIVE_LISTING: usize = 500;
/// Characters of an original's first line in a listing.
const FIRST_LINE: usize = 160;

/// One message of a conversation, as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MessageView {
    pub(crate) id: u64,
    pub(crate) role: serde_json::Value,
    pub(crate) kind: serde_json::Value,
    pub(crate) text: String,
    /// `(tool, arguments)` of each tool call it makes.
    pub(crate) tool_calls: Vec<(String, String)>,
    /// For a tool result: the call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) answers: Option<String>,
    pub(crate) pinned: bool,
    /// For a summary or stub: the archived originals it stands for (`recall` reads them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) replaces: Vec<u64>,
}

impl MessageView {
    fn of(m: &ChatMessage, replaces: Vec<u64>) -> Self {
        MessageView {
            id: m.id.0,
            role: serde_json::to_value(m.role).unwrap_or_default(),
            kind: serde_json::to_value(m.kind).unwrap_or_default(),
            text: m.text(),
            tool_calls: m
                .tool_calls
                .as_slice()
                .iter()
                .map(|c| (c.function.name.clone(), c.function.arguments.clone()))
                .collect(),
            answers: m.tool_call_id.clone(),
            pinned: m.pinned,
            replaces,
        }
    }

    fn stored(m: &StoredMessage, archive: &Archive) -> Self {
        let replaces = archive.replaced_by(m.id).iter().map(|o| o.id.0).collect();
        let mut view = MessageView::of(&m.message, replaces);
        view.id = m.id.0;
        view.kind = serde_json::to_value(m.kind).unwrap_or_default();
        view.pinned = m.pinned;
        view
    }
}

/// An agent's conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ConversationView {
    pub(crate) agent: String,
    pub(crate) messages: Vec<MessageView>,
    /// Originals in the agent's archive.
    pub(crate) archived: usize,
}

impl ConversationView {
    pub(crate) fn of(agent: &str, copy: &ConversationCopy) -> Self {
        // What each replacement stands for, in one pass over the archive (the lookup `recall`
        // makes per id, `Archive::replaced_by`, would scan it once per message).
        let mut replaces: HashMap<MessageId, Vec<u64>> = HashMap::new();
        for entry in copy.archive.entries() {
            if let Some(by) = entry.replaced_by {
                replaces.entry(by).or_default().push(entry.original.id.0);
            }
        }
        ConversationView {
            agent: agent.to_string(),
            messages: copy
                .conversation
                .messages()
                .iter()
                .map(|m| MessageView::of(m, replaces.remove(&m.id).unwrap_or_default()))
                .collect(),
            archived: copy.archive.len(),
        }
    }
}

/// One original in an archive listing.
#[derive(Debug, Serialize)]
pub(crate) struct ArchivedView {
    id: u64,
    role: serde_json::Value,
    kind: serde_json::Value,
    /// The message that took its place (`None`: it was removed).
    replaced_by: Option<u64>,
    first_line: String,
    chars: usize,
}

/// An archive listing: the newest originals first.
#[derive(Debug, Serialize)]
pub(crate) struct ArchiveListing {
    agent: String,
    total: usize,
    entries: Vec<ArchivedView>,
}

/// What an id reads back as: the original under it, and what it (as a summary or stub, live or
/// itself archived) stands for — the two lookups `recall` makes.
#[derive(Debug, Serialize)]
pub(crate) struct ArchivedOriginal {
    agent: String,
    id: u64,
    original: Option<MessageView>,
    replaced: Vec<MessageView>,
}

/// The newest originals of `archive`.
pub(crate) fn listing(agent: &str, archive: &Archive) -> ArchiveListing {
    let entries = archive.entries();
    ArchiveListing {
        agent: agent.to_string(),
        total: entries.len(),
        entries: entries
            .iter()
            .rev()
            .take(ARCHIVE_LISTING)
            .map(|e| {
                let text = e.original.message.text();
                let first = text.lines().map(str::trim).find(|l| !l.is_empty());
                ArchivedView {
                    id: e.original.id.0,
                    role: serde_json::to_value(e.original.message.role).unwrap_or_default(),
                    kind: serde_json::to_value(e.original.kind).unwrap_or_default(),
                    replaced_by: e.replaced_by.map(|r| r.0),
                    first_line: first.unwrap_or("").chars().take(FIRST_LINE).collect(),
                    chars: text.chars().count(),
                }
            })
            .collect(),
    }
}

/// `id` read back from `archive`; `None` when it names nothing archived.
pub(crate) fn original(agent: &str, archive: &Archive, id: MessageId) -> Option<ArchivedOriginal> {
    let original = archive
        .original(id)
        .map(|m| MessageView::stored(m, archive));
    let replaced: Vec<MessageView> = archive
        .replaced_by(id)
        .into_iter()
        .map(|m| MessageView::stored(m, archive))
        .collect();
    (original.is_some() || !replaced.is_empty()).then(|| ArchivedOriginal {
        agent: agent.to_string(),
        id: id.0,
        original,
        replaced,
    })
}
