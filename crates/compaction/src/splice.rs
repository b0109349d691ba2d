//! Splicing a compaction of an earlier snapshot into the conversation as it is now.
//!
//! An agent that works ahead has a snapshot of its conversation compacted while it goes on;
//! when the answer lands, the compacted prefix replaces the snapshot's messages and everything
//! appended since stays as it is. That is only sound while the conversation still starts with
//! the snapshot, message for message — a conversation cleared, rewound or rewritten meanwhile
//! refuses the splice — and the result is checked against every invariant of a compaction, with
//! the conversation as it is now as the "before".

use std::collections::HashMap;
use std::sync::Arc;

use troupe_protocol::{ChatMessage, MessageId};

use crate::compact::Compaction;
use crate::policy::ContextPolicy;
use crate::protection::ProtectedSet;
use crate::validate::{InvariantViolation, ValidationContext, check_invariants};
use troupe_tokens::TokenCache;
use troupe_tokens::TokenCounter;

/// Why a compaction of a snapshot was not spliced into the conversation; the conversation is
/// unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpliceError {
    /// The conversation no longer starts with the snapshot that was compacted: it was rewound
    /// (a rolled-back request), cleared or rewritten since.
    #[error(
        "the conversation no longer starts with the compacted snapshot (rewound or rewritten since): {detail}"
    )]
    NotAPrefix {
        /// Where it differs.
        detail: String,
    },
    /// The spliced conversation breaks an invariant of compaction.
    #[error("the spliced conversation breaks an invariant: {0}")]
    Invariant(#[from] InvariantViolation),
}

/// What is spliced: the conversation now, the snapshot that was compacted, and its compaction.
#[derive(Debug, Clone, Copy)]
pub struct Splice<'a> {
    /// The conversation as it is now.
    pub now: &'a [Arc<ChatMessage>],
    /// The snapshot the compaction was made from (its messages, shared with the conversation).
    pub snapshot: &'a [Arc<ChatMessage>],
    /// The compaction of the snapshot.
    pub compaction: &'a Compaction,
}

