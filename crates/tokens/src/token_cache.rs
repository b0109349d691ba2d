//! Per-message token counts cached by message id, so a growing conversation is recounted in
//! O(new messages).
//!
//! BPE is the expensive part of every budget check; a message's count only changes when its
//! content does. Each entry remembers a fingerprint of what it counted, so a message edited in
//! place (same id, new text) is recounted rather than trusted — and, for a conversation's shared
//! messages, which message it counted: the same shared message is a hit without hashing its
//! content, so checking a long conversation's budget costs a pointer comparison per message.

use std::borrow::Borrow;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde::{Deserialize, Serialize};
use troupe_protocol::{ChatMessage, Content, ContentSlot, MessageId, sync};

use crate::counter::TokenCounter;
use troupe_protocol::id_hash::IdMap;

/// A shared, thread-safe cache of per-message token counts.
///
/// Cloning is cheap and clones share one cache: an agent keeps one per conversation and hands
/// clones to compaction, which warms it with the stubs and summaries it creates. A cache is tied
/// to one tokenizer; using it with a counter of a different [`TokenCounter::name`] empties it.
#[derive(Debug, Clone, Default)]
pub struct TokenCache {
    inner: Arc<Mutex<CacheState>>,
}

#[derive(Debug, Default)]
struct CacheState {
    counter: Option<String>,
    entries: IdMap<MessageId, CachedCount>,
    hits: u64,
    misses: u64,
}

impl CacheState {
    /// The count of `message` when this same shared message (same id, same allocation) was
    /// counted before.
    fn shared_hit(&self, message: &Arc<ChatMessage>) -> Option<usize> {
        if !message.id.is_assigned() {
            return None;
        }
        self.entries
            .get(&message.id)
            .filter(|hit| std::ptr::eq(hit.shared.as_ptr(), Arc::as_ptr(message)))
            .map(|hit| hit.tokens)
    }
}

#[derive(Debug, Clone)]
struct CachedCount {
    fingerprint: u64,
    tokens: usize,
    /// The shared message this count is of, when it was counted through
    /// [`TokenCache::count_shared`]. While this `Weak` lives the allocation cannot be reused,
    /// and a shared message is never changed where it lies (`Arc::make_mut` moves a message it
    /// edits away from its `Weak`s), so the same address means the same content.
    shared: Weak<ChatMessage>,
}

/// How often the cache answered without counting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to count.
    pub misses: u64,
    /// Messages currently cached.
    pub entries: usize,
}

/// A counter that answers message counts from a [`TokenCache`] when there is one: for code
/// written against [`TokenCounter`] (the cost model's measures, receipts) that would otherwise
/// tokenize a whole conversation the cache has counted already. Text counts, and every count
/// without a cache, go to the counter.
#[derive(Clone, Copy)]
pub struct CachedCounter<'a> {
    counter: &'a dyn TokenCounter,
    cache: Option<&'a TokenCache>,
}

impl<'a> CachedCounter<'a> {
    /// `counter`, with message counts kept in `cache` (none: `counter` alone).
    pub fn new(counter: &'a dyn TokenCounter, cache: Option<&'a TokenCache>) -> Self {
        CachedCounter { counter, cache }
    }
}

impl std::fmt::Debug for CachedCounter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedCounter")
            .field("counter", &self.counter.name())
            .finish_non_exhaustive()
    }
}

impl TokenCounter for CachedCounter<'_> {
    fn name(&self) -> &str {
        self.counter.name()
    }

    fn count(&self, text: &str) -> usize {
        self.counter.count(text)
    }

    fn count_role(&self, role: troupe_protocol::Role) -> usize {
        self.counter.count_role(role)
    }

    fn overhead(&self) -> crate::counter::MessageOverhead {
        self.counter.overhead()
    }

    fn count_message(&self, message: &ChatMessage) -> usize {
        match self.cache {
            Some(cache) => cache.count_message(self.counter, message),
            None => self.counter.count_message(message),
        }
    }

    fn count_upper_bound(&self, text: &str) -> Option<usize> {
        self.counter.count_upper_bound(text)
    }
}

/// The token counts of a whole conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationTokens {
    /// The tokens of each message, in order.
    pub per_message: Vec<usize>,
    /// The request total: all messages plus the reply priming.
    pub total: usize,
}

