//! Which KV sequence serves a job, and what each sequence holds.
//!
//! One context holds `n` sequences in a unified KV cache (each may use every cell). A
//! conversation — an agent's own calls, or its background calls (the compression agent's), told
//! apart by [`Key`] — is served by the sequence it used last while that still holds its tokens,
//! so agents taking turns do not decode each other's conversations again. Each sequence's
//! tokens are known position by position: a job decodes only past the longest prefix its prompt
//! shares with them, or with any other sequence's, whose cells it then shares (in a unified
//! cache a copy adds a sequence id to the cells; no data moves). A compaction that rewrites a
//! conversation keeps the untouched prefix the same way.
//!
//! The KV cache itself is behind [`KvCells`], so this bookkeeping is tested against a model of
//! the cells without llama.cpp.

use llama_cpp_2::token::LlamaToken;
use troupe_protocol::RequestPriority;

/// Whose conversation a job continues: the agent that asks (none for calls that name no agent),
/// the lane (its background calls are conversations of their own) and how the conversation
/// starts (a hash of its system prompt: the compression agent's tool loop and its summaries
/// are two conversations of one asker, each kept in a sequence of its own).
pub(super) type Key = (Option<String>, RequestPriority, u64);

/// The operations on the KV cache the bookkeeping needs.
pub(super) trait KvCells {
    /// Drop `seq`'s cells from position `from` on; `false` when the memory cannot drop a tail
    /// (it can always drop a whole sequence: `from == 0`).
    fn truncate(&mut self, seq: usize, from: usize) -> bool;
    /// Give `dst` (empty) the cells of `src`'s positions `0..len`.
    fn share_prefix(&mut self, src: usize, dst: usize, len: usize);
}

/// One sequence of the context.
#[derive(Debug, Default)]
struct Slot {
    /// The conversation it served last.
    owner: Option<Key>,
    /// The tokens its cells hold, position by position.
    tokens: Vec<LlamaToken>,
    /// When a job last claimed it (a counter).
    last_used: u64,
    /// A job is running on it.
    busy: bool,
}

/// The sequences of one context.
#[derive(Debug)]
pub(super) struct Sequences {
    slots: Vec<Slot>,
    clock: u64,
}

/// A sequence claimed for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Claim {
    /// The sequence id.
    pub seq: usize,
    /// Leading prompt tokens its cells already hold: the job decodes from here.
    pub reused: usize,
}

impl Sequences {
    /// `n` empty sequences (at least one).
    pub(super) fn new(n: usize) -> Self {
        Sequences {
            slots: (0..n.max(1)).map(|_| Slot::default()).collect(),
            clock: 0,
        }
    }

    /// A sequence for a job of `key` with `prompt` (non-empty), its cells cut to the prefix it
    /// keeps; `None` when every sequence is busy. Prefers the conversation's own sequence, then
    /// an empty one, then the least recently used; reuses the longest prefix any sequence shares
    /// with `prompt`, less the last prompt token (decoded again for its logits).
    pub(super) fn claim(
        &mut self,
        key: &Key,
        prompt: &[LlamaToken],
        kv: &mut impl KvCells,
    ) -> Option<Claim> {
        let seq = self.pick(key, prompt)?;
        self.clock += 1;
        let keep = prompt.len().saturating_sub(1);
        let own = common_prefix(&self.slots[seq].tokens, prompt).min(keep);
        let donor = (0..self.slots.len())
            .filter(|&other| other != seq)
            .map(|other| {
                (
                    other,
                    common_prefix(&self.slots[other].tokens, prompt).min(keep),
                )
            })
            .max_by_key(|&(other, len)| (len, std::cmp::Reverse(other)))
            .filter(|&(_, len)| len > own);
        if let Some((donor, len)) = donor {
            kv.truncate(seq, 0);
            kv.share_prefix(donor, seq, len);
            let shared = self.slots[donor].tokens[..len].to_vec();
            self.slots[seq].tokens = shared;
        } else {
            self.cut(seq, own, kv);
        }
        let slot = &mut self.slots[seq];
        slot.owner = Some(key.clone());
        slot.busy = true;
        slot.last_used = self.clock;
        Some(Claim {
            seq,
            reused: slot.tokens.len(),
        })
    }

