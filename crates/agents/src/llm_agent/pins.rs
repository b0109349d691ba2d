//! Pinning a message of the live conversation ([`pin_message`](super::pin_message)).

use troupe_protocol::MessageId;

use super::LlmAgent;
use super::jobs::PinError;

impl LlmAgent {
    /// Pin or unpin `id`; the change goes to the session log at once (as a rewrite of the
    /// history, the road every in-place change takes), and a compaction working ahead on a copy
    /// from before is dropped when it lands: it would splice the message in unpinned, or
    /// summarized away.
    pub(super) fn set_pinned(&mut self, id: MessageId, pinned: bool) -> Result<(), PinError> {
        let unchanged = self
            .context
            .conversation
            .get(id)
            .ok_or(PinError::UnknownMessage(id))?
            .pinned
            == pinned;
        if unchanged {
            return Ok(());
        }
        if let Some(message) = self.context.conversation.get_mut(id) {
            message.pinned = pinned;
        }
        self.ahead.rewritten(if pinned {
            "a message was pinned"
        } else {
            "a message was unpinned"
        });
        self.commit(super::journal::Step::Changes);
        Ok(())
    }
}