impl TokenCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self, counter: &dyn TokenCounter) -> MutexGuard<'_, CacheState> {
        // A panic while holding the lock cannot leave a count half-written, so a poisoned
        // cache is still a correct cache.
        let mut state = sync::lock(&self.inner);
        if state.counter.as_deref() != Some(counter.name()) {
            state.entries.clear();
            state.counter = Some(counter.name().to_string());
        }
        state
    }

    /// The tokens of one message, counted at most once per content.
    pub fn count_message(&self, counter: &dyn TokenCounter, message: &ChatMessage) -> usize {
        if !message.id.is_assigned() {
            return counter.count_message(message);
        }
        let fingerprint = fingerprint(message);
        {
            let mut state = self.lock(counter);
            let hit = state.entries.get(&message.id);
            if let Some(tokens) = hit
                .filter(|hit| hit.fingerprint == fingerprint)
                .map(|hit| hit.tokens)
            {
                state.hits += 1;
                return tokens;
            }
        }
        // Count without holding the lock: BPE of a large tool output takes milliseconds.
        let tokens = counter.count_message(message);
        let mut state = self.lock(counter);
        state.misses += 1;
        state.entries.insert(
            message.id,
            CachedCount {
                fingerprint,
                tokens,
                shared: Weak::new(),
            },
        );
        tokens
    }

    /// [`TokenCache::count_messages`] for a conversation's shared messages (its
    /// `messages()`): a message counted before as this same shared message is answered without
    /// hashing its content, under one lock for the whole conversation.
    pub fn count_shared(
        &self,
        counter: &dyn TokenCounter,
        messages: &[Arc<ChatMessage>],
    ) -> ConversationTokens {
        let mut per_message = Vec::with_capacity(messages.len());
        let mut misses = Vec::new();
        {
            let mut state = self.lock(counter);
            for (i, m) in messages.iter().enumerate() {
                match state.shared_hit(m) {
                    Some(tokens) => {
                        state.hits += 1;
                        per_message.push(tokens);
                    }
                    None => {
                        misses.push(i);
                        per_message.push(0);
                    }
                }
            }
        }
        for i in misses {
            let m = &messages[i];
            // By content (a copy of a message counted before is still a hit), then remembered
            // as this shared message.
            per_message[i] = self.count_message(counter, m);
            if m.id.is_assigned()
                && let Some(entry) = self.lock(counter).entries.get_mut(&m.id)
            {
                entry.shared = Arc::downgrade(m);
            }
        }
        let total = per_message.iter().sum::<usize>() + counter.overhead().reply_priming;
        ConversationTokens { per_message, total }
    }

    /// Whether the request made of `messages` (a conversation's shared messages) certainly
    /// costs fewer than `limit` tokens, decided without tokenizing: messages counted before give
    /// their counts, the others [`TokenCounter::count_message_upper_bound`]. `false` means
    /// "count to know" — also when the counter promises no bound.
    pub fn certainly_below(
        &self,
        counter: &dyn TokenCounter,
        messages: &[Arc<ChatMessage>],
        limit: usize,
    ) -> bool {
        let state = self.lock(counter);
        let mut total = counter.overhead().reply_priming;
        for m in messages {
            let tokens = match state.shared_hit(m) {
                Some(tokens) => tokens,
                None => match counter.count_message_upper_bound(m) {
                    Some(bound) => bound,
                    None => return false,
                },
            };
            total += tokens;
            if total >= limit {
                return false;
            }
        }
        true
    }

    /// The tokens of every message (owned, or shared as a conversation holds them) and the
    /// request total.
    pub fn count_messages<M: Borrow<ChatMessage>>(
        &self,
        counter: &dyn TokenCounter,
        messages: &[M],
    ) -> ConversationTokens {
        let per_message: Vec<usize> = messages
            .iter()
            .map(|m| self.count_message(counter, m.borrow()))
            .collect();
        let total = per_message.iter().sum::<usize>() + counter.overhead().reply_priming;
        ConversationTokens { per_message, total }
    }

    /// An independent copy of the current counts (clones share one cache; this does not).
    pub fn detached_copy(&self) -> TokenCache {
        let state = sync::lock(&self.inner);
        let copy = CacheState {
            counter: state.counter.clone(),
            entries: state.entries.clone(),
            hits: state.hits,
            misses: state.misses,
        };
        TokenCache {
            inner: Arc::new(Mutex::new(copy)),
        }
    }

    /// Forget one message (e.g. after `/clear`).
    pub fn forget(&self, id: MessageId) {
        let mut state = sync::lock(&self.inner);
        state.entries.remove(&id);
    }

    /// Hit, miss and size figures.
    pub fn stats(&self) -> CacheStats {
        let state = sync::lock(&self.inner);
        CacheStats {
            hits: state.hits,
            misses: state.misses,
            entries: state.entries.len(),
        }
    }
}

