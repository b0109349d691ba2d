//! An ordered conversation that hands out stable message ids.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::message::{ChatMessage, MessageId, StoredMessage};

/// The messages of one agent's conversation, in order, each with a stable [`MessageId`].
///
/// ```
/// use troupe_protocol::{ChatMessage, Conversation};
/// let mut c = Conversation::new();
/// let id = c.push(ChatMessage::user("hello"));
/// assert_eq!(id.to_string(), "m1");
/// assert_eq!(c.get(id).unwrap().text(), "hello");
/// ```
///
/// Messages are immutable once pushed and shared (`Arc`): a clone of the conversation — an
/// agent's checkpoint, a model request — holds pointers to the same messages, not copies, and
/// [`Conversation::get_mut`] copies only the one message it edits if a clone still shares it. A
/// copy that must follow the conversation is kept up to date with [`Conversation::catch_up`],
/// which takes only the messages pushed since; rolling back a request is
/// [`Conversation::mark`] before it and [`Conversation::rewind`] after, O(1) to take.
#[derive(Serialize, Deserialize)]
#[serde(from = "StoredConversation", into = "StoredConversation")]
pub struct Conversation {
    messages: Vec<Arc<ChatMessage>>,
    next_id: u64,
    /// Which history this is (see [`Lineage`]): what lets `catch_up` copy only what is new.
    lineage: Lineage,
}

/// Which history a conversation is: a fresh id whenever messages are rewritten (replaced,
/// edited, cleared, rewound) rather than pushed, and for every new or cloned conversation. Two
/// conversations share an id only through [`Conversation::catch_up`], and within one id a
/// position always holds the same message: the shorter one's messages are the longer one's
/// first.
///
/// A rewind (dropping the last messages) records what the new history shares with the one it
/// came from: the first `len` messages of `parent` (the lineage just before) and of `origin`
/// (the lineage before a run of rewinds), so a copy that caught up with either, and a mark
/// taken in either, still count for that much.
#[derive(Debug, Clone, Copy)]
struct Lineage {
    id: u64,
    parent: Option<(u64, usize)>,
    origin: Option<(u64, usize)>,
}

impl Lineage {
    /// A history of its own. Ids are unique in the process.
    fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Lineage {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            parent: None,
            origin: None,
        }
    }

    /// How many first messages this history surely shares with any state of lineage `id`
    /// (`usize::MAX`: it is that lineage), or `None` when nothing is known.
    fn shares(&self, id: u64) -> Option<usize> {
        if id == self.id {
            return Some(usize::MAX);
        }
        [self.parent, self.origin]
            .into_iter()
            .flatten()
            .find(|(ancestor, _)| *ancestor == id)
            .map(|(_, len)| len)
    }

    /// The history left after dropping every message from position `len` on.
    fn rewound(&self, len: usize) -> Self {
        let origin = self.origin.or(self.parent);
        Lineage {
            parent: Some((self.id, len)),
            origin: origin.map(|(id, shared)| (id, shared.min(len))),
            ..Lineage::fresh()
        }
    }
}

/// Where a conversation stood, to roll back to with [`Conversation::rewind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConversationMark {
    lineage: u64,
    len: usize,
    next_id: u64,
}

impl Default for Conversation {
    fn default() -> Self {
        Conversation {
            messages: Vec::new(),
            next_id: 0,
            lineage: Lineage::fresh(),
        }
    }
}

/// A clone is a conversation of its own (a new lineage): pushing to it never makes it look
/// like a later state of the original to [`Conversation::catch_up`].
impl Clone for Conversation {
    fn clone(&self) -> Self {
        Conversation {
            messages: self.messages.clone(),
            next_id: self.next_id,
            lineage: Lineage::fresh(),
        }
    }
}

/// Equal messages and the same next id; the lineage is bookkeeping, not content.
impl PartialEq for Conversation {
    fn eq(&self, other: &Self) -> bool {
        self.next_id == other.next_id && self.messages == other.messages
    }
}

