//! The agent's session log operations: `/clear`, `/resume`, adopting a changed system prompt
//! (each commit goes through the journal, `journal.rs`).

use std::path::Path;
use std::sync::Arc;

use super::LlmAgent;
use super::jobs::SwitchError;
use super::journal::Step;
use troupe_session::SessionError;

impl LlmAgent {
    /// `/clear`: record the fresh start in the session log first (so a failed write changes
    /// nothing), then forget the conversation, its ledger, scopes and last report — and the
    /// calls a paused turn left waiting for approval, whose assistant message goes with the
    /// conversation (asked about later, they would run against nothing, and their results
    /// answer no call). Answers how many such calls were dropped.
    pub(super) fn clear(&mut self) -> Result<usize, SessionError> {
        let dropped = self.journal.clear()?;
        self.context.clear();
        self.scopes.forget_open();
        self.ahead.rewritten("the conversation was cleared");
        Ok(dropped)
    }

    /// `/resume`: write what changed as a last commit to the current log, then continue from
    /// the log at `path` (see [`crate::LlmAgentJob::SwitchSession`]). On an error nothing changed.
    pub(super) fn switch_session(&mut self, path: &Path) -> Result<usize, SwitchError> {
        self.commit(Step::Changes);
        let model = self.spec.model.info().name;
        let restored = self.journal.switch(path, &self.spec.name, &model)?;
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
        self.commit(Step::Changes);
        true
    }
}
