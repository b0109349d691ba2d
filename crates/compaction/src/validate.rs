//! The invariants every compaction result must satisfy, checked before a result is returned.
//!
//! A broken conversation (an orphaned tool result, a lost task) bricks an agent session, so a
//! violation is an error, never a warning.

use serde::Serialize;
use troupe_protocol::{ChatMessage, MessageId};

use crate::archive::{Archive, restore};
use crate::pairing::{answered_calls, check_pairing};
use crate::policy::ContextPolicy;
use crate::protection::ProtectedSet;
use troupe_protocol::id_hash::{IdMap, IdSet};
use troupe_tokens::TokenCounter;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "violation", rename_all = "snake_case")]
pub enum InvariantViolation {
    /// A tool result answers no open call of the nearest preceding assistant message.
    #[error(
        "tool message {id} answers `{call_id}`, which is not an open call of the nearest preceding assistant message"
    )]
    OrphanToolResult {
        /// The tool message.
        id: MessageId,
        /// The call id it names.
        call_id: String,
    },
    /// A tool result names no call.
    #[error("tool message {id} has no tool_call_id")]
    MissingToolCallId {
        /// The tool message.
        id: MessageId,
    },
    /// A tool result does not directly follow its assistant message or a sibling result.
    #[error(
        "tool message {id} does not directly follow its assistant message or another tool result"
    )]
    ToolNotAdjacent {
        /// The tool message.
        id: MessageId,
    },
    /// Some results of one assistant message's parallel calls were dropped and others kept.
    #[error(
        "the parallel calls of assistant message {assistant} were split: {kept} of {before} results remain"
    )]
    SplitParallelCalls {
        /// The assistant message.
        assistant: MessageId,
        /// Results before compaction.
        before: usize,
        /// Results after.
        kept: usize,
    },
    /// A protected message is gone (pinned messages are protected).
    #[error("protected message {id} is missing from the result")]
    ProtectedMissing {
        /// The protected message's id.
        id: MessageId,
    },
    /// A protected message changed (a pinned one's pin is part of what must not change).
    #[error("protected message {id} was changed")]
    ProtectedChanged {
        /// The protected message's id.
        id: MessageId,
    },
    /// Protected messages changed order.
    #[error("protected message {id} moved relative to the other protected messages")]
    ProtectedReordered {
        /// The protected message's id.
        id: MessageId,
    },
    /// The system prompt is not first any more.
    #[error("the system prompt {id} is no longer the first message")]
    SystemPromptMoved {
        /// The system prompt.
        id: MessageId,
    },
    /// Tokens went up.
    #[error("compaction increased the tokens from {before} to {after}")]
    TokensIncreased {
        /// Tokens before.
        before: usize,
        /// Tokens after.
        after: usize,
    },
    /// The conversation was already under target, yet it changed.
    #[error(
        "the conversation was under target ({tokens} ≤ {target} tokens) but compaction changed it"
    )]
    ChangedUnderTarget {
        /// Tokens before.
        tokens: usize,
        /// The target.
        target: usize,
    },
    /// Two messages share an id.
    #[error("message id {id} appears twice")]
    DuplicateId {
        /// The id that appears more than once.
        id: MessageId,
    },
    /// Expanding the result with the archive does not give back the input.
    #[error("expanding the result with its archive does not restore the original: {detail}")]
    NotRecoverable {
        /// What differs.
        detail: String,
    },
}

/// What [`check_invariants`] needs besides the two message lists.
#[derive(Debug, Clone, Copy)]
pub struct ValidationContext<'a> {
    /// The protected messages of `before`.
    pub protected: &'a ProtectedSet,
    /// The archive entries recorded by this compaction.
    pub archive: &'a Archive,
    /// Request tokens of `before`.
    pub tokens_before: usize,
    /// Request tokens of `after`.
    pub tokens_after: usize,
    /// The policy's target in tokens.
    pub target_tokens: usize,
}

