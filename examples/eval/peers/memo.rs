//! A token counter that remembers: every strategy's every prompt is counted, and the same
//! message text comes back hundreds of times over a long transcript.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use troupe::tokens::{MessageOverhead, TokenCounter};

/// `inner`'s counts, remembered by a hash of the text (and its length).
pub(super) struct MemoCounter<C> {
    inner: C,
    seen: Mutex<HashMap<(u64, usize), usize>>,
}

impl<C: TokenCounter> MemoCounter<C> {
    pub(super) fn new(inner: C) -> Self {
        MemoCounter {
            inner,
            seen: Mutex::default(),
        }
    }
}

impl<C: TokenCounter> TokenCounter for MemoCounter<C> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn count(&self, text: &str) -> usize {
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        let key = (hasher.finish(), text.len());
        let Ok(mut seen) = self.seen.lock() else {
            return self.inner.count(text);
        };
        *seen.entry(key).or_insert_with(|| self.inner.count(text))
    }

    fn overhead(&self) -> MessageOverhead {
        self.inner.overhead()
    }

    fn count_upper_bound(&self, text: &str) -> Option<usize> {
        self.inner.count_upper_bound(text)
    }
}
