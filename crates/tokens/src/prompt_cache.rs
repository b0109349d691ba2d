//! A model call as a provider's prompt cache sees it: a list of blocks (one per message, keyed
//! by a hash of what goes on the wire), where troupe puts its Anthropic cache breakpoints, when
//! the call is sent and what kind of call it is.

use troupe_protocol::{ChatMessage, Content, ContentSlot, MessageKind, Role, WireValue};

use crate::TokenCounter;

/// One message of a prompt: a hash of its wire content and its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Block {
    /// [`block_key`] of the message: equal keys mean byte-identical wire content.
    pub key: u64,
    /// The message's tokens in the request ([`TokenCounter::count_message`]).
    pub tokens: usize,
}

/// Who makes a model call: bills keep the compaction's own calls apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CallKind {
    /// A call of the agent itself (the conversation before its next message).
    #[default]
    Agent,
    /// A summarizer's or compressor's call made by a compaction.
    Compaction,
}

/// One model call: the blocks of its prompt, where its cache breakpoints sit, when it is sent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompt {
    /// The prompt's messages, in order.
    pub blocks: Vec<Block>,
    /// Block indexes after which an Anthropic `cache_control` mark sits (at most 4, ascending);
    /// the OpenAI emulation ignores them (its caching is automatic).
    pub breakpoints: Vec<usize>,
    /// When the call is sent, in seconds from any fixed origin (the Anthropic TTL is measured
    /// on it).
    pub at_secs: f64,
    /// The agent's call or a compaction's.
    pub kind: CallKind,
    /// Tokens of the answer; never billed as input (kept for reports).
    pub output_tokens: usize,
}

impl Prompt {
    /// The prompt's input tokens: the sum of its blocks.
    pub fn tokens(&self) -> usize {
        self.blocks.iter().map(|b| b.tokens).sum()
    }
}

/// FNV-1a, written out so keys are the same on every platform and toolchain (std's hasher
/// promises neither), which keeps replay's cost figures reproducible.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;

    fn new() -> Self {
        Fnv(Self::OFFSET)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// A field: its bytes, then a separator no UTF-8 text contains, so ("ab","c") and
    /// ("a","bc") differ.
    fn field(&mut self, text: &str) {
        self.bytes(text.as_bytes());
        self.bytes(&[0xff]);
    }
}

/// The cache key of one message: a hash of what the provider receives — role, content text,
/// tool calls (id, name, arguments), the id of the call a tool result answers, and `name`.
/// troupe's own metadata (message id, kind) never goes on the wire and is left out, so a
/// message keeps its key when only troupe's bookkeeping changes.
pub fn block_key(message: &ChatMessage) -> u64 {
    let mut h = Fnv::new();
    h.field(&message.role.to_string());
    match &message.content {
        ContentSlot::Value(Content::Text(text)) => h.field(text),
        ContentSlot::Value(content @ Content::Parts(_)) => h.field(&content.text()),
        ContentSlot::Absent | ContentSlot::Null => h.bytes(&[0xfe]),
    }
    for call in message.calls() {
        h.field(&call.id);
        h.field(&call.function.name);
        h.field(&call.function.arguments);
    }
    if let Some(id) = &message.tool_call_id {
        h.field(id);
    }
    if let Some(name) = message.extra.get("name").and_then(WireValue::as_str) {
        h.field(name);
    }
    h.0
}

/// Chains block keys into prefix keys: the key of blocks `0..=i` is a hash of the key of
/// `0..i` and block `i`'s key, so a changed block changes the key of every prefix after it.
pub fn chain(previous: u64, key: u64) -> u64 {
    let mut h = Fnv(previous);
    h.bytes(&key.to_le_bytes());
    h.0
}

/// The prompt of a call sending `messages`, with troupe's breakpoint placement
/// ([`anthropic_breakpoints`]). Reply priming (a few tokens per request) is left out: it is
/// after every cache mark and the same for every strategy.
pub fn prompt_of(
    messages: &[ChatMessage],
    counter: &dyn TokenCounter,
    kind: CallKind,
    at_secs: f64,
) -> Prompt {
    Prompt {
        blocks: messages
            .iter()
            .map(|m| Block {
                key: block_key(m),
                tokens: counter.count_message(m),
            })
            .collect(),
        breakpoints: anthropic_breakpoints(messages),
        at_secs,
        kind,
        output_tokens: 0,
    }
}

