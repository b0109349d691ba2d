//! llama-cpp-2 called directly, with nothing of troupe around it: the yardstick the
//! `local_model` and `local_team` benches compare the provider against. Not part of the
//! supported API.

use std::path::Path;
use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

pub use super::CallRecord;
use super::exit::inside_llama;
use super::{BATCH, CONTEXT_CREATION, backend, context_params, lock, weights};
use crate::local::LocalModelError;

/// Timings of one direct run.
#[derive(Debug, Clone, Copy)]
pub struct BaselineRun {
    /// Prompt tokens decoded.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub output_tokens: usize,
    /// Prompt decode time.
    pub prompt_time: Duration,
    /// Generation time.
    pub generation_time: Duration,
}

/// A model and a context of its own, driven by the plain llama-cpp-2 loop.
pub struct Baseline {
    model: &'static LlamaModel,
    ctx: LlamaContext<'static>,
}

impl std::fmt::Debug for Baseline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Baseline").finish_non_exhaustive()
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> LocalModelError {
    LocalModelError::Inference(format!("{what}: {e}"))
}

impl Baseline {
    /// Load `path` (shared with the provider's copy, if loaded) with a context like the
    /// provider's: `min(n_ctx_train, max_context)` tokens, `threads` threads.
    ///
    /// # Errors
    /// When the model or context cannot be created.
    pub fn new(path: &Path, max_context: u32, threads: usize) -> Result<Self, LocalModelError> {
        let path = std::fs::canonicalize(path).map_err(|source| LocalModelError::Io {
            path: path.to_path_buf(),
            cause: source,
        })?;
        let model = weights(&path)?;
        let n_ctx = model.n_ctx_train().min(max_context).max(256);
        let threads = i32::try_from(threads.max(1)).unwrap_or(1);
        let ctx = {
            let _creating = lock(&CONTEXT_CREATION);
            let backend = backend()?;
            inside_llama(|| model.new_context(backend, context_params(n_ctx, threads)))
                .map_err(|e| fail("context", e))?
        };
        Ok(Baseline { model, ctx })
    }