impl Splice<'_> {
    /// The compacted snapshot followed by every message appended after it, checked against
    /// the invariants of a compaction of `now` under `policy` (tokens counted with `counter`
    /// through `cache`: the messages kept are the same allocations as before, so only the new
    /// summaries and stubs are tokenized). Messages the compaction kept as they were stay the
    /// conversation's own allocations.
    ///
    /// # Errors
    /// [`SpliceError::NotAPrefix`] when `now` does not start with `snapshot`;
    /// [`SpliceError::Invariant`] when the result breaks an invariant.
    pub fn apply(
        &self,
        policy: &ContextPolicy,
        counter: &dyn TokenCounter,
        cache: &TokenCache,
    ) -> Result<Vec<Arc<ChatMessage>>, SpliceError> {
        self.check_prefix()?;
        let own: HashMap<MessageId, &Arc<ChatMessage>> =
            self.snapshot.iter().map(|m| (m.id, m)).collect();
        let appended = &self.now[self.snapshot.len()..];
        let mut spliced = Vec::with_capacity(self.compaction.messages.len() + appended.len());
        for message in &self.compaction.messages {
            match own.get(&message.id) {
                Some(kept) if ***kept == *message => spliced.push(Arc::clone(kept)),
                _ => spliced.push(Arc::new(message.clone())),
            }
        }
        spliced.extend_from_slice(appended);
        let before: Vec<ChatMessage> = self.now.iter().map(|m| ChatMessage::clone(m)).collect();
        let after: Vec<ChatMessage> = spliced.iter().map(|m| ChatMessage::clone(m)).collect();
        let protected = ProtectedSet::compute(&before, policy.protected_recent);
        let context = ValidationContext {
            protected: &protected,
            archive: &self.compaction.archive,
            tokens_before: cache.count_shared(counter, self.now).total,
            tokens_after: cache.count_shared(counter, &spliced).total,
            target_tokens: policy.target_tokens(),
        };
        check_invariants(&before, &after, &context)?;
        Ok(spliced)
    }

    /// `now` starts with `snapshot`: the same ids, the same messages (the same allocations,
    /// or equal ones).
    fn check_prefix(&self) -> Result<(), SpliceError> {
        if self.now.len() < self.snapshot.len() {
            return Err(SpliceError::NotAPrefix {
                detail: format!(
                    "{} messages now, {} in the snapshot",
                    self.now.len(),
                    self.snapshot.len()
                ),
            });
        }
        let differs = self
            .now
            .iter()
            .zip(self.snapshot)
            .find(|(now, then)| now.id != then.id || !(Arc::ptr_eq(now, then) || now == then));
        match differs {
            None => Ok(()),
            Some((now, then)) => Err(SpliceError::NotAPrefix {
                detail: format!("message {} is where the snapshot had {}", now.id, then.id),
            }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;
    use troupe_protocol::{Conversation, ToolCall};

    use super::*;
    use crate::summary::MechanicalSummarizer;
    use crate::{CompactOptions, compact};
    use troupe_tokens::TiktokenCounter;

    fn policy() -> ContextPolicy {
        ContextPolicy {
            protected_recent: 2,
            ..ContextPolicy::for_window(2_000)
        }
    }

    fn long(i: usize) -> String {
        format!("message {i}: ") + &"words the agent read and kept in mind ".repeat(20)
    }

    /// A conversation of a system prompt, a task and `turns` answered tool calls.
    fn conversation(turns: usize) -> Conversation {
        let mut c = Conversation::new();
        c.push(ChatMessage::system("you are a coder"));
        c.push(ChatMessage::user("fix the parser"));
        for i in 0..turns {
            let id = format!("call{i}");
            c.push(ChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new(id.clone(), "read_file", "{}")],
            ));
            c.push(ChatMessage::tool_result(id, long(i)));
        }
        c
    }

    async fn compacted(c: &Conversation, counter: &TiktokenCounter) -> Compaction {
        compact(
            c,
            &troupe_protocol::FileLedger::new(),
            &policy(),
            counter,
            Some(&MechanicalSummarizer::new()),
            CompactOptions::default(),
        )
        .await
        .unwrap()
    }

    /// Compact a snapshot, append `suffix` to the live conversation (lending the compaction
    /// ids as the agent does), and splice.
    /// The live conversation, the snapshot, and the splice.
    type Spliced = (
        Conversation,
        Vec<Arc<ChatMessage>>,
        Result<Vec<Arc<ChatMessage>>, SpliceError>,
    );

    fn splice_after(suffix: &[String]) -> Spliced {
        let counter = TiktokenCounter::default();
        let mut live = conversation(12);
        let snapshot = live.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let compaction = rt.block_on(compacted(&snapshot, &counter));
        assert!(compaction.changed());
        for _ in 0..4 * snapshot.len() + 64 {
            live.allocate_id();
        }
        for (i, text) in suffix.iter().enumerate() {
            if i % 2 == 0 {
                live.push(ChatMessage::user(text.clone()));
            } else {
                live.push(ChatMessage::assistant(text.clone()));
            }
        }
        let spliced = Splice {
            now: live.messages(),
            snapshot: snapshot.messages(),
            compaction: &compaction,
        }
        .apply(&policy(), &counter, &TokenCache::new());
        (live, snapshot.messages().to_vec(), spliced)
    }

    #[test]
    fn the_appended_messages_follow_the_compacted_prefix_unchanged() {
        let suffix = vec!["go on".to_string(), "going on".to_string()];
        let (live, snapshot, spliced) = splice_after(&suffix);
        let spliced = spliced.unwrap();
        let appended = &live.messages()[snapshot.len()..];
        // The snapshot's part changed (compacted), the appended part is the same allocations.
        assert_ne!(&spliced[..spliced.len() - appended.len()], &snapshot[..]);
        let tail = &spliced[spliced.len() - appended.len()..];
        for (a, b) in tail.iter().zip(appended) {
            assert!(Arc::ptr_eq(a, b));
        }
    }

    #[test]
    fn a_conversation_that_no_longer_starts_with_the_snapshot_is_refused() {
        let counter = TiktokenCounter::default();
        let live = conversation(12);
        let snapshot = live.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let compaction = rt.block_on(compacted(&snapshot, &counter));
        let mut rewound = conversation(3);
        rewound.push(ChatMessage::user("another road"));
        let refused = Splice {
            now: rewound.messages(),
            snapshot: snapshot.messages(),
            compaction: &compaction,
        }
        .apply(&policy(), &counter, &TokenCache::new());
        assert!(
            matches!(refused, Err(SpliceError::NotAPrefix { .. })),
            "{refused:?}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        #[test]
        fn any_appended_suffix_keeps_its_order_and_ids(
            suffix in proptest::collection::vec("[a-z ]{1,40}", 0..8)
        ) {
            let (live, snapshot, spliced) = splice_after(&suffix);
            let spliced = spliced.unwrap();
            let appended = &live.messages()[snapshot.len()..];
            let tail = &spliced[spliced.len() - appended.len()..];
            let ids = |m: &[Arc<ChatMessage>]| m.iter().map(|m| m.id).collect::<Vec<_>>();
            prop_assert_eq!(ids(tail), ids(appended));
            prop_assert_eq!(
                tail.iter().map(|m| m.text()).collect::<Vec<_>>(),
                suffix.clone()
            );
        }
    }
}
