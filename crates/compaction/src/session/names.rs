//! The session's side of the one rule (`artifacts/hidden.rs`): what the messages an operation
//! replaces stood for, how much room a replacement's list of hidden names gets, and the
//! artifacts left out for room, gathered for the report.

use std::ops::RangeInclusive;

use troupe_protocol::{ChatMessage, MessageId, ToolCall};

use super::CompactionSession;
use crate::artifacts::ArtifactLedger;
use crate::artifacts::hidden::{Named, hidden_artifacts, name_within};
use crate::pairing::owner_of;
use troupe_protocol::DroppedArtifact;

/// The fewest tokens a replacement's list of hidden names may take, whatever its size.
const NAMES_ROOM_FLOOR: usize = 32;

impl CompactionSession<'_> {
    /// The messages of `before` that `replaced` (messages now in the working conversation)
    /// stand for.
    pub(super) fn sources_of(&self, replaced: &[MessageId]) -> Vec<MessageId> {
        replaced
            .iter()
            .flat_map(|id| self.sources.get(id).cloned().unwrap_or_else(|| vec![*id]))
            .collect()
    }

    /// The input messages (of `before`, in order) that `ids` — messages of the working
    /// conversation — stand for: read as they were, so an output truncated earlier in this
    /// session still counts, and an earlier compaction's stub or summary gives the names it
    /// lists.
    fn originals(&self, ids: &[MessageId]) -> Vec<&ChatMessage> {
        let mut at: Vec<usize> = self
            .sources_of(ids)
            .iter()
            .filter_map(|id| self.before_index.get(id).copied())
            .collect();
        at.sort_unstable();
        at.dedup();
        at.into_iter().map(|i| &self.before[i]).collect()
    }

    /// The artifacts of what `messages[range]` stand for.
    pub(super) fn artifacts_behind(&self, range: RangeInclusive<usize>) -> ArtifactLedger {
        let ids: Vec<MessageId> = self.messages[range].iter().map(|m| m.id).collect();
        ArtifactLedger::from_messages(self.originals(&ids))
    }

    /// The names `replacement` of `messages[index]` would hide, listed within `room` tokens
    /// (at least a floor). A tool result is read with the one call it answers (an assistant
    /// message of that call alone: the prose around the call stays, and so do the calls).
    pub(super) fn names_hidden_by(
        &self,
        index: usize,
        replacement: &ChatMessage,
        room: usize,
    ) -> Named {
        let call = self
            .call_answered_by(index)
            .map(|call| ChatMessage::assistant_tool_calls(None, vec![call.clone()]));
        let context: Vec<&ChatMessage> = call.iter().collect();
        let before = self.originals(&[self.messages[index].id]);
        let hidden = hidden_artifacts(&context, before, &[replacement]);
        name_within(&hidden, room.max(NAMES_ROOM_FLOOR), self.counter)
    }

    /// The call the tool result at `index` answers.
    fn call_answered_by(&self, index: usize) -> Option<&ToolCall> {
        let owner = owner_of(&self.messages, index)?;
        let id = self.messages[index].tool_call_id.as_deref()?;
        self.messages[owner]
            .calls()
            .iter()
            .find(|call| call.id == id)
    }

    /// Note artifacts an applied replacement left out for room (each name once).
    pub(super) fn record_dropped(&mut self, dropped: Vec<DroppedArtifact>) {
        for artifact in dropped {
            if !self.dropped.iter().any(|d| d.name == artifact.name) {
                self.dropped.push(artifact);
            }
        }
    }
}
