//! Which messages compaction must never touch.
//!
//! The system prompt frames everything, the first user message is the task, and the last few
//! user/assistant messages are what the agent is working on right now. Tool results between
//! those recent messages are *not* protected: they are usually the bulk of the tokens.
//!
//! Pinned messages ([`ChatMessage::pinned`]: a project's rules, a message a compaction hook
//! pinned) are protected the same way, so every check that keeps protected messages
//! byte-identical keeps them too. A pinned tool result pins the assistant message that called
//! it: a summary must keep a call with its results.

use serde::{Deserialize, Serialize};
use troupe_protocol::{ChatMessage, MessageId, MessageKind, Role};

use crate::pairing::owners;
use troupe_protocol::id_hash::IdMap;

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
    /// Pinned by the agent's spec or a compaction hook (or the call of a pinned tool result).
    Pinned,
}

impl std::fmt::Display for ProtectionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProtectionReason::SystemPrompt => "the system prompt",
            ProtectionReason::FirstUserMessage => "the first user message",
            ProtectionReason::Recent => "one of the most recent user/assistant messages",
            ProtectionReason::Pinned => "a pinned message",
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
    /// first user message that is not pinned (the task; a pinned rules message injected ahead
    /// of it is not the task), the last `recent` user/assistant messages (display-only messages
    /// never count), and the pinned messages with the calls of pinned tool results.
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
                && !m.pinned
                && !matches!(m.kind, MessageKind::DisplayOnly | MessageKind::Summary)
        });
        if let Some(first_user) = first_user {
            reasons.insert(first_user.id, ProtectionReason::FirstUserMessage);
        }
        if let Some(system) = messages.first().filter(|m| m.role.is_instructions()) {
            reasons.insert(system.id, ProtectionReason::SystemPrompt);
        }
        if messages.iter().any(|m| m.pinned) {
            let owners = owners(messages);
            for (i, message) in messages.iter().enumerate().filter(|(_, m)| m.pinned) {
                reasons.insert(message.id, ProtectionReason::Pinned);
                if let Some(call) = owners[i] {
                    reasons
                        .entry(messages[call].id)
                        .or_insert(ProtectionReason::Pinned);
                }
            }
        }
        ProtectedSet { reasons }
    }

    /// The pinned messages of `messages` and their tokens (as `tokens` counts them), for the
    /// report's word on a target the pins put out of reach.
    pub(crate) fn pinned_tokens(messages: &[ChatMessage], tokens: &[usize]) -> (usize, usize) {
        messages
            .iter()
            .zip(tokens)
            .filter(|(m, _)| m.pinned)
            .fold((0, 0), |(n, sum), (_, t)| (n + 1, sum + t))
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
    use troupe_protocol::{Conversation, ToolCall};

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
