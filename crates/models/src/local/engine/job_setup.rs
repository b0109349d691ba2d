//! Starting a job: tokenize its prompt, check it fits the context, claim its sequence (cut to
//! the prefix it reuses) and build its sampler chain. The batching loop (`worker.rs`) calls
//! [`prepare`] when a job joins.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::Job;
use super::sequences::Sequences;
use super::worker::Cells;
use crate::local::LocalModelError;

/// Tokenize `job`, check it fits, claim its sequence and build its sampler; `None` when every
/// sequence is busy.
#[allow(clippy::type_complexity)]
pub(super) fn prepare(
    model: &'static LlamaModel,
    ctx: &mut LlamaContext<'static>,
    sequences: &mut Sequences,
    job: &Job,
) -> Result<
    Option<(
        super::sequences::Claim,
        Vec<LlamaToken>,
        LlamaSampler,
        usize,
    )>,
    LocalModelError,
> {
    let vocab = model.vocab();
    // Templates that spell out the BOS token would get it twice if llama.cpp added it again.
    let bos = String::from_utf8_lossy(&vocab.token_to_piece(vocab.bos(), true, None)).into_owned();
    let add_bos = bos.is_empty() || !job.prompt.starts_with(&bos);
    let tokens = vocab.tokenize(job.prompt.as_bytes(), add_bos, true);
    let n_ctx = ctx.n_ctx() as usize;
    if tokens.is_empty() {
        return Err(LocalModelError::Inference("the prompt is empty".into()));
    }
    if tokens.len() >= n_ctx {
        return Err(LocalModelError::ContextLength {
            prompt: tokens.len(),
            window: n_ctx,
        });
    }
    let sampler = sampler(model, job)?;
    let key = (job.agent.clone(), job.priority, job.conversation);
    let Some(claim) = sequences.claim(&key, &tokens, &mut Cells(ctx)) else {
        return Ok(None);
    };
    let budget = (job.max_tokens as usize).min(n_ctx - tokens.len());
    Ok(Some((claim, tokens, sampler, budget)))
}

/// The sampler chain: grammar (if any) first, so everything after it only sees allowed tokens.
/// Free text gets a mild repetition penalty (tiny models loop without one); grammar-constrained
/// JSON does not, because penalising repeated `"` and `,` would fight the grammar. Each job has
/// its own chain: a grammar's state is one sequence's.
fn sampler(model: &LlamaModel, job: &Job) -> Result<LlamaSampler, LocalModelError> {
    let mut chain = Vec::new();
    match &job.grammar {
        Some(grammar) => chain.push(
            LlamaSampler::grammar(model, grammar, "root")
                .map_err(|e| LocalModelError::Inference(format!("grammar: {e}")))?,
        ),
        None => chain.push(LlamaSampler::penalties(model.n_vocab(), 64, 1.1, 0.0, 0.0)),
    }
    if job.temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
    } else {
        chain.extend([
            LlamaSampler::top_k(40),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::min_p(0.05, 1),
            LlamaSampler::temp(job.temperature),
            LlamaSampler::dist(job.seed),
        ]);
    }
    Ok(LlamaSampler::chain_simple(chain))
}