    /// The idle sequence a job of `key` runs on.
    fn pick(&self, key: &Key, prompt: &[LlamaToken]) -> Option<usize> {
        let idle = || self.slots.iter().enumerate().filter(|(_, s)| !s.busy);
        let own = idle()
            .filter(|(_, s)| s.owner.as_ref() == Some(key))
            .max_by_key(|(_, s)| (common_prefix(&s.tokens, prompt), s.last_used))
            .map(|(i, _)| i);
        let empty = || {
            idle()
                .filter(|(_, s)| s.tokens.is_empty())
                .min_by_key(|(_, s)| (s.owner.is_some(), s.last_used))
                .map(|(i, _)| i)
        };
        let least_recent = || idle().min_by_key(|(_, s)| s.last_used).map(|(i, _)| i);
        own.or_else(empty).or_else(least_recent)
    }

    /// Keep the first `keep` tokens of `seq` (all of it dropped when the memory cannot drop a
    /// tail).
    fn cut(&mut self, seq: usize, keep: usize, kv: &mut impl KvCells) {
        let slot = &mut self.slots[seq];
        if keep >= slot.tokens.len() {
            return;
        }
        if keep == 0 || !kv.truncate(seq, keep) {
            kv.truncate(seq, 0);
            slot.tokens.clear();
        } else {
            slot.tokens.truncate(keep);
        }
    }

    /// Tokens `seq` holds: the position its next token is decoded at.
    pub(super) fn len(&self, seq: usize) -> usize {
        self.slots.get(seq).map_or(0, |s| s.tokens.len())
    }

    /// Record `tokens` decoded into `seq` after what it held.
    pub(super) fn extend(&mut self, seq: usize, tokens: &[LlamaToken]) {
        if let Some(slot) = self.slots.get_mut(seq) {
            slot.tokens.extend_from_slice(tokens);
        }
    }

    /// The job on `seq` ended well: the sequence is idle and keeps what it holds.
    pub(super) fn release(&mut self, seq: usize) {
        if let Some(slot) = self.slots.get_mut(seq) {
            slot.busy = false;
        }
    }

    /// The job on `seq` failed or was cancelled: what it decoded is not trusted, the sequence
    /// is emptied and idle.
    pub(super) fn discard(&mut self, seq: usize, kv: &mut impl KvCells) {
        if let Some(slot) = self.slots.get_mut(seq) {
            kv.truncate(seq, 0);
            slot.tokens.clear();
            slot.busy = false;
        }
    }

    /// Empty the least recently used idle sequence that holds anything, to make room in the
    /// cache; `false` when there is none.
    pub(super) fn evict_idle(&mut self, kv: &mut impl KvCells) -> bool {
        let victim = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.busy && !s.tokens.is_empty())
            .min_by_key(|(_, s)| s.last_used)
            .map(|(i, _)| i);
        match victim {
            Some(seq) => {
                kv.truncate(seq, 0);
                self.slots[seq].tokens.clear();
                true
            }
            None => false,
        }
    }

    /// The context was lost: nothing is held, nothing runs.
    pub(super) fn forget_all(&mut self) {
        for slot in &mut self.slots {
            slot.tokens.clear();
            slot.busy = false;
        }
    }
}

