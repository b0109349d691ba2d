//! A summary prompt with its material cut down: for a summarizer that wants less than its
//! window holds (a small local model, whose prefill is most of a summary's cost and whose note is
//! no better for reading every line of a long log).

use super::prompt::{CONVERSATION_CLOSE, CONVERSATION_OPEN, SummaryPrompt};
use super::render::parse_header;
use crate::truncate::{text_tokens_within, truncate_to_tokens};
use troupe_tokens::TokenCounter;

/// A message is never cut below this many tokens: its header and a line or two.
const MIN_BLOCK_TOKENS: usize = 64;

impl SummaryPrompt {
    /// This prompt with the messages in its `<conversation>` holding at most `cap` tokens
    /// together (as `counter` counts them): every message longer than one common limit is cut
    /// to its head and tail around a marker saying what was left out, the limit as high as the
    /// cap allows — short messages stay whole, long tool outputs and logs give up the same. The
    /// instructions, a previous summary and the focus are kept whole. A prompt within the cap,
    /// or without a conversation, comes back unchanged.
    pub fn within_material(&self, cap: usize, counter: &dyn TokenCounter) -> SummaryPrompt {
        let Some((before, conversation, after)) = split_conversation(&self.user) else {
            return self.clone();
        };
        let blocks = blocks(conversation);
        let tokens: Vec<usize> = blocks.iter().map(|b| counter.count(b)).collect();
        if tokens.iter().sum::<usize>() <= cap {
            return self.clone();
        }
        let limit = common_limit(&tokens, cap);
        let mut material = String::with_capacity(conversation.len());
        for (block, t) in blocks.iter().zip(tokens) {
            let cut = (t > limit)
                .then(|| truncate_to_tokens(block, t, text_tokens_within(limit)))
                .flatten();
            let text = cut.as_deref().unwrap_or(block);
            material.push_str(text);
            if !text.ends_with('\n') {
                material.push('\n');
            }
        }
        SummaryPrompt {
            user: format!("{before}{}{after}", material.trim_end_matches('\n')),
            ..self.clone()
        }
    }
}

/// `user` split around the messages of its `<conversation>`: text up to and with the opening
/// tag's line, the messages, the closing tag and what follows.
fn split_conversation(user: &str) -> Option<(&str, &str, &str)> {
    let open = user.find(CONVERSATION_OPEN)? + CONVERSATION_OPEN.len();
    let open = open + usize::from(user[open..].starts_with('\n'));
    let close = open + user[open..].rfind(CONVERSATION_CLOSE)?;
    let body_end = if user[..close].ends_with('\n') {
        close - 1
    } else {
        close
    };
    Some((&user[..open], &user[open..body_end], &user[body_end..]))
}

/// The rendered messages of a conversation, each from its header line to the next header.
fn blocks(conversation: &str) -> Vec<&str> {
    let mut starts = vec![0];
    let mut at = 0;
    for line in conversation.split_inclusive('\n') {
        if at > 0 && parse_header(line.trim_end()).is_some() {
            starts.push(at);
        }
        at += line.len();
    }
    starts.push(conversation.len());
    starts
        .windows(2)
        .map(|w| &conversation[w[0]..w[1]])
        .filter(|b| !b.is_empty())
        .collect()
}

/// The highest per-message limit at which the messages hold at most `cap` tokens (at least
/// [`MIN_BLOCK_TOKENS`], so a cap below that many tokens a message is not met).
fn common_limit(tokens: &[usize], cap: usize) -> usize {
    let fits = |limit: usize| tokens.iter().map(|&t| t.min(limit)).sum::<usize>() <= cap;
    let (mut low, mut high) = (
        MIN_BLOCK_TOKENS,
        tokens.iter().copied().max().unwrap_or(MIN_BLOCK_TOKENS),
    );
    while low < high {
        let mid = (low + high).div_ceil(2);
        if fits(mid) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    low
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::summary::segment_prompt;
    use troupe_tokens::TiktokenCounter;

    fn conversation() -> String {
        let log: String = (0..400)
            .map(|i| format!("line {i} of the build log\n"))
            .collect();
        format!(
            "[m2 user]\nFix the parser.\n[m3 assistant]\nRunning the build.\n→ bash {{\"cmd\":\"make\"}}\n\
             [m4 tool bash]\n{log}error: unexpected token at parser.rs:41\n[m5 assistant]\nThe parser chokes on `;`.\n"
        )
    }

    #[test]
    fn long_messages_are_cut_to_head_and_tail_and_short_ones_stay_whole() {
        let counter = TiktokenCounter::default();
        let prompt = segment_prompt(&conversation(), Some("## Goal\n- fix"), None, 300);
        let before = counter.count(&prompt.user);
        let lean = prompt.within_material(400, &counter);
        let after = counter.count(&lean.user);
        assert!(after < before / 2, "{before} → {after}");
        assert!(after <= 400 + 120, "{after}");
        for kept in [
            "[m2 user]\nFix the parser.",
            "[m5 assistant]\nThe parser chokes on `;`.",
            "line 0 of the build log",
            "error: unexpected token at parser.rs:41",
            "<previous-summary>\n## Goal\n- fix\n</previous-summary>",
            "Write the updated note now.",
        ] {
            assert!(lean.user.contains(kept), "{kept:?} lost:\n{}", lean.user);
        }
        assert!(!lean.user.contains("line 200 of the build log"));
        assert_eq!(
            (lean.system, lean.max_output_tokens),
            (prompt.system, prompt.max_output_tokens)
        );
    }

    #[test]
    fn a_prompt_within_the_cap_is_unchanged() {
        let counter = TiktokenCounter::default();
        let prompt = segment_prompt("[m2 user]\nhello\n[m3 assistant]\nhi", None, None, 100);
        assert_eq!(prompt.within_material(1000, &counter), prompt);
    }

    #[test]
    fn the_limit_is_the_highest_that_fits() {
        assert_eq!(common_limit(&[10, 1000, 500], 610), 300);
        assert_eq!(common_limit(&[10, 20], 5), MIN_BLOCK_TOKENS);
    }
}
