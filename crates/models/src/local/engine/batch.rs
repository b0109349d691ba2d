//! One pass's batch: what each running job adds to it — the token each generating job sampled
//! last, then chunks of the prompts still being decoded, interactive jobs' first — and where
//! its logits will be. The batching loop (`worker.rs`) decodes it.

use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

use super::BATCH;
use super::sequences::Sequences;
use super::worker::Running;
use crate::local::LocalModelError;

/// Prompt tokens a background job adds to one batch while an interactive job is generating: a
/// compressor's long prefill must not make each token of an agent's answer wait for a full
/// batch of prompt.
const BACKGROUND_PREFILL_BESIDE_INTERACTIVE: usize = 64;

/// What one running job adds to a batch.
pub(super) enum Part {
    /// Its last sampled token.
    Token(LlamaToken),
    /// Prompt tokens `from..to`.
    Prompt(usize, usize),
}

/// Fill `batch` from the running jobs: each generating job's last token, then prompt chunks
/// (interactive first, in join order). Returns what each job added and where its logits are.
pub(super) fn build(
    batch: &mut LlamaBatch<'static>,
    running: &[Running],
    sequences: &Sequences,
) -> Result<Vec<(usize, Part, Option<i32>)>, LocalModelError> {
    let add_failed = |e: &dyn std::fmt::Display| LocalModelError::Inference(format!("batch: {e}"));
    batch.clear();
    let mut plan = Vec::new();
    let waits = |r: &Running| r.stop.is_some() || !r.outbox.is_empty();
    for (i, r) in running.iter().enumerate() {
        if let Some(token) = r.pending.filter(|_| !waits(r)) {
            let pos = to_pos(sequences.len(r.seq));
            batch
                .add(token, pos, &[to_pos(r.seq)], true)
                .map_err(|e| add_failed(&e))?;
            plan.push((i, Part::Token(token), Some(batch.n_tokens() - 1)));
        }
    }
    let interactive_generating = running
        .iter()
        .any(|r| r.interactive() && r.pending.is_some() && !waits(r));
    let mut prefilling: Vec<usize> = (0..running.len())
        .filter(|&i| running[i].prefilling())
        .collect();
    prefilling.sort_by_key(|&i| (!running[i].interactive(), running[i].joined));
    for i in prefilling {
        let r = &running[i];
        let room = (BATCH as usize).saturating_sub(batch.n_tokens() as usize);
        let room = if !r.interactive() && interactive_generating {
            room.min(BACKGROUND_PREFILL_BESIDE_INTERACTIVE)
        } else {
            room
        };
        if room == 0 {
            continue;
        }
        let (from, to) = (r.next, (r.next + room).min(r.prompt.len()));
        let last = r.prompt.len() - 1;
        for (pos, token) in r.prompt.iter().enumerate().take(to).skip(from) {
            batch
                .add(*token, to_pos(pos), &[to_pos(r.seq)], pos == last)
                .map_err(|e| add_failed(&e))?;
        }
        let logits = (to == r.prompt.len()).then(|| batch.n_tokens() - 1);
        plan.push((i, Part::Prompt(from, to), logits));
    }
    Ok(plan)
}

/// A position or sequence id as llama.cpp takes it (both stay far below `i32::MAX`: positions
/// are bounded by the context, ids by `SEQUENCES`).
fn to_pos(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
