//! Token counting: the [`TokenCounter`] trait and its two built-in implementations.
//!
//! Budgets are only as good as the counts behind them, so the default counter is an exact BPE
//! tokenizer ([`TiktokenCounter`]); [`CharEstimateCounter`] is the cheap stand-in for tests.
//! Other tokenizers (llama.cpp's, in troupe-agents) implement the same trait.

mod ascii_split;
mod o200k;

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;
use troupe_protocol::{ChatMessage, Content, ContentSlot, Role, WireValue};

/// Tokens a chat format adds around messages, beyond the tokens of their text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageOverhead {
    /// Framing tokens of every message (role markers, separators).
    pub per_message: usize,
    /// Extra tokens of every tool call an assistant message requests.
    pub per_tool_call: usize,
    /// Extra tokens when a message carries a `name`.
    pub per_name: usize,
    /// Tokens added once per request to prime the reply.
    pub reply_priming: usize,
}

impl MessageOverhead {
    /// The OpenAI chat format, per the OpenAI cookbook's counting recipe.
    pub const OPENAI: MessageOverhead = MessageOverhead {
        per_message: 3,
        per_tool_call: 1,
        per_name: 1,
        reply_priming: 3,
    };

    /// ChatML (`<|im_start|>role\n…<|im_end|>\n`), the format of most llama.cpp chat templates.
    pub const CHATML: MessageOverhead = MessageOverhead {
        per_message: 5,
        per_tool_call: 4,
        per_name: 1,
        reply_priming: 3,
    };
}

/// Counts tokens of text and of chat messages for one tokenizer.
///
/// Object safe and `Send + Sync`, so one counter can be shared by every agent
/// (`Arc<dyn TokenCounter>`). Implementations should be cheap to call and expensive only to
/// construct.
pub trait TokenCounter: Send + Sync {
    /// A short name of the tokenizer (e.g. `o200k_base`); caches use it to detect a switch.
    fn name(&self) -> &str;

    /// The number of tokens of `text` as plain content.
    fn count(&self, text: &str) -> usize;

    /// The tokens of a role's name (constant per tokenizer; implementations may precompute).
    fn count_role(&self, role: Role) -> usize {
        self.count(role.as_str())
    }

    /// The framing tokens of this tokenizer's chat format.
    fn overhead(&self) -> MessageOverhead {
        MessageOverhead::OPENAI
    }

    /// The tokens one message costs in a request: framing, role, content, tool calls, ids.
    fn count_message(&self, message: &ChatMessage) -> usize {
        // Every text's count is `Some`, so the total is too.
        message_tokens(self, message, self.count_role(message.role), |text| {
            Some(self.count(text))
        })
        .unwrap_or_default()
    }

    /// A number no smaller than [`TokenCounter::count`] of `text`, found without tokenizing,
    /// or `None` when this tokenizer cannot promise one (the default: a custom tokenizer may
    /// produce more tokens than bytes). Budget checks far below their threshold use it to skip
    /// tokenizing new messages.
    fn count_upper_bound(&self, text: &str) -> Option<usize> {
        let _ = text;
        None
    }

    /// A number no smaller than [`TokenCounter::count_message`] of `message`, from
    /// [`TokenCounter::count_upper_bound`] in place of every `count` (`None` when that has none).
    fn count_message_upper_bound(&self, message: &ChatMessage) -> Option<usize> {
        // The role's bound too, not its exact count: an exact count would build the vocabulary
        // this road exists to do without.
        let role = self.count_upper_bound(message.role.as_str())?;
        message_tokens(self, message, role, |text| self.count_upper_bound(text))
    }

    /// The tokens of a whole request made of `messages` (reply priming included).
    fn count_messages(&self, messages: &[ChatMessage]) -> usize {
        messages
            .iter()
            .map(|m| self.count_message(m))
            .sum::<usize>()
            + self.overhead().reply_priming
    }
}

/// One message's tokens in `counter`'s chat format, its role costing `role` and each text costed
/// by `count` (both the exact count or both an upper bound; `None` from `count` makes the whole
/// `None`).
fn message_tokens<C: TokenCounter + ?Sized>(
    counter: &C,
    message: &ChatMessage,
    role: usize,
    count: impl Fn(&str) -> Option<usize>,
) -> Option<usize> {
    let overhead = counter.overhead();
    let mut tokens = overhead.per_message + role;
    tokens += match &message.content {
        ContentSlot::Value(Content::Text(text)) => count(text)?,
        ContentSlot::Value(content @ Content::Parts(_)) => count(&content.text())?,
        ContentSlot::Absent | ContentSlot::Null => 0,
    };
    for call in message.calls() {
        tokens +=
            overhead.per_tool_call + count(&call.function.name)? + count(&call.function.arguments)?;
    }
    if let Some(id) = &message.tool_call_id {
        tokens += count(id)?;
    }
    if let Some(name) = message.extra.get("name").and_then(WireValue::as_str) {
        tokens += overhead.per_name + count(name)?;
    }
    Some(tokens)
}