/// A hash of everything [`TokenCounter::count_message`] looks at.
fn fingerprint(message: &ChatMessage) -> u64 {
    let mut hasher = DefaultHasher::new();
    message.role.hash(&mut hasher);
    match &message.content {
        ContentSlot::Absent | ContentSlot::Null => 0u8.hash(&mut hasher),
        ContentSlot::Value(Content::Text(text)) => text.hash(&mut hasher),
        ContentSlot::Value(content @ Content::Parts(_)) => content.text().hash(&mut hasher),
    }
    for call in message.calls() {
        call.function.name.hash(&mut hasher);
        call.function.arguments.hash(&mut hasher);
    }
    message.tool_call_id.hash(&mut hasher);
    if let Some(name) = message.extra.get("name") {
        name.to_string().hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::counter::CharEstimateCounter;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use troupe_protocol::Conversation;

    /// Counts how often it is asked, to prove the cache avoids recounting.
    #[derive(Default)]
    struct CountingCounter {
        calls: AtomicUsize,
    }

    impl TokenCounter for CountingCounter {
        fn name(&self) -> &str {
            "counting"
        }
        fn count(&self, text: &str) -> usize {
            self.calls.fetch_add(1, Ordering::Relaxed);
            text.len()
        }
    }

    #[test]
    fn a_cached_counter_counts_each_message_once_and_as_the_counter_does() {
        let counter = CountingCounter::default();
        let cache = TokenCache::new();
        let mut conversation = Conversation::new();
        conversation.push(ChatMessage::user("a question"));
        conversation.push(ChatMessage::assistant("an answer"));
        let cached = CachedCounter::new(&counter, Some(&cache));
        let plain: Vec<usize> = conversation
            .messages()
            .iter()
            .map(|m| counter.count_message(m))
            .collect();
        let calls = counter.calls.load(Ordering::Relaxed);
        let first: Vec<usize> = conversation
            .messages()
            .iter()
            .map(|m| cached.count_message(m))
            .collect();
        assert_eq!(first, plain);
        let counted_once = counter.calls.load(Ordering::Relaxed);
        assert!(counted_once > calls);
        let again: Vec<usize> = conversation
            .messages()
            .iter()
            .map(|m| cached.count_message(m))
            .collect();
        assert_eq!(again, plain);
        assert_eq!(counter.calls.load(Ordering::Relaxed), counted_once);
        assert_eq!(cached.name(), counter.name());
        assert_eq!(cached.count("plain text"), counter.count("plain text"));
    }

    #[test]
    fn growing_conversation_counts_only_new_messages() {
        let counter = CountingCounter::default();
        let cache = TokenCache::new();
        let mut conversation = Conversation::new();
        conversation.push(ChatMessage::user("first"));
        conversation.push(ChatMessage::assistant("second"));
        let first = cache.count_messages(&counter, conversation.messages());
        let calls_after_first = counter.calls.load(Ordering::Relaxed);
        conversation.push(ChatMessage::user("third"));
        let second = cache.count_messages(&counter, conversation.messages());
        let calls_for_one_message = counter.calls.load(Ordering::Relaxed) - calls_after_first;
        // One message = role + content = two count() calls.
        assert_eq!(calls_for_one_message, 2);
        assert_eq!(second.per_message[..2], first.per_message[..]);
        assert_eq!(cache.stats().hits, 2);
    }

    #[test]
    fn a_shared_message_counted_before_is_not_counted_or_hashed_again_and_an_edit_is() {
        let counter = CountingCounter::default();
        let cache = TokenCache::new();
        let mut conversation = Conversation::new();
        let first = conversation.push(ChatMessage::user("first"));
        conversation.push(ChatMessage::assistant("second"));
        let before = cache.count_shared(&counter, conversation.messages());
        let calls = counter.calls.load(Ordering::Relaxed);
        let again = cache.count_shared(&counter, conversation.messages());
        assert_eq!(again, before);
        assert_eq!(counter.calls.load(Ordering::Relaxed), calls);
        assert_eq!(cache.stats().hits, 2);
        // An edit gives the message a new allocation: recounted, the other one still a hit.
        conversation
            .get_mut(first)
            .unwrap()
            .set_text("first, now a good deal longer than it was");
        let edited = cache.count_shared(&counter, conversation.messages());
        assert!(edited.per_message[0] > before.per_message[0]);
        assert_eq!(edited.per_message[1], before.per_message[1]);
        assert_eq!(counter.calls.load(Ordering::Relaxed) - calls, 2);
        // The same messages owned (not shared) are counted by content: hits, no recount.
        let owned = cache.count_messages(&counter, &conversation.to_messages());
        assert_eq!(owned, edited);
        assert_eq!(counter.calls.load(Ordering::Relaxed) - calls, 2);
    }

    /// [`CountingCounter`] with the bound a byte-level tokenizer would promise.
    #[derive(Default)]
    struct BoundedCounter(CountingCounter);

    impl TokenCounter for BoundedCounter {
        fn name(&self) -> &str {
            "bounded"
        }
        fn count(&self, text: &str) -> usize {
            self.0.count(text)
        }
        fn count_upper_bound(&self, text: &str) -> Option<usize> {
            Some(text.len())
        }
        /// Precomputed, as `TiktokenCounter`'s: the calls counted are content alone.
        fn count_role(&self, _role: troupe_protocol::Role) -> usize {
            1
        }
    }

    #[test]
    fn certainly_below_decides_without_counting_and_knows_when_it_cannot() {
        let counter = BoundedCounter::default();
        let cache = TokenCache::new();
        let mut conversation = Conversation::new();
        conversation.push(ChatMessage::user("twelve bytes"));
        conversation.push(ChatMessage::assistant("x".repeat(100)));
        let exact = TokenCache::new()
            .count_shared(&BoundedCounter::default(), conversation.messages())
            .total;
        let messages = conversation.messages();
        assert!(cache.certainly_below(&counter, messages, exact + 1_000));
        assert_eq!(
            counter.0.calls.load(Ordering::Relaxed),
            0,
            "nothing tokenized"
        );
        // At or under the true total the bound can never say "below".
        assert!(!cache.certainly_below(&counter, messages, exact));
        assert!(!cache.certainly_below(&counter, messages, exact / 2));
        // Once counted, the exact counts stand in for the bounds: tight to the token.
        cache.count_shared(&counter, messages);
        assert!(cache.certainly_below(&counter, messages, exact + 1));
        assert!(!cache.certainly_below(&counter, messages, exact));
        // A counter that promises no bound never skips counting.
        let unbounded = CountingCounter::default();
        assert!(!TokenCache::new().certainly_below(&unbounded, messages, usize::MAX));
    }

    #[test]
    fn edited_message_is_recounted() {
        let cache = TokenCache::new();
        let mut conversation = Conversation::new();
        let id = conversation.push(ChatMessage::user("short"));
        let before = cache.count_message(&CharEstimateCounter, &conversation.messages()[0]);
        let mut edited = ChatMessage::clone(&conversation.messages()[0]);
        edited.set_text("a much longer text than before, surely more tokens");
        assert_eq!(edited.id, id);
        let after = cache.count_message(&CharEstimateCounter, &edited);
        assert!(after > before);
    }

    #[test]
    fn switching_tokenizer_empties_the_cache() {
        let cache = TokenCache::new();
        let mut conversation = Conversation::new();
        conversation.push(ChatMessage::user("abcdefgh"));
        let m = &conversation.messages()[0];
        let estimate = cache.count_message(&CharEstimateCounter, m);
        let exact = cache.count_message(&CountingCounter::default(), m);
        assert_ne!(estimate, exact);
        assert_eq!(cache.stats().entries, 1);
    }
}
