//! An ordered conversation that hands out stable message ids.

use serde::{Deserialize, Serialize};

use crate::message::{ChatMessage, MessageId, StoredMessage};

/// The messages of one agent's conversation, in order, each with a stable [`MessageId`].
///
/// ```
/// use troupe_runtime::{ChatMessage, Conversation};
/// let mut c = Conversation::new();
/// let id = c.push(ChatMessage::user("hello"));
/// assert_eq!(id.to_string(), "m1");
/// assert_eq!(c.get(id).unwrap().text(), "hello");
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(from = "StoredConversation", into = "StoredConversation")]
pub struct Conversation {
    messages: Vec<ChatMessage>,
    next_id: u64,
}

impl Conversation {
    /// An empty conversation.
    pub fn new() -> Self {
        Conversation {
            messages: Vec::new(),
            next_id: 1,
        }
    }

    /// A conversation of wire-shape messages (e.g. a transcript file), ids assigned in order.
    pub fn from_messages(messages: impl IntoIterator<Item = ChatMessage>) -> Self {
        let mut c = Conversation::new();
        for m in messages {
            c.push(m);
        }
        c
    }

    /// A conversation that keeps the ids and kinds its messages already carry.
    ///
    /// Messages without an id get fresh ones; later pushes never reuse an id.
    pub fn from_stored(messages: Vec<ChatMessage>) -> Self {
        let max = messages.iter().map(|m| m.id.0).max().unwrap_or(0);
        let mut c = Conversation {
            messages: Vec::with_capacity(messages.len()),
            next_id: max + 1,
        };
        for m in messages {
            if m.id.is_assigned() {
                c.messages.push(m);
            } else {
                c.push(m);
            }
        }
        c
    }

    /// Append a message, assigning it a fresh id (an id it already has is replaced).
    pub fn push(&mut self, mut message: ChatMessage) -> MessageId {
        let id = self.allocate_id();
        message.id = id;
        self.messages.push(message);
        id
    }

    /// Reserve a fresh id without pushing (for messages built before insertion, e.g. summaries).
    pub fn allocate_id(&mut self) -> MessageId {
        let id = MessageId(self.next_id.max(1));
        self.next_id = id.0 + 1;
        id
    }

    /// The messages in order.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// Replace every message at once (compaction's output); ids are kept as given.
    ///
    /// Ids the new messages carry are respected and the id counter moves past them.
    pub fn replace_messages(&mut self, messages: Vec<ChatMessage>) {
        let max = messages.iter().map(|m| m.id.0).max().unwrap_or(0);
        self.next_id = self.next_id.max(max + 1);
        self.messages = messages;
    }

    /// The message with this id.
    pub fn get(&self, id: MessageId) -> Option<&ChatMessage> {
        self.messages.iter().find(|m| m.id == id)
    }

    /// The message with this id, to edit in place (its id cannot change through this).
    pub fn get_mut(&mut self, id: MessageId) -> Option<&mut ChatMessage> {
        self.messages.iter_mut().find(|m| m.id == id)
    }

    /// The position of the message with this id.
    pub fn position(&self, id: MessageId) -> Option<usize> {
        self.messages.iter().position(|m| m.id == id)
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The last message.
    pub fn last(&self) -> Option<&ChatMessage> {
        self.messages.last()
    }

    /// The next id this conversation will hand out.
    pub fn next_id(&self) -> MessageId {
        MessageId(self.next_id.max(1))
    }

    /// Remove every message but keep the id counter (ids stay unique after `/clear`).
    pub fn clear(&mut self) {
        self.messages.clear();
    }

    /// The system prompt, if the conversation starts with one (`system` or `developer`).
    pub fn system_prompt(&self) -> Option<&ChatMessage> {
        self.messages.first().filter(|m| m.role.is_instructions())
    }
}

/// The serde form of a conversation: stored messages with ids and kinds.
#[derive(Serialize, Deserialize)]
struct StoredConversation {
    next_id: u64,
    messages: Vec<StoredMessage>,
}

impl From<StoredConversation> for Conversation {
    fn from(s: StoredConversation) -> Self {
        let mut c =
            Conversation::from_stored(s.messages.into_iter().map(ChatMessage::from).collect());
        c.next_id = c.next_id.max(s.next_id);
        c
    }
}

impl From<Conversation> for StoredConversation {
    fn from(c: Conversation) -> Self {
        StoredConversation {
            next_id: c.next_id,
            messages: c.messages.iter().map(StoredMessage::from).collect(),
        }
    }
}
