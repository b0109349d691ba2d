//! Which messages compaction must never touch.
//!
//! The system prompt frames everything, the first user message is the task, and the last few
//! user/assistant messages are what the agent is working on right now. Tool results between
//! those recent messages are *not* protected: they are usually the bulk of the tokens.

use serde::{Deserialize, Serialize};
use troupe_runtime::{ChatMessage, MessageId, MessageKind, Role};

use crate::id_hash::IdMap;

/// Why a message is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtectionReason {
    /// The leading system message.
    SystemPrompt,
    /// The first user message: the task.
    FirstUserMessage,
    /// One of the last N user/assistant messages.
    Recent,
}

impl std::fmt::Display for ProtectionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProtectionReason::SystemPrompt => "the system prompt",
            ProtectionReason::FirstUserMessage => "the first user message",
            ProtectionReason::Recent => "one of the most recent user/assistant messages",
        })
    }
}

/// The protected messages of one conversation, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedSet {
    reasons: IdMap<MessageId, ProtectionReason>,
}

/// An inclusive range of consecutive messages, by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRange {
    /// The first message of the range.
    pub start: MessageId,
    /// The last message of the range (inclusive).
    pub end: MessageId,
}

impl ProtectedSet {
    /// The protected messages of `messages`: the leading system (or developer) message, the
    /// first user message and the last `recent` user/assistant messages (display-only messages
    /// never count).
    pub fn compute(messages: &[ChatMessage], recent: usize) -> Self {
        let mut reasons = IdMap::default();
        let mut remaining = recent;
        for message in messages.iter().rev() {
            if remaining == 0 {
                break;
            }
            if matches!(message.role, Role::User | Role::Assistant)
                && message.kind != MessageKind::DisplayOnly
            {
                reasons.insert(message.id, ProtectionReason::Recent);
                remaining -= 1;
            }
        }
        let first_user = messages.iter().find(|m| {
            m.role == Role::User
                && !matches!(m.kind, MessageKind::DisplayOnly | MessageKind::Summary)
        });
        if let Some(first_user) = first_user {
            reasons.insert(first_user.id, ProtectionReason::FirstUserMessage);
        }
        if let Some(system) = messages.first().filter(|m| m.role.is_instructions()) {
            reasons.insert(system.id, ProtectionReason::SystemPrompt);
        }
        ProtectedSet { reasons }
    }

    /// Whether `id` is protected.
    pub fn contains(&self, id: MessageId) -> bool {
        self.reasons.contains_key(&id)
    }

    /// Why `id` is protected, if it is.
    pub fn reason(&self, id: MessageId) -> Option<ProtectionReason> {
        self.reasons.get(&id).copied()
    }

    /// How many messages are protected.
    pub fn len(&self) -> usize {
        self.reasons.len()
    }

    /// Whether nothing is protected.
    pub fn is_empty(&self) -> bool {
        self.reasons.is_empty()
    }

    /// The protected ids, in no particular order.
    pub fn ids(&self) -> impl Iterator<Item = MessageId> + '_ {
        self.reasons.keys().copied()
    }

    /// Runs of consecutive protected messages in `messages`.
    pub fn ranges(&self, messages: &[ChatMessage]) -> Vec<IdRange> {
        let mut ranges: Vec<IdRange> = Vec::new();
        let mut open = false;
        for message in messages {
            if self.contains(message.id) {
                match ranges.last_mut() {
                    Some(last) if open => last.end = message.id,
                    _ => ranges.push(IdRange {
                        start: message.id,
                        end: message.id,
                    }),
                }
                open = true;
            } else {
                open = false;
            }
        }
        ranges
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_runtime::{Conversation, ToolCall};

    #[test]
    fn protects_system_first_user_and_recent_but_not_tools() {
        let mut c = Conversation::new();
        let system = c.push(ChatMessage::system("s"));
        let task = c.push(ChatMessage::user("task"));
        let old = c.push(ChatMessage::assistant("old"));
        let a = c.push(ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new("1", "x", "{}")],
        ));
        let tool = c.push(ChatMessage::tool_result("1", "out"));
        let u = c.push(ChatMessage::user("u"));
        let b = c.push(ChatMessage::assistant("b"));
        let set = ProtectedSet::compute(&c.to_messages(), 3);
        assert_eq!(set.reason(system), Some(ProtectionReason::SystemPrompt));
        assert_eq!(set.reason(task), Some(ProtectionReason::FirstUserMessage));
        assert!(!set.contains(old));
        assert!(!set.contains(tool));
        for id in [a, u, b] {
            assert_eq!(set.reason(id), Some(ProtectionReason::Recent));
        }
        let ranges = set.ranges(&c.to_messages());
        assert_eq!(ranges.len(), 3);
        assert_eq!(
            ranges[0],
            IdRange {
                start: system,
                end: task
            }
        );
        assert_eq!(ranges[2], IdRange { start: u, end: b });
    }
}