impl fmt::Debug for Conversation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conversation")
            .field("messages", &self.messages)
            .field("next_id", &self.next_id)
            .finish()
    }
}

impl Conversation {
    /// An empty conversation.
    pub fn new() -> Self {
        Conversation {
            messages: Vec::new(),
            next_id: 1,
            lineage: Lineage::fresh(),
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
            lineage: Lineage::fresh(),
        };
        for m in messages {
            if m.id.is_assigned() {
                c.messages.push(Arc::new(m));
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
        self.messages.push(Arc::new(message));
        id
    }

    /// Reserve a fresh id without pushing (for messages built before insertion, e.g. summaries).
    pub fn allocate_id(&mut self) -> MessageId {
        let id = MessageId(self.next_id.max(1));
        self.next_id = id.0 + 1;
        id
    }

    /// The messages in order, shared: index or iterate them as `ChatMessage`s (an `Arc`
    /// dereferences to its message), clone one in O(1).
    pub fn messages(&self) -> &[Arc<ChatMessage>] {
        &self.messages
    }

    /// The messages in order, as owned copies (for a transcript to write or rewrite).
    pub fn to_messages(&self) -> Vec<ChatMessage> {
        self.messages
            .iter()
            .map(|m| ChatMessage::clone(m))
            .collect()
    }

    /// Replace every message at once (compaction's output); ids are kept as given.
    ///
    /// Ids the new messages carry are respected and the id counter moves past them.
    pub fn replace_messages(&mut self, messages: Vec<ChatMessage>) {
        self.replace_shared(messages.into_iter().map(Arc::new).collect());
    }

    /// [`Conversation::replace_messages`] with messages that are already shared (kept messages
    /// of a compaction stay the same allocations).
    pub fn replace_shared(&mut self, messages: Vec<Arc<ChatMessage>>) {
        let max = messages.iter().map(|m| m.id.0).max().unwrap_or(0);
        self.next_id = self.next_id.max(max + 1);
        self.messages = messages;
        self.lineage = Lineage::fresh();
    }

    /// The message with this id.
    pub fn get(&self, id: MessageId) -> Option<&ChatMessage> {
        self.messages.iter().find(|m| m.id == id).map(|m| &**m)
    }

    /// The message with this id, to edit in place (its id cannot change through this). A
    /// message a clone still shares is copied first: the clone keeps the original.
    pub fn get_mut(&mut self, id: MessageId) -> Option<&mut ChatMessage> {
        // The message may change: a copy following this conversation must copy it again.
        self.lineage = Lineage::fresh();
        self.messages
            .iter_mut()
            .find(|m| m.id == id)
            .map(Arc::make_mut)
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
        self.messages.last().map(|m| &**m)
    }

    /// The next id this conversation will hand out.
    pub fn next_id(&self) -> MessageId {
        MessageId(self.next_id.max(1))
    }

    /// Remove every message but keep the id counter (ids stay unique after `/clear`).
    pub fn clear(&mut self) {
        self.messages.clear();
        self.lineage = Lineage::fresh();
    }

    /// The system prompt, if the conversation starts with one (`system` or `developer`).
    pub fn system_prompt(&self) -> Option<&ChatMessage> {
        self.messages
            .first()
            .filter(|m| m.role.is_instructions())
            .map(|m| &**m)
    }
}

impl Conversation {
    /// Make this conversation equal to `live`, taking only what `live` pushed since this one
    /// last caught up with it: O(new messages) while `live` only grew, every message's pointer
    /// after it was rewritten (a compaction, an edit, a clear) or the first time. Messages are
    /// shared, never copied.
    ///
    /// This is how an agent's checkpoint follows its conversation without copying the whole
    /// history after every request.
    pub fn catch_up(&mut self, live: &Conversation) {
        // The messages this copy has that `live` surely has too, in the same places.
        let kept = live
            .lineage
            .shares(self.lineage.id)
            .map(|shared| shared.min(self.messages.len()))
            .filter(|&kept| {
                kept <= live.messages.len()
                    // Belt and braces: the last message kept is the one `live` has there.
                    && (kept == 0 || Arc::ptr_eq(&self.messages[kept - 1], &live.messages[kept - 1])
                        || self.messages[kept - 1] == live.messages[kept - 1])
            });
        match kept {
            Some(kept) => {
                self.messages.truncate(kept);
                self.messages.extend_from_slice(&live.messages[kept..]);
            }
            None => self.messages.clone_from(&live.messages),
        }
        self.lineage = live.lineage;
        self.next_id = live.next_id;
    }

    /// Where the conversation stands now, to roll back to with [`Conversation::rewind`]. O(1).
    pub fn mark(&self) -> ConversationMark {
        ConversationMark {
            lineage: self.lineage.id,
            len: self.messages.len(),
            next_id: self.next_id,
        }
    }

    /// A copy of this conversation as it stood at `mark`, if only pushes happened since (the
    /// copy a request keeps before it rewrites the messages, to roll back to).
    pub fn copy_at(&self, mark: ConversationMark) -> Option<Conversation> {
        if !self.reaches(mark) {
            return None;
        }
        Some(Conversation {
            messages: self.messages[..mark.len].to_vec(),
            next_id: mark.next_id,
            lineage: Lineage::fresh(),
        })
    }

    /// Roll back to `mark`: drop the messages pushed since and hand their ids out again.
    ///
    /// Returns `false`, changing nothing, when the messages were rewritten since (a
    /// compaction, an edit, a clear) or `mark` is another conversation's: then only a copy
    /// taken before the rewrite can restore it.
    pub fn rewind(&mut self, mark: ConversationMark) -> bool {
        if !self.reaches(mark) {
            return false;
        }
        if mark.len < self.messages.len() {
            self.messages.truncate(mark.len);
            // Positions from `mark.len` on will hold other messages: another history, which
            // shares its first `mark.len` messages with this one.
            self.lineage = self.lineage.rewound(mark.len);
        }
        self.next_id = mark.next_id;
        true
    }

    /// Whether the conversation as it stood at `mark` is this one's first messages.
    fn reaches(&self, mark: ConversationMark) -> bool {
        self.lineage
            .shares(mark.lineage)
            .is_some_and(|shared| mark.len <= shared.min(self.messages.len()))
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
            messages: c
                .messages
                .iter()
                .map(|m| StoredMessage::from(&**m))
                .collect(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn live_of(n: usize) -> Conversation {
        Conversation::from_messages((0..n).map(|i| ChatMessage::user(format!("message {i}"))))
    }

    #[test]
    fn a_copy_that_caught_up_takes_only_the_new_messages_and_equals_the_live_one() {
        let mut live = live_of(3);
        let mut copy = Conversation::default();
        copy.catch_up(&live);
        assert_eq!(copy, live);
        live.push(ChatMessage::assistant("four"));
        live.allocate_id();
        copy.catch_up(&live);
        assert_eq!(copy, live);
        assert_eq!(copy.next_id(), live.next_id());
    }

    #[test]
    fn a_copy_shares_the_messages_and_an_edit_leaves_the_copy_as_it_was() {
        let mut live = live_of(3);
        let mut copy = Conversation::default();
        copy.catch_up(&live);
        let request = ChatRequestLike(live.messages().to_vec());
        for ((a, b), c) in copy.messages().iter().zip(live.messages()).zip(&request.0) {
            assert!(
                Arc::ptr_eq(a, b) && Arc::ptr_eq(b, c),
                "no message is copied"
            );
        }
        let first = live.messages()[0].id;
        live.get_mut(first).unwrap().set_text("edited");
        assert_eq!(copy.messages()[0].text(), "message 0");
        assert_eq!(request.0[0].text(), "message 0");
        assert_eq!(live.messages()[0].text(), "edited");
        // Only the edited message stopped being shared.
        assert!(!Arc::ptr_eq(&copy.messages()[0], &live.messages()[0]));
        assert!(Arc::ptr_eq(&copy.messages()[1], &live.messages()[1]));
        copy.catch_up(&live);
        assert_eq!(copy, live);
    }

    /// What a model request holds: the conversation's messages, shared.
    struct ChatRequestLike(Vec<Arc<ChatMessage>>);

    #[test]
    fn a_rewritten_conversation_is_copied_whole() {
        let mut live = live_of(4);
        let mut copy = Conversation::default();
        copy.catch_up(&live);
        // Same length, other messages: a compaction that kept the count.
        let rewritten: Vec<ChatMessage> = live
            .messages()
            .iter()
            .map(|m| ChatMessage {
                id: m.id,
                ..ChatMessage::user("summary")
            })
            .collect();
        live.replace_messages(rewritten);
        live.push(ChatMessage::user("after"));
        copy.catch_up(&live);
        assert_eq!(copy, live);

        live.get_mut(MessageId(1)).unwrap().set_text("edited");
        copy.catch_up(&live);
        assert_eq!(copy, live);

        live.clear();
        copy.catch_up(&live);
        assert_eq!(copy, live);
    }

    #[test]
    fn a_rolled_back_and_regrown_conversation_is_not_taken_for_a_longer_one() {
        let mut live = live_of(2);
        let mark = live.mark();
        live.push(ChatMessage::user("a"));
        live.push(ChatMessage::user("b"));
        let mut copy = Conversation::default();
        copy.catch_up(&live);
        // Back to two messages, then other messages with the same ids.
        assert!(live.rewind(mark));
        live.push(ChatMessage::user("x"));
        live.push(ChatMessage::user("b"));
        copy.catch_up(&live);
        assert_eq!(copy, live);
        assert_eq!(copy.messages()[2].text(), "x");
    }

    #[test]
    fn a_clone_pushed_on_its_own_is_another_conversation() {
        let live = live_of(2);
        let mut copy = Conversation::default();
        copy.catch_up(&live);
        let mut other = live.clone();
        other.push(ChatMessage::user("elsewhere"));
        copy.push(ChatMessage::user("here"));
        copy.catch_up(&other);
        assert_eq!(copy, other);
    }

    #[test]
    fn after_rewinds_a_copy_keeps_what_it_shares_and_old_marks_still_reach() {
        let mut live = live_of(3);
        let base = live.mark();
        let mut copy = Conversation::default();
        for round in 0..3 {
            live.push(ChatMessage::user(format!("round {round}")));
            copy.catch_up(&live);
            let caught_up = copy.lineage.id;
            // Back to the base mark, taken before every earlier rewind.
            assert!(live.rewind(base), "round {round}");
            assert_eq!(live.len(), 3);
            // The copy's first three messages still count: only the rest is copied.
            assert_eq!(live.lineage.shares(caught_up), Some(3));
            copy.catch_up(&live);
            assert_eq!(copy, live);
        }
        // A mark past what the rewound history shares no longer reaches it.
        let mut longer = live_of(3);
        longer.push(ChatMessage::user("four"));
        let four = longer.mark();
        longer.rewind(base_of(&longer, 3));
        longer.push(ChatMessage::user("other four"));
        assert!(!longer.rewind(four));
        assert!(longer.copy_at(four).is_none());
    }

    /// A mark of `c` as it stood with its first `len` messages (taken while it is unchanged).
    fn base_of(c: &Conversation, len: usize) -> ConversationMark {
        ConversationMark { len, ..c.mark() }
    }

    #[test]
    fn rewind_drops_pushes_and_refuses_after_a_rewrite() {
        let mut live = live_of(2);
        let before = live.clone();
        let mark = live.mark();
        live.push(ChatMessage::user("more"));
        assert!(live.rewind(mark));
        assert_eq!(live, before);

        let mark = live.mark();
        live.push(ChatMessage::user("more"));
        let kept = live.copy_at(mark).unwrap();
        assert_eq!(kept, before);
        live.replace_messages(Vec::new());
        assert!(!live.rewind(mark));
        assert!(live.copy_at(mark).is_none());
        assert!(live.is_empty());
    }
}