/// How many leading tokens `a` and `b` share.
fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// A model of a unified KV cache: each sequence's (position → token) cells. A shared prefix
    /// is the donor's cells under a second id: the same tokens at the same positions.
    #[derive(Default)]
    struct FakeCells {
        seqs: BTreeMap<usize, Vec<LlamaToken>>,
        /// Whether tails can be dropped (a recurrent model's memory cannot).
        no_tails: bool,
    }

    impl FakeCells {
        fn decode(&mut self, seq: usize, tokens: &[LlamaToken]) {
            self.seqs.entry(seq).or_default().extend_from_slice(tokens);
        }
        fn held(&self, seq: usize) -> &[LlamaToken] {
            self.seqs.get(&seq).map_or(&[], Vec::as_slice)
        }
    }

    impl KvCells for FakeCells {
        fn truncate(&mut self, seq: usize, from: usize) -> bool {
            if from > 0 && self.no_tails {
                return false;
            }
            self.seqs.entry(seq).or_default().truncate(from);
            true
        }
        fn share_prefix(&mut self, src: usize, dst: usize, len: usize) {
            let prefix = self.held(src)[..len].to_vec();
            assert!(
                self.held(dst).is_empty(),
                "shared into a non-empty sequence"
            );
            self.seqs.insert(dst, prefix);
        }
    }

    fn tokens(ids: &[i32]) -> Vec<LlamaToken> {
        ids.iter().copied().map(LlamaToken::new).collect()
    }

    fn key(agent: &str) -> Key {
        (Some(agent.to_string()), RequestPriority::Interactive, 0)
    }

    /// Run a job: claim, decode the rest of the prompt and `answer`, release.
    fn turn(
        sequences: &mut Sequences,
        kv: &mut FakeCells,
        key: &Key,
        prompt: &[LlamaToken],
        answer: &[LlamaToken],
    ) -> Claim {
        let claim = sequences.claim(key, prompt, kv).unwrap();
        kv.decode(claim.seq, &prompt[claim.reused..]);
        sequences.extend(claim.seq, &prompt[claim.reused..]);
        kv.decode(claim.seq, answer);
        sequences.extend(claim.seq, answer);
        sequences.release(claim.seq);
        claim
    }

    #[test]
    fn agents_taking_turns_each_keep_their_own_conversation() {
        let mut sequences = Sequences::new(4);
        let mut kv = FakeCells::default();
        let a1 = tokens(&[1, 10, 11]);
        let b1 = tokens(&[2, 20, 21]);
        let first_a = turn(&mut sequences, &mut kv, &key("a"), &a1, &tokens(&[12]));
        let first_b = turn(&mut sequences, &mut kv, &key("b"), &b1, &tokens(&[22]));
        assert_ne!(first_a.seq, first_b.seq);
        // Each agent's next prompt continues its own conversation: only the new part decodes.
        let a2 = tokens(&[1, 10, 11, 12, 13, 14]);
        let second_a = turn(&mut sequences, &mut kv, &key("a"), &a2, &[]);
        assert_eq!((second_a.seq, second_a.reused), (first_a.seq, 4));
        let b2 = tokens(&[2, 20, 21, 22, 23]);
        let second_b = turn(&mut sequences, &mut kv, &key("b"), &b2, &[]);
        assert_eq!((second_b.seq, second_b.reused), (first_b.seq, 4));
    }

    #[test]
    fn a_conversation_shares_the_prefix_another_sequence_holds() {
        let mut sequences = Sequences::new(4);
        let mut kv = FakeCells::default();
        let agent = tokens(&[1, 2, 3, 4, 5, 6]);
        let a = turn(&mut sequences, &mut kv, &key("a"), &agent, &[]);
        // The compression agent's summary of the same conversation starts with its prefix.
        let summary = tokens(&[1, 2, 3, 4, 5, 9, 9]);
        let background = (
            Some("compressor".to_string()),
            RequestPriority::Background,
            1,
        );
        let claim = sequences.claim(&background, &summary, &mut kv).unwrap();
        assert_ne!(claim.seq, a.seq);
        assert_eq!(claim.reused, 5);
        assert_eq!(kv.held(claim.seq), &summary[..5]);
        // The agent's own sequence is untouched.
        assert_eq!(kv.held(a.seq), &agent[..]);
    }

    #[test]
    fn an_askers_two_conversations_keep_a_sequence_each() {
        let mut sequences = Sequences::new(4);
        let mut kv = FakeCells::default();
        let (tool_loop, summary) = (
            (
                Some("compressor".to_string()),
                RequestPriority::Background,
                7,
            ),
            (
                Some("compressor".to_string()),
                RequestPriority::Background,
                8,
            ),
        );
        let loop_prompt = tokens(&[1, 2, 3, 4, 5, 6]);
        let first = turn(
            &mut sequences,
            &mut kv,
            &tool_loop,
            &loop_prompt,
            &tokens(&[7]),
        );
        // A summary between two steps of the loop takes a sequence of its own …
        let summary_prompt = tokens(&[9, 9, 9, 9]);
        let s = turn(&mut sequences, &mut kv, &summary, &summary_prompt, &[]);
        assert_ne!(s.seq, first.seq);
        // … so the loop's next step decodes only what is new, and a second summary of the same
        // material reads the first one's.
        let next = tokens(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let second = turn(&mut sequences, &mut kv, &tool_loop, &next, &[]);
        assert_eq!((second.seq, second.reused), (first.seq, 7));
        let again = turn(
            &mut sequences,
            &mut kv,
            &summary,
            &tokens(&[9, 9, 9, 9, 5]),
            &[],
        );
        assert_eq!((again.seq, again.reused), (s.seq, 4));
    }

    #[test]
    fn a_busy_sequence_is_not_given_to_a_second_job_of_its_conversation() {
        let mut sequences = Sequences::new(2);
        let mut kv = FakeCells::default();
        let prompt = tokens(&[1, 2, 3]);
        let first = sequences.claim(&key("a"), &prompt, &mut kv).unwrap();
        kv.decode(first.seq, &prompt);
        sequences.extend(first.seq, &prompt);
        let second = sequences.claim(&key("a"), &prompt, &mut kv).unwrap();
        assert_ne!(first.seq, second.seq);
        assert_eq!(
            second.reused, 2,
            "the prefix is shared from the busy sequence"
        );
        assert_eq!(sequences.claim(&key("b"), &prompt, &mut kv), None);
    }

    #[test]
    fn the_least_recently_used_sequence_is_taken_when_none_is_free() {
        let mut sequences = Sequences::new(2);
        let mut kv = FakeCells::default();
        let a = turn(&mut sequences, &mut kv, &key("a"), &tokens(&[1, 1]), &[]);
        let b = turn(&mut sequences, &mut kv, &key("b"), &tokens(&[2, 2]), &[]);
        turn(&mut sequences, &mut kv, &key("a"), &tokens(&[1, 1, 1]), &[]);
        let c = turn(&mut sequences, &mut kv, &key("c"), &tokens(&[3, 3]), &[]);
        assert_eq!(c.seq, b.seq);
        assert_eq!(kv.held(a.seq), &tokens(&[1, 1, 1])[..]);
        assert!(sequences.evict_idle(&mut kv));
        assert!(kv.held(a.seq).is_empty(), "a was used before c");
    }

    #[test]
    fn a_discarded_job_leaves_its_sequence_empty_and_the_others_whole() {
        let mut sequences = Sequences::new(2);
        let mut kv = FakeCells::default();
        let a = turn(&mut sequences, &mut kv, &key("a"), &tokens(&[1, 2]), &[]);
        let claim = sequences
            .claim(&key("b"), &tokens(&[5, 6, 7]), &mut kv)
            .unwrap();
        kv.decode(claim.seq, &tokens(&[5, 6]));
        sequences.extend(claim.seq, &tokens(&[5, 6]));
        sequences.discard(claim.seq, &mut kv);
        assert!(kv.held(claim.seq).is_empty());
        assert_eq!(sequences.len(claim.seq), 0);
        assert_eq!(kv.held(a.seq), &tokens(&[1, 2])[..]);
        // Idle again: the next job can have it.
        assert!(sequences.claim(&key("b"), &tokens(&[5]), &mut kv).is_some());
    }

    #[test]
    fn a_memory_that_cannot_drop_a_tail_starts_the_sequence_over() {
        let mut sequences = Sequences::new(1);
        let mut kv = FakeCells {
            no_tails: true,
            ..FakeCells::default()
        };
        turn(&mut sequences, &mut kv, &key("a"), &tokens(&[1, 2, 3]), &[]);
        let claim = sequences
            .claim(&key("a"), &tokens(&[1, 2, 9]), &mut kv)
            .unwrap();
        assert_eq!(claim.reused, 0);
        assert!(kv.held(claim.seq).is_empty());
    }

    proptest! {
        /// Whatever conversations claim, decode, fail and evict, each sequence's recorded tokens
        /// are exactly what its cells hold, and a claim's reused tokens are a prefix of its
        /// prompt shorter than the prompt.
        #[test]
        fn recorded_tokens_match_the_cells(
            steps in proptest::collection::vec(
                (0..4usize, proptest::collection::vec(0..3i32, 1..8), 0..3usize, any::<bool>()),
                1..40,
            )
        ) {
            let mut sequences = Sequences::new(3);
            let mut kv = FakeCells::default();
            let mut transcripts: BTreeMap<usize, Vec<LlamaToken>> = BTreeMap::new();
            for (agent, extra, answer, fail) in steps {
                // Conversations mostly grow; sometimes (agent 3) they are rewritten.
                let mut prompt = if agent == 3 {
                    Vec::new()
                } else {
                    transcripts.get(&agent).cloned().unwrap_or_default()
                };
                prompt.extend(tokens(&extra));
                let key = key(&agent.to_string());
                let claim = sequences.claim(&key, &prompt, &mut kv).unwrap();
                prop_assert!(claim.reused < prompt.len());
                prop_assert_eq!(kv.held(claim.seq), &prompt[..claim.reused]);
                let rest = &prompt[claim.reused..];
                kv.decode(claim.seq, rest);
                sequences.extend(claim.seq, rest);
                if fail {
                    sequences.discard(claim.seq, &mut kv);
                } else {
                    let answer = tokens(&vec![7; answer]);
                    kv.decode(claim.seq, &answer);
                    sequences.extend(claim.seq, &answer);
                    sequences.release(claim.seq);
                    prompt.extend(answer);
                    transcripts.insert(agent, prompt);
                }
                if agent == 0 && fail {
                    sequences.evict_idle(&mut kv);
                }
                for seq in 0..3 {
                    prop_assert_eq!(kv.held(seq), &sequences.slots[seq].tokens[..]);
                }
            }
        }
    }
}