/// Which OpenAI BPE vocabulary a [`TiktokenCounter`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BpeEncoding {
    /// GPT-4o, GPT-4.1, GPT-5 and the `o` series.
    #[default]
    O200kBase,
    /// GPT-4, GPT-3.5-turbo.
    Cl100kBase,
}

impl BpeEncoding {
    /// The encoding's conventional name.
    pub fn name(self) -> &'static str {
        match self {
            BpeEncoding::O200kBase => "o200k_base",
            BpeEncoding::Cl100kBase => "cl100k_base",
        }
    }
}

/// Exact token counts for OpenAI-family models, over `tiktoken-rs`.
///
/// The vocabularies are process-wide singletons built on the first count that needs one
/// (hundreds of milliseconds and some 60 MB for o200k_base), not when a counter is made: a
/// team whose budget checks are all decided from [`TokenCounter::count_upper_bound`] never
/// builds one, and constructing a second counter is free. A text longer than 64 KiB is counted
/// a piece of at most that at a time, each cut before a word: exact up to that length, within a
/// token a piece beyond it (see `BPE_PIECE`).
pub struct TiktokenCounter {
    encoding: BpeEncoding,
}

/// What counting in one encoding needs, built once per process on its first count.
struct Tables {
    bpe: &'static CoreBPE,
    /// o200k_base without the backtracking split (`counter/o200k.rs`): the same counts.
    fast: Option<&'static o200k::O200k>,
    /// Token counts of the role names, in [`Role`] order.
    role_tokens: [usize; 5],
}

impl Tables {
    fn build(encoding: BpeEncoding) -> Tables {
        let bpe = match encoding {
            BpeEncoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            BpeEncoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        };
        let role_tokens = [
            Role::System,
            Role::Developer,
            Role::User,
            Role::Assistant,
            Role::Tool,
        ]
        .map(|role| bpe.encode_ordinary(role.as_str()).len());
        let fast = match encoding {
            BpeEncoding::O200kBase => o200k::o200k(),
            BpeEncoding::Cl100kBase => None,
        };
        Tables {
            bpe,
            fast,
            role_tokens,
        }
    }

    /// `encoding`'s tables, built on the first call for it.
    fn of(encoding: BpeEncoding) -> &'static Tables {
        static O200K: OnceLock<Tables> = OnceLock::new();
        static CL100K: OnceLock<Tables> = OnceLock::new();
        let cell = match encoding {
            BpeEncoding::O200kBase => &O200K,
            BpeEncoding::Cl100kBase => &CL100K,
        };
        cell.get_or_init(|| Tables::build(encoding))
    }
}

impl TiktokenCounter {
    /// A counter for `encoding` (free: its vocabulary is built on its first count).
    pub fn new(encoding: BpeEncoding) -> Self {
        TiktokenCounter { encoding }
    }

    /// The encoding this counter uses.
    pub fn encoding(&self) -> BpeEncoding {
        self.encoding
    }

    fn tables(&self) -> &'static Tables {
        Tables::of(self.encoding)
    }
}

impl Default for TiktokenCounter {
    fn default() -> Self {
        TiktokenCounter::new(BpeEncoding::default())
    }
}

impl std::fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiktokenCounter")
            .field("encoding", &self.encoding)
            .finish()
    }
}

impl TokenCounter for TiktokenCounter {
    fn name(&self) -> &str {
        self.encoding.name()
    }

    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        let tables = self.tables();
        // Content is text to the model, so special-token spellings count as ordinary text.
        bpe_pieces(text)
            .map(|piece| {
                tables
                    .fast
                    .and_then(|fast| fast.count(piece))
                    .unwrap_or_else(|| tables.bpe.encode_ordinary(piece).len())
            })
            .sum()
    }

    /// Byte-level BPE: every token of ordinary text covers at least one byte.
    fn count_upper_bound(&self, text: &str) -> Option<usize> {
        Some(text.len())
    }

    fn count_role(&self, role: Role) -> usize {
        self.tables().role_tokens[match role {
            Role::System => 0,
            Role::Developer => 1,
            Role::User => 2,
            Role::Assistant => 3,
            Role::Tool => 4,
        }]
    }
}

/// The most text tiktoken's byte-pair merge is given at once. The merge keeps some 50 bytes of
/// state for every byte of the word it merges, and a model's answer may be one 20 MiB "word"
/// (no space in it): counted whole, that took a gigabyte and half a minute. Cut into pieces of
/// at most this, its count costs a bounded amount per piece and a linear amount in all.
const BPE_PIECE: usize = 64 * 1024;