/// Where troupe puts Anthropic's `cache_control` marks — the one placement every strategy gets
/// in replay, so a comparison is about what a strategy keeps, not where it marks: after the
/// system prompt (the leading instruction messages; tools ride in front of it), after the newest
/// compaction summary, at the end of the previous turn (the block before the newest user
/// message), and on the last block. Ascending, deduplicated, at most 4 (Anthropic's limit).
/// The Anthropic provider marks its requests by this same rule (messages owned or shared).
pub fn anthropic_breakpoints<M: std::borrow::Borrow<ChatMessage>>(messages: &[M]) -> Vec<usize> {
    let Some(last) = messages.len().checked_sub(1) else {
        return Vec::new();
    };
    let mut marks = Vec::with_capacity(4);
    let system = messages
        .iter()
        .take_while(|m| m.borrow().role.is_instructions())
        .count();
    if let Some(end) = system.checked_sub(1) {
        marks.push(end);
    }
    if let Some(summary) = messages
        .iter()
        .rposition(|m| m.borrow().kind == MessageKind::Summary)
    {
        marks.push(summary);
    }
    if let Some(before_user) = messages
        .iter()
        .rposition(|m| m.borrow().role == Role::User)
        .and_then(|user| user.checked_sub(1))
    {
        marks.push(before_user);
    }
    marks.push(last);
    marks.sort_unstable();
    marks.dedup();
    marks
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use troupe_protocol::ToolCall;

    use super::*;
    use crate::CharEstimateCounter;

    #[test]
    fn keys_follow_wire_content_not_troupe_metadata() {
        let a = ChatMessage::user("hello");
        let mut b = ChatMessage::user("hello").with_kind(MessageKind::Summary);
        b.id = troupe_protocol::MessageId(7);
        assert_eq!(block_key(&a), block_key(&b));
        assert_ne!(block_key(&a), block_key(&ChatMessage::assistant("hello")));
        assert_ne!(block_key(&a), block_key(&ChatMessage::user("hello!")));
        let call = |args: &str| {
            ChatMessage::assistant_tool_calls(None, vec![ToolCall::new("c1", "read", args)])
        };
        assert_ne!(block_key(&call("{\"a\":1}")), block_key(&call("{\"a\":2}")));
        assert_ne!(
            block_key(&ChatMessage::tool_result("c1", "x")),
            block_key(&ChatMessage::tool_result("c2", "x"))
        );
    }

    #[test]
    fn breakpoints_sit_after_system_summary_previous_turn_and_last() {
        let messages = vec![
            ChatMessage::system("s"),
            ChatMessage::user("task"),
            ChatMessage::user("summary").with_kind(MessageKind::Summary),
            ChatMessage::assistant("a"),
            ChatMessage::user("next"),
            ChatMessage::assistant("b"),
            ChatMessage::tool_result("c", "r"),
        ];
        assert_eq!(anthropic_breakpoints(&messages), vec![0, 2, 3, 6]);
        // Coinciding marks are one mark.
        let short = vec![ChatMessage::system("s"), ChatMessage::user("u")];
        assert_eq!(anthropic_breakpoints(&short), vec![0, 1]);
        assert!(anthropic_breakpoints::<ChatMessage>(&[]).is_empty());
    }

    #[test]
    fn prompt_of_counts_every_message() {
        let counter = CharEstimateCounter;
        let messages = vec![ChatMessage::system("s".repeat(400)), ChatMessage::user("u")];
        let prompt = prompt_of(&messages, &counter, CallKind::Compaction, 3.0);
        assert_eq!(prompt.blocks.len(), 2);
        assert_eq!(
            prompt.tokens() + counter.overhead().reply_priming,
            counter.count_messages(&messages)
        );
        assert_eq!(prompt.kind, CallKind::Compaction);
        assert_eq!(prompt.breakpoints, vec![0, 1]);
    }
}
