//! [`ContextOverflow`]: why a model call was not made — its request could not fit the model's
//! context window with room for the answer, even after compaction.

use serde::{Deserialize, Serialize};
use troupe_protocol::{MessageId, Role};

/// A request the agent refused to send because it cannot fit the model's context window with
/// the room kept for the answer (the output reserve). The agent answers it as
/// [`AgentError::ContextOverflow`](crate::AgentError::ContextOverflow), and the conversation and
/// its session log are as the request found them: the caller may send something smaller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContextOverflow {
    /// One message cannot fit even alone: with the system prompt, the tool definitions and the
    /// output reserve it takes more than the window, and compaction never shrinks it (it is
    /// protected, or compaction could not).
    #[error(
        "the {role} message {id} (message {position} of {of}) takes {tokens} tokens: with the \
         system prompt ({system_tokens}), the tool definitions ({tool_tokens}) and the room kept \
         for the answer ({output_reserve}) it cannot fit the context window of {window} tokens \
         even alone; nothing was sent to the model — send it in smaller parts"
    )]
    MessageTooLarge {
        /// The message's role.
        role: Role,
        /// Its id in the conversation.
        id: MessageId,
        /// Its position in the conversation, counting from 1 (the system prompt is the first).
        position: usize,
        /// How many messages the conversation holds.
        of: usize,
        /// Its tokens.
        tokens: usize,
        /// The system prompt's tokens (0 when the message is the system prompt).
        system_tokens: usize,
        /// The tool definitions' tokens.
        tool_tokens: usize,
        /// The room kept for the answer.
        output_reserve: usize,
        /// The model's context window.
        window: usize,
    },
    /// Every message fits alone, but compaction could not bring the request under the window.
    #[error(
        "the request takes {tokens} tokens even after compaction ({tool_tokens} of them the tool \
         definitions): with the room kept for the answer ({output_reserve}) it does not fit the \
         context window of {window} tokens; nothing was sent to the model"
    )]
    Conversation {
        /// The request's tokens: messages and tool definitions.
        tokens: usize,
        /// The tool definitions' tokens.
        tool_tokens: usize,
        /// The room kept for the answer.
        output_reserve: usize,
        /// The model's context window.
        window: usize,
    },
}
