//! A model's answer too large for the context window even alone, cut as it arrives.
//!
//! Compaction never touches the newest messages (they are protected), and the user cannot
//! shorten the model's own words: an answer kept whole at three windows would leave every later
//! request refused. So the agent keeps it the way tier 1 keeps an oversized tool output — head
//! and tail around the one cut marker — and archives the whole answer, as any compaction
//! archives what it replaces: the `[replaces mN]` line names it, `recall` and `expand` bring it
//! back, and the session log writes the new archive entry like a compaction's.

use troupe_protocol::{ChatMessage, Conversation, MessageId, MessageKind};

use crate::archive::Archive;
use crate::markers::replaces_line;
use crate::truncate::{text_tokens_within, truncate_to_tokens};

impl Archive {
    /// Push `answer` (of `tokens` tokens) to `conversation` cut to about `limit` tokens: its text's
    /// head and tail around the cut marker, a line saying where the rest is and the `[replaces …]`
    /// line naming the whole answer, which this archive records (under an id of its own) as replaced
    /// by the cut. Its tool calls stay: they are what the next turn runs. Pushed whole, with
    /// nothing recorded, when its text is within `limit` already (the calls are the bulk, say).
    /// Returns the id of the message pushed.
    pub fn push_cut_answer(
        &mut self,
        conversation: &mut Conversation,
        mut answer: ChatMessage,
        tokens: usize,
        limit: usize,
    ) -> MessageId {
        let Some(body) = truncate_to_tokens(&answer.text_cow(), tokens, text_tokens_within(limit))
        else {
            return conversation.push(answer);
        };
        answer.id = conversation.allocate_id();
        let cut = answer
            .with_text(format!(
                "{}\n[this answer was too large for the context window: cut here, kept whole in \
                 the archive as {}]\n{}",
                body.trim_end(),
                answer.id,
                replaces_line(&[answer.id])
            ))
            .with_kind(MessageKind::CompressedStub);
        let id = conversation.push(cut);
        // The answer itself moves into the archive.
        self.record_replacement(id, [answer]);
        id
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::archive::expand;
    use troupe_protocol::ToolCall;

    #[test]
    fn the_cut_keeps_head_tail_and_calls_and_expands_to_the_whole_answer() {
        let text: String = (0..2_000).map(|i| format!("row {i}\n")).collect();
        let answer = ChatMessage::assistant_tool_calls(
            Some(text.clone()),
            vec![ToolCall::new("c1", "x", "{}")],
        );
        let mut conversation = Conversation::from_messages([ChatMessage::user("report")]);
        let mut archive = Archive::new();
        let id = archive.push_cut_answer(&mut conversation, answer.clone(), text.len() / 4, 200);
        let cut = conversation.last().unwrap().clone();
        let kept = cut.text();
        assert!(
            kept.starts_with("row 0\n") && kept.contains("row 1999\n"),
            "{kept}"
        );
        assert!(kept.len() < text.len() / 4);
        assert!(kept.contains("bytes dropped"), "{kept}");
        assert!(
            kept.ends_with("kept whole in the archive as m2]\n[replaces m2]"),
            "{kept}"
        );
        assert_eq!(cut.calls(), answer.calls());
        assert_eq!((cut.id, cut.kind), (id, MessageKind::CompressedStub));
        assert_eq!(id, MessageId(3));
        let whole = expand(&conversation.to_messages(), &archive).unwrap();
        assert_eq!(whole[1].text(), text);
        assert_eq!(
            (whole[1].id, whole[1].calls()),
            (MessageId(2), answer.calls())
        );

        // Within the limit already: pushed whole, nothing archived.
        let mut none = Archive::new();
        let id = none.push_cut_answer(&mut conversation, answer.clone(), 10, 200);
        assert_eq!(conversation.get(id).unwrap().text(), text);
        assert!(none.is_empty());
    }
}
