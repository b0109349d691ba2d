//! A thread-local subscriber that every call site hears of, however the suite's other threads
//! race it.
//!
//! tracing caches per call site whether any subscriber wants it, process-wide, and computes that
//! once, when the site is first reached. While at most one dispatcher is registered, tracing-core
//! asks only the *reaching thread's* default: a sibling test with no subscriber that first reaches
//! the `chat` call site after this test installed its own caches it as "nobody" for everyone, and
//! this test then records no `chat` span (CI saw it once in a full run). Holding a second
//! dispatcher alive for the scope makes every registration ask all registered dispatchers, this
//! one included; the rebuild then heals any site cached before this one was installed.

use tracing::Dispatch;
use tracing::subscriber::{DefaultGuard, NoSubscriber};

/// Keeps the subscriber in place for this thread, and heard by every call site, until dropped.
pub(crate) struct ScopedTracing {
    _default: DefaultGuard,
    _second_dispatcher: Dispatch,
}

/// Install `subscriber` as this thread's default until the returned guard is dropped.
pub(crate) fn scoped_tracing(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> ScopedTracing {
    let second = Dispatch::new(NoSubscriber::default());
    let default = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    ScopedTracing {
        _default: default,
        _second_dispatcher: second,
    }
}