/// Check a compaction of `before` into `after` (counting tokens with `counter`).
pub fn validate(
    before: &[ChatMessage],
    after: &[ChatMessage],
    archive: &Archive,
    policy: &ContextPolicy,
    counter: &dyn TokenCounter,
) -> Result<(), InvariantViolation> {
    let protected = ProtectedSet::compute(before, policy.protected_recent);
    let context = ValidationContext {
        protected: &protected,
        archive,
        tokens_before: counter.count_messages(before),
        tokens_after: counter.count_messages(after),
        target_tokens: policy.target_tokens(),
    };
    check_invariants(before, after, &context)
}

/// Check every invariant with precomputed token totals and protected set.
pub fn check_invariants(
    before: &[ChatMessage],
    after: &[ChatMessage],
    context: &ValidationContext<'_>,
) -> Result<(), InvariantViolation> {
    if context.tokens_before <= context.target_tokens && after != before {
        return Err(InvariantViolation::ChangedUnderTarget {
            tokens: context.tokens_before,
            target: context.target_tokens,
        });
    }
    if context.tokens_after > context.tokens_before {
        return Err(InvariantViolation::TokensIncreased {
            before: context.tokens_before,
            after: context.tokens_after,
        });
    }
    let mut seen = IdSet::default();
    for message in after {
        if !seen.insert(message.id) {
            return Err(InvariantViolation::DuplicateId { id: message.id });
        }
    }
    if let Some(system) = before.first().filter(|m| m.role.is_instructions())
        && after.first() != Some(system)
    {
        return Err(InvariantViolation::SystemPromptMoved { id: system.id });
    }
    check_protected(before, after, context.protected)?;
    check_pairing(after)?;
    check_parallel_calls(before, after, context.archive)?;
    let restored =
        restore(after, context.archive).map_err(|e| InvariantViolation::NotRecoverable {
            detail: e.to_string(),
        })?;
    let differs = restored.iter().zip(before).position(|(r, b)| !r.is(b));
    if differs.is_some() || restored.len() != before.len() {
        let detail = match differs {
            Some(i) => format!(
                "message {} differs from the original {}",
                restored[i].id(),
                before[i].id
            ),
            None => format!(
                "{} messages restored, {} expected",
                restored.len(),
                before.len()
            ),
        };
        return Err(InvariantViolation::NotRecoverable { detail });
    }
    Ok(())
}

fn check_protected(
    before: &[ChatMessage],
    after: &[ChatMessage],
    protected: &ProtectedSet,
) -> Result<(), InvariantViolation> {
    let positions: IdMap<MessageId, usize> =
        after.iter().enumerate().map(|(i, m)| (m.id, i)).collect();
    let mut last_position = None;
    for original in before.iter().filter(|m| protected.contains(m.id)) {
        let Some(&position) = positions.get(&original.id) else {
            return Err(InvariantViolation::ProtectedMissing { id: original.id });
        };
        if after[position] != *original {
            return Err(InvariantViolation::ProtectedChanged { id: original.id });
        }
        if last_position.is_some_and(|last| position < last) {
            return Err(InvariantViolation::ProtectedReordered { id: original.id });
        }
        last_position = Some(position);
    }
    Ok(())
}

/// An assistant message kept (or rewritten in place, per-message mode) keeps all the results it
/// had; one dropped loses them all.
fn check_parallel_calls(
    before: &[ChatMessage],
    after: &[ChatMessage],
    archive: &Archive,
) -> Result<(), InvariantViolation> {
    let answered_before = answered_calls(before);
    for (assistant, kept) in answered_calls(after) {
        // A rewritten assistant message answers for the single original it replaced.
        let original = match archive.replaced_by(assistant).as_slice() {
            [only] => only.id,
            _ => assistant,
        };
        let Some(expected) = answered_before.get(&original) else {
            continue;
        };
        if kept != *expected {
            return Err(InvariantViolation::SplitParallelCalls {
                assistant,
                before: expected.len(),
                kept: kept.len(),
            });
        }
    }
    Ok(())
}
