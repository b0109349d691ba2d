//! The agent's session log operations: `/clear`, `/resume`, adopting a changed system prompt,
//! and the write at every commit point.

use std::path::Path;
use std::sync::Arc;

use super::LlmAgent;
use super::jobs::SwitchError;
use crate::session::SessionError;

impl LlmAgent {
    /// `/clear`: record the fresh start in the session log first (so a failed write changes
    /// nothing), then forget the conversation, its ledger, scopes and last report — and the
    /// calls a paused turn left waiting for approval, whose assistant message goes with the
    /// conversation (asked about later, they would run against nothing, and their results
    /// answer no call). Answers how many such calls were dropped.
    pub(super) fn clear(&mut self) -> Result<usize, SessionError> {
        let dropped = self.session.clear()?;
        self.context.clear();
        self.scopes.forget_open();
        self.ahead.rewritten("the conversation was cleared");
        Ok(dropped)
    }

    /// `/resume`: write what changed as a last commit to the current log, then continue from
    /// the log at `path` (see [`crate::LlmAgentJob::SwitchSession`]). On an error nothing changed.
    pub(super) fn switch_session(&mut self, path: &Path) -> Result<usize, SwitchError> {
        self.persist();
        let model = self.spec.model.info().name;
        let restored = self.session.switch(path, &self.spec.name, &model)?;
        let count = restored.conversation.len();
        self.context.resume(restored);
        self.scopes.forget_open();
        self.ahead
            .rewritten("the agent resumed another session log");
        Ok(count)
    }

    /// Make the conversation's system prompt the spec's instructions: a resumed session keeps
    /// the prompt it was written with, and the spec (a configuration the user edited) may say
    /// otherwise since. Writes the change to the session log at once. Returns whether the
    /// prompt changed (an empty conversation gets the spec's at its first request anyway).
    pub fn adopt_spec_instructions(&mut self) -> bool {
        if self.context.conversation.is_empty() {
            return false;
        }
        let now = self.context.conversation.system_prompt().map(|m| m.text());
        let wanted = Some(self.spec.instructions.clone()).filter(|i| !i.is_empty());
        if now == wanted {
            return false;
        }
        let rest = self.context.conversation.messages()[usize::from(now.is_some())..].to_vec();
        let mut messages = Vec::with_capacity(rest.len() + 1);
        if let Some(instructions) = wanted {
            let mut prompt = troupe_protocol::ChatMessage::system(instructions);
            prompt.id = self.context.conversation.allocate_id();
            messages.push(Arc::new(prompt));
        }
        messages.extend(rest);
        self.context.conversation.replace_shared(messages);
        self.ahead.rewritten("the system prompt changed");
        self.persist();
        true
    }

    /// A commit point: write what changed to the session log, if there is one. A failed write
    /// is logged, answered to [`session_health`](crate::session_health) (the
    /// caller's way to tell its user at once) and retried at the next boundary (the difference
    /// is recomputed then), so the answer is not lost to a full disk that frees up.
    pub(super) fn persist(&mut self) {
        self.persist_with(Vec::new());
    }

    /// [`LlmAgent::persist`] with `extra` records in the same commit (a paused turn's).
    pub(super) fn persist_with(&mut self, extra: Vec<crate::session::SessionRecord>) {
        self.session.persist(&self.context, extra, &self.spec.name);
    }
}
