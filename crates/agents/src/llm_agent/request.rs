//! What the request (or job) being handled carries down the agent's calls: built when it opens,
//! dropped when it ends — never kept on the agent (codex's `TurnContext`).

use troupe_protocol::{Conversation, ConversationMark, TraceContext};

/// The request or job being handled.
pub(super) struct RequestContext {
    /// Its trace: compactions it causes join it, and what lands during it is published there.
    pub(super) trace: TraceContext,
    /// Where the request found the conversation (a rollback goes back there); `None` for a job
    /// and before the request marks it, when nothing is rolled back.
    mark: Option<ConversationMark>,
    /// The conversation as the request found it, kept only once the request rewrites it (a
    /// compaction, the `compact` tool's answer): then rewinding to the mark is not enough.
    before_rewrite: Option<Conversation>,
}

impl RequestContext {
    /// A request or job under `trace`, not marked for rollback (yet).
    pub(super) fn new(trace: TraceContext) -> Self {
        RequestContext {
            trace,
            mark: None,
            before_rewrite: None,
        }
    }

    /// From here on a rollback of the request puts `conversation` back as it is now. O(1): a
    /// rollback drops what the request pushed; one that rewrites the conversation keeps a copy
    /// first ([`RequestContext::keep_for_rollback`]).
    pub(super) fn mark(&mut self, conversation: &Conversation) {
        self.mark = Some(conversation.mark());
        self.before_rewrite = None;
    }

    /// Before the request rewrites `conversation` (rather than pushing to it): keep it as the
    /// request found it, for a rollback. O(history), but only when a request rewrites — a
    /// compaction, which costs that much anyway.
    pub(super) fn keep_for_rollback(&mut self, conversation: &Conversation) {
        if let Some(mark) = self.mark
            && self.before_rewrite.is_none()
        {
            self.before_rewrite = conversation.copy_at(mark);
        }
    }

    /// Put `conversation` back where the request found it (`agent` names it in a log line).
    pub(super) fn roll_back(&mut self, conversation: &mut Conversation, agent: &str) {
        let Some(mark) = self.mark else {
            return;
        };
        if conversation.rewind(mark) {
            return;
        }
        match self.before_rewrite.take() {
            Some(before) => *conversation = before,
            // Every rewrite during a request keeps its copy first (`keep_for_rollback`).
            None => tracing::error!(
                agent = %agent,
                "the request rewrote the conversation without keeping a copy: not rolled back"
            ),
        }
    }
}