    /// A conversation of `(role, text)` messages through the GGUF's chat template (ChatML if it
    /// has none), ready for the assistant's answer: the text the provider renders for the same
    /// messages.
    ///
    /// # Errors
    /// When the template cannot be applied.
    pub fn chat_prompt(&self, messages: &[(&str, &str)]) -> Result<String, LocalModelError> {
        let template = self
            .model
            .chat_template(None)
            .or_else(|_| llama_cpp_2::model::LlamaChatTemplate::new("chatml"))
            .map_err(|e| fail("template", e))?;
        let chat = messages
            .iter()
            .map(|(role, text)| {
                LlamaChatMessage::new((*role).into(), (*text).into())
                    .map_err(|e| fail("message", e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.model
            .apply_chat_template(&template, &chat, true)
            .map_err(|e| fail("template", e))
    }

    /// Decode `tokens` from position 0 in batches of `BATCH`, logits for the last one only: the
    /// plain prefill both runs measure. Returns the last batch (its last token's logits are next).
    fn prefill(&mut self, tokens: &[LlamaToken]) -> Result<LlamaBatch<'static>, LocalModelError> {
        self.prefill_from(tokens, 0)
    }

    /// Decode `prompt`, then generate greedily (with the provider's repetition penalty) until the
    /// end of the turn or `max_tokens`.
    ///
    /// # Errors
    /// When llama.cpp fails to decode.
    pub fn run(&mut self, prompt: &str, max_tokens: usize) -> Result<BaselineRun, LocalModelError> {
        let vocab = self.model.vocab();
        self.ctx.clear_kv_cache();
        let started = Instant::now();
        let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        let mut batch = self.prefill(&tokens)?;
        let prompt_time = started.elapsed();
        let mut sampler = LlamaSampler::chain_simple([
            LlamaSampler::penalties(self.model.n_vocab(), 64, 1.1, 0.0, 0.0),
            LlamaSampler::greedy(),
        ]);
        let generation_started = Instant::now();
        let mut out = Vec::new();
        let mut n = 0;
        let mut at = batch.n_tokens() - 1;
        while n < max_tokens {
            let token = sampler.sample(&self.ctx, at);
            if vocab.is_eog(token) || vocab.is_control(token) {
                break;
            }
            vocab.token_to_piece_into(token, &mut out, false, None);
            batch.clear();
            batch
                .add(token, (tokens.len() + n) as i32, &[0], true)
                .map_err(|e| fail("batch", e))?;
            n += 1;
            inside_llama(|| self.ctx.decode(&mut batch)).map_err(|e| fail("decode", e))?;
            at = 0;
        }
        Ok(BaselineRun {
            prompt_tokens: tokens.len(),
            output_tokens: n,
            prompt_time,
            generation_time: generation_started.elapsed(),
        })
    }

    /// KV cache bytes one cell (one token of one sequence) takes: K and V in f16 for every
    /// layer's key-value heads.
    pub fn kv_bytes_per_cell(&self) -> usize {
        let head_dim =
            (self.model.n_embd().max(0) as usize) / (self.model.n_head().max(1) as usize);
        self.model.n_layer() as usize * self.model.n_head_kv() as usize * head_dim * 2 * 2
    }

    /// Decode `prompts` into sequences `0..` of an empty cache, then generate `outputs[i]`
    /// tokens for sequence `i` greedily (with the provider's repetition penalty), ignoring the
    /// end of turn, one token of every unfinished sequence per batch: llama.cpp's own batched
    /// decoding, the yardstick of the engine's. `generation_time` is the batched part.
    ///
    /// # Errors
    /// When `prompts` and `outputs` differ in length, a prompt is empty, or llama.cpp fails.
    pub fn run_batched(
        &mut self,
        prompts: &[String],
        outputs: &[usize],
    ) -> Result<BaselineRun, LocalModelError> {
        if prompts.len() != outputs.len() || prompts.is_empty() {
            return Err(fail("prompts", "one output count per prompt, at least one"));
        }
        let vocab = self.model.vocab();
        self.ctx.clear_kv_cache();
        let started = Instant::now();
        let mut positions = Vec::new();
        let mut samplers = Vec::new();
        let mut next = Vec::new();
        let mut batch = LlamaBatch::new(BATCH as usize, 1);
        for (seq, prompt) in prompts.iter().enumerate() {
            let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
            if tokens.is_empty() {
                return Err(fail("prompt", "empty"));
            }
            let last = tokens.len() - 1;
            for (c, chunk) in tokens.chunks(BATCH as usize).enumerate() {
                batch.clear();
                for (i, t) in chunk.iter().enumerate() {
                    let pos = c * BATCH as usize + i;
                    batch
                        .add(*t, pos as i32, &[seq as i32], pos == last)
                        .map_err(|e| fail("batch", e))?;
                }
                inside_llama(|| self.ctx.decode(&mut batch)).map_err(|e| fail("decode", e))?;
            }
            let mut sampler = LlamaSampler::chain_simple([
                LlamaSampler::penalties(self.model.n_vocab(), 64, 1.1, 0.0, 0.0),
                LlamaSampler::greedy(),
            ]);
            next.push(sampler.sample(&self.ctx, batch.n_tokens() - 1));
            samplers.push(sampler);
            positions.push(tokens.len());
        }
        let prompt_tokens = positions.iter().sum();
        let prompt_time = started.elapsed();
        let generation_started = Instant::now();
        let mut produced = vec![1usize; prompts.len()];
        loop {
            batch.clear();
            let mut at = Vec::new();
            for seq in 0..prompts.len() {
                if produced[seq] >= outputs[seq] {
                    continue;
                }
                batch
                    .add(next[seq], positions[seq] as i32, &[seq as i32], true)
                    .map_err(|e| fail("batch", e))?;
                positions[seq] += 1;
                at.push((seq, batch.n_tokens() - 1));
            }
            if at.is_empty() {
                break;
            }
            inside_llama(|| self.ctx.decode(&mut batch)).map_err(|e| fail("decode", e))?;
            for (seq, index) in at {
                next[seq] = samplers[seq].sample(&self.ctx, index);
                produced[seq] += 1;
            }
        }
        Ok(BaselineRun {
            prompt_tokens,
            output_tokens: outputs.iter().sum(),
            prompt_time,
            generation_time: generation_started.elapsed(),
        })
    }

    /// llama.cpp doing the decoding of the engine's `call` on `text`: its reused tokens
    /// decoded into an empty cache first, untimed (they were in the engine's cache), then the
    /// rest of its prompt timed, then its output tokens generated greedily. The same positions
    /// as the engine decoded, so the prefill rates compare at the same depth.
    ///
    /// # Errors
    /// As [`Baseline::run_counts`].
    pub fn run_call(
        &mut self,
        text: &str,
        call: &CallRecord,
    ) -> Result<BaselineRun, LocalModelError> {
        let vocab = self.model.vocab();
        let mut tokens = vocab.tokenize(text.as_bytes(), true, false);
        if tokens.len() < call.prompt_tokens || call.prompt_tokens == 0 {
            return Err(fail(
                "prompt",
                format!(
                    "the text has {} tokens, {} asked for",
                    tokens.len(),
                    call.prompt_tokens
                ),
            ));
        }
        tokens.truncate(call.prompt_tokens);
        let reused = call.reused_tokens.min(tokens.len() - 1);
        self.ctx.clear_kv_cache();
        if reused > 0 {
            self.prefill_from(&tokens[..reused], 0)?;
        }
        let started = Instant::now();
        let mut batch = self.prefill_from(&tokens[reused..], reused)?;
        let prompt_time = started.elapsed();
        let generation_time = self.generate(&mut batch, tokens.len(), call.output_tokens)?;
        Ok(BaselineRun {
            prompt_tokens: tokens.len() - reused,
            output_tokens: call.output_tokens,
            prompt_time,
            generation_time,
        })
    }

    /// Decode `tokens` at positions `start..` of sequence 0 in batches of `BATCH`, logits for
    /// the last one only. Returns the last batch.
    fn prefill_from(
        &mut self,
        tokens: &[LlamaToken],
        start: usize,
    ) -> Result<LlamaBatch<'static>, LocalModelError> {
        let mut batch = LlamaBatch::new(BATCH as usize, 1);
        let last = tokens.len().saturating_sub(1);
        for (c, chunk) in tokens.chunks(BATCH as usize).enumerate() {
            batch.clear();
            for (i, t) in chunk.iter().enumerate() {
                let pos = c * BATCH as usize + i;
                batch
                    .add(*t, (start + pos) as i32, &[0], pos == last)
                    .map_err(|e| fail("batch", e))?;
            }
            inside_llama(|| self.ctx.decode(&mut batch)).map_err(|e| fail("decode", e))?;
        }
        Ok(batch)
    }

    /// Generate `output_tokens` greedily after a prompt of `prompt_len` tokens whose last
    /// logits are in `batch`; the time it took.
    fn generate(
        &mut self,
        batch: &mut LlamaBatch<'static>,
        prompt_len: usize,
        output_tokens: usize,
    ) -> Result<Duration, LocalModelError> {
        let mut sampler = LlamaSampler::greedy();
        let started = Instant::now();
        let mut at = batch.n_tokens() - 1;
        for n in 0..output_tokens {
            let token = sampler.sample(&self.ctx, at);
            batch.clear();
            batch
                .add(token, (prompt_len + n) as i32, &[0], true)
                .map_err(|e| fail("batch", e))?;
            inside_llama(|| self.ctx.decode(batch)).map_err(|e| fail("decode", e))?;
            at = 0;
        }
        Ok(started.elapsed())
    }

    /// Decode the first `prompt_tokens` tokens of `text` (with a BOS token) into an empty cache,
    /// then generate exactly `output_tokens` tokens greedily, ignoring the end of turn: llama.cpp
    /// doing the work of one provider call of the same size, for side-by-side timings.
    ///
    /// # Errors
    /// When `text` has fewer tokens than asked for, or llama.cpp fails to decode.
    pub fn run_counts(
        &mut self,
        text: &str,
        prompt_tokens: usize,
        output_tokens: usize,
    ) -> Result<BaselineRun, LocalModelError> {
        let vocab = self.model.vocab();
        let mut tokens = vocab.tokenize(text.as_bytes(), true, false);
        if tokens.len() < prompt_tokens || prompt_tokens == 0 {
            return Err(fail(
                "prompt",
                format!(
                    "the text has {} tokens, {prompt_tokens} asked for",
                    tokens.len()
                ),
            ));
        }
        tokens.truncate(prompt_tokens);
        self.ctx.clear_kv_cache();
        let started = Instant::now();
        let mut batch = self.prefill(&tokens)?;
        let prompt_time = started.elapsed();
        let generation_time = self.generate(&mut batch, tokens.len(), output_tokens)?;
        Ok(BaselineRun {
            prompt_tokens: tokens.len(),
            output_tokens,
            prompt_time,
            generation_time,
        })
    }
}