/// `text` as consecutive pieces of at most [`BPE_PIECE`] bytes, each cut before the last
/// whitespace of its stretch (where the tokenizer's own split would start a new word anyway)
/// or, in a stretch without any, at a character boundary.
fn bpe_pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(BPE_PIECE);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if end < rest.len()
            && let Some(space) = rest[..end].rfind(char::is_whitespace).filter(|at| *at > 0)
        {
            end = space;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// A rough counter: one token per four characters (rounded up). Fast and deterministic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CharEstimateCounter;

impl TokenCounter for CharEstimateCounter {
    fn name(&self) -> &str {
        "chars/4"
    }

    fn count(&self, text: &str) -> usize {
        text.chars().count().div_ceil(4)
    }

    /// A text has no more characters than bytes.
    fn count_upper_bound(&self, text: &str) -> Option<usize> {
        Some(text.len().div_ceil(4))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use troupe_protocol::ToolCall;

    /// A counter whose exact count must not be asked for: the upper-bound road answers from
    /// bounds alone, the role's included (an exact role count builds a vocabulary).
    struct BoundsOnly;

    impl TokenCounter for BoundsOnly {
        fn name(&self) -> &str {
            "bounds-only"
        }

        fn count(&self, text: &str) -> usize {
            panic!("the upper-bound road counted {text:?} exactly")
        }

        fn count_upper_bound(&self, text: &str) -> Option<usize> {
            Some(text.len())
        }
    }

    #[test]
    fn a_messages_upper_bound_never_counts_exactly_not_even_its_role() {
        let overhead = MessageOverhead::OPENAI;
        let call = ChatMessage::assistant_tool_calls(
            Some("ok".into()),
            vec![ToolCall::new("c1", "read", r#"{"path":"a"}"#)],
        );
        assert_eq!(
            BoundsOnly.count_message_upper_bound(&call),
            Some(
                overhead.per_message
                    + "assistant".len()
                    + "ok".len()
                    + overhead.per_tool_call
                    + "read".len()
                    + r#"{"path":"a"}"#.len()
            )
        );
        let result = ChatMessage::tool_result("c1", "done");
        assert_eq!(
            BoundsOnly.count_message_upper_bound(&result),
            Some(overhead.per_message + "tool".len() + "done".len() + "c1".len())
        );
    }

    #[test]
    fn tiktoken_counts_known_text() {
        let counter = TiktokenCounter::default();
        assert_eq!(counter.count("hello world"), 2);
        assert_eq!(counter.count(""), 0);
        let cl = TiktokenCounter::new(BpeEncoding::Cl100kBase);
        assert_eq!(cl.name(), "cl100k_base");
        assert_eq!(cl.count("hello world"), 2);
    }

    /// A long text is tokenized a bounded piece at a time: nothing lost or repeated, no piece
    /// past the bound even without a space in it, and the count within a token a piece of the
    /// whole text's (exact for a text of one piece).
    #[test]
    fn a_long_text_is_counted_in_bounded_pieces() {
        let one_word = "é".repeat(BPE_PIECE);
        let pieces: Vec<&str> = bpe_pieces(&one_word).collect();
        assert_eq!(pieces.concat(), one_word);
        assert_eq!(pieces.len(), 2);
        assert!(pieces.iter().all(|p| p.len() <= BPE_PIECE));

        let counter = TiktokenCounter::default();
        let prose = "The quick brown fox jumps over the lazy dog.\n".repeat(1500);
        let pieces: Vec<&str> = bpe_pieces(&prose).collect();
        assert_eq!(pieces.concat(), prose);
        assert!(pieces.len() > 1 && pieces.iter().all(|p| p.len() <= BPE_PIECE));
        // Cut before whitespace: every piece after the first starts a word.
        assert!(
            pieces[1..]
                .iter()
                .all(|p| p.starts_with(char::is_whitespace))
        );
        let whole = counter.tables().bpe.encode_ordinary(&prose).len();
        assert!(counter.count(&prose).abs_diff(whole) < pieces.len());
        let short = "The quick brown fox.";
        assert_eq!(
            counter.count(short),
            counter.tables().bpe.encode_ordinary(short).len()
        );
    }

    #[test]
    fn message_count_includes_framing_and_calls() {
        let counter = CharEstimateCounter;
        let plain = ChatMessage::user("abcdefgh");
        // 3 framing + "user" (1) + 2
        assert_eq!(counter.count_message(&plain), 6);
        let call = ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new("c1", "read", r#"{"path":"a"}"#)],
        );
        // 3 + "assistant" (3) + 1 + "read" (1) + 12 chars (3)
        assert_eq!(counter.count_message(&call), 11);
        assert_eq!(counter.count_messages(&[plain, call]), 6 + 11 + 3);
    }

    #[test]
    fn counters_are_object_safe_and_shareable() {
        fn assert_send_sync<T: Send + Sync + ?Sized>() {}
        assert_send_sync::<dyn TokenCounter>();
        let boxed: Box<dyn TokenCounter> = Box::new(CharEstimateCounter);
        assert_eq!(boxed.count("abcd"), 1);
    }
}
