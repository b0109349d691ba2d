//! Tool call / tool result pairing: the rule chat APIs enforce and compaction must never break.
//!
//! A `tool` message must answer an open call of the nearest preceding assistant message and
//! follow it directly (other tool results of the same batch may sit between). Display-only
//! messages are never sent to a model, so they are transparent here.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap, HashSet};

use troupe_protocol::{ChatMessage, MessageId, MessageKind, Role};

use crate::validate::InvariantViolation;

/// For every message, the index of the assistant message a tool result answers (`None` for
/// messages that are not tool results, or that follow no assistant message).
pub fn owners<M: Borrow<ChatMessage>>(messages: &[M]) -> Vec<Option<usize>> {
    let mut owner = None;
    messages
        .iter()
        .map(Borrow::borrow)
        .enumerate()
        .map(|(i, m)| {
            if m.kind == MessageKind::DisplayOnly {
                return None;
            }
            match m.role {
                Role::Assistant => {
                    owner = Some(i);
                    None
                }
                Role::Tool => owner,
                Role::User | Role::System | Role::Developer => None,
            }
        })
        .collect()
}

/// The index of the assistant message the tool result at `index` answers: the nearest
/// preceding assistant message that is not display-only.
pub(crate) fn owner_of(messages: &[ChatMessage], index: usize) -> Option<usize> {
    if messages.get(index)?.role != Role::Tool {
        return None;
    }
    messages[..index]
        .iter()
        .rposition(|m| m.kind != MessageKind::DisplayOnly && m.role != Role::Tool)
        .filter(|&i| messages[i].role == Role::Assistant)
}

/// The name of the tool whose result is `messages[index]`, if its call can be found.
pub fn tool_name<M: Borrow<ChatMessage>>(
    messages: &[M],
    owner: Option<usize>,
    index: usize,
) -> Option<&str> {
    let call_id = messages.get(index)?.borrow().tool_call_id.as_deref()?;
    let assistant: &ChatMessage = messages.get(owner?)?.borrow();
    assistant
        .calls()
        .iter()
        .find(|c| c.id == call_id)
        .map(|c| c.function.name.as_str())
}

/// Check that every tool result answers an open call of the nearest preceding assistant
/// message, directly after it, at most once.
pub(crate) fn check_pairing(messages: &[ChatMessage]) -> Result<(), InvariantViolation> {
    let mut open: HashSet<&str> = HashSet::new();
    let mut previous_role: Option<Role> = None;
    for message in messages
        .iter()
        .filter(|m| m.kind != MessageKind::DisplayOnly)
    {
        match message.role {
            Role::Assistant => {
                open = message.calls().iter().map(|c| c.id.as_str()).collect();
            }
            Role::Tool => {
                let Some(call_id) = message.tool_call_id.as_deref() else {
                    return Err(InvariantViolation::MissingToolCallId { id: message.id });
                };
                if !matches!(previous_role, Some(Role::Assistant | Role::Tool)) {
                    return Err(InvariantViolation::ToolNotAdjacent { id: message.id });
                }
                if !open.remove(call_id) {
                    return Err(InvariantViolation::OrphanToolResult {
                        id: message.id,
                        call_id: call_id.to_string(),
                    });
                }
            }
            Role::User | Role::System | Role::Developer => open.clear(),
        }
        previous_role = Some(message.role);
    }
    Ok(())
}

/// For every assistant message with tool calls, the call ids its following tool results answer.
pub(crate) fn answered_calls(messages: &[ChatMessage]) -> HashMap<MessageId, BTreeSet<String>> {
    let owners = owners(messages);
    let mut answered: HashMap<MessageId, BTreeSet<String>> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        if message.role == Role::Assistant && message.has_tool_calls() {
            answered.entry(message.id).or_default();
        }
        if let (Some(owner), Some(call_id)) = (owners[i], message.tool_call_id.as_ref()) {
            answered
                .entry(messages[owner].id)
                .or_default()
                .insert(call_id.clone());
        }
    }
    answered
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_protocol::{Conversation, ToolCall};

    fn calls(ids: &[&str]) -> ChatMessage {
        ChatMessage::assistant_tool_calls(
            None,
            ids.iter()
                .map(|id| ToolCall::new(*id, "bash", "{}"))
                .collect(),
        )
    }

    #[test]
    fn accepts_parallel_results_and_rejects_orphans() {
        let ok = Conversation::from_messages([
            ChatMessage::user("u"),
            calls(&["a", "b"]),
            ChatMessage::tool_result("b", "2"),
            ChatMessage::tool_result("a", "1"),
        ]);
        check_pairing(&ok.to_messages()).unwrap();
        let owners = owners(&ok.to_messages());
        assert_eq!(owners[2], Some(1));
        assert_eq!(tool_name(&ok.to_messages(), owners[3], 3), Some("bash"));

        let twice = Conversation::from_messages([
            calls(&["a"]),
            ChatMessage::tool_result("a", "1"),
            ChatMessage::tool_result("a", "1"),
        ]);
        assert!(matches!(
            check_pairing(&twice.to_messages()),
            Err(InvariantViolation::OrphanToolResult { .. })
        ));

        let after_user = Conversation::from_messages([
            calls(&["a"]),
            ChatMessage::user("interrupt"),
            ChatMessage::tool_result("a", "1"),
        ]);
        assert!(matches!(
            check_pairing(&after_user.to_messages()),
            Err(InvariantViolation::ToolNotAdjacent { .. })
        ));
    }
}
