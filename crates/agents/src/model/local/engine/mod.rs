//! The only module that knows llama.cpp (through `llama-cpp-2`).
//!
//! One backend per process; each GGUF file is loaded once and shared by every [`Engine`] over
//! it (the weights are leaked on purpose: they live as long as the process, and a `'static`
//! model lets a worker own its `LlamaContext` without self-borrowing). A `LlamaContext` is not
//! shareable, so each engine owns one worker thread that owns one context and serves requests
//! from a queue, one at a time. The async side never blocks: it queues a job and awaits a
//! oneshot reply. A job carries a cancel flag checked before it starts and between tokens.
//!
//! The queue has two lanes (`queue.rs`): queued interactive calls (an agent's turn) go before
//! queued background ones (the compression agent's), so a compressor's long summarizer prefill
//! never sits ahead of the agent it serves; a job already running is not preempted.
//!
//! The worker keeps the KV cache between jobs and knows which tokens it holds: a job decodes only
//! the tokens after the longest prefix its prompt shares with them (a compressor loop resends
//! its system prompt, tools and history on every call; without this, each call prefilled all of
//! it again). A cancelled or failed job leaves nothing behind: the cache is emptied after it.
//!
//! A job may also ask for its text as it is generated: whole UTF-8 pieces go into a bounded
//! channel with `blocking_send`, so a consumer that reads slowly pauses generation instead of
//! letting pieces pile up, and one that stops reading (drops the receiver) ends the job.

pub mod baseline;
mod pieces;
mod queue;

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use troupe_runtime::RequestPriority;
use troupe_runtime::sync::lock;

use super::LocalModelError;
use pieces::Utf8Pieces;
use queue::JobQueue;

/// Serialises `LlamaModel::new_context` (see `worker`).
static CONTEXT_CREATION: Mutex<()> = Mutex::new(());

/// Prompt tokens decoded per batch.
const BATCH: u32 = 512;

/// How an engine is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct EngineOptions {
    /// Upper bound of the context window to allocate (the GGUF's training context may be
    /// larger than RAM allows).
    pub max_context: u32,
    /// CPU threads for decoding.
    pub threads: usize,
}

/// One generation request.
pub(crate) struct Job {
    /// The full prompt, chat template already applied.
    pub prompt: String,
    /// Cap on generated tokens.
    pub max_tokens: u32,
    /// 0 or less: greedy.
    pub temperature: f32,
    /// Seed for sampling when `temperature > 0`.
    pub seed: u32,
    /// A GBNF grammar the output must match (tool calls).
    pub grammar: Option<String>,
    /// Set by the caller to stop the job.
    pub cancel: Arc<AtomicBool>,
    /// Where to send the text as it is generated (whole UTF-8 pieces), if anywhere. The job
    /// waits while the channel is full and stops as cancelled when it is closed.
    pub pieces: Option<tokio::sync::mpsc::Sender<String>>,
    /// Its lane in the queue: interactive jobs queued later still go before background ones.
    pub priority: RequestPriority,
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The model ended its turn.
    EndOfTurn,
    /// `max_tokens` reached, or the context window is full.
    Length,
}

/// The result of one job.
#[derive(Debug, Clone)]
pub(crate) struct Generation {
    pub text: String,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
    pub stop: Stop,
    /// Time spent decoding the prompt.
    pub prompt_time: Duration,
    /// Time spent generating.
    pub generation_time: Duration,
    /// Leading prompt tokens already in the KV cache from the job before, not decoded again.
    pub reused_tokens: usize,
}

type Reply = tokio::sync::oneshot::Sender<Result<Generation, LocalModelError>>;

/// A loaded model with its worker.
pub(crate) struct Engine {
    model: &'static LlamaModel,
    template: Option<LlamaChatTemplate>,
    name: String,
    context_window: usize,
    jobs: Arc<JobQueue<(Job, Reply)>>,
}

impl Drop for Engine {
    /// The worker drains what is queued and ends (as it did when the last sender went).
    fn drop(&mut self) {
        self.jobs.close();
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("name", &self.name)
            .field("context_window", &self.context_window)
            .finish_non_exhaustive()
    }
}

pub(crate) fn backend() -> Result<&'static LlamaBackend, LocalModelError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp logs to stderr by default; route it into `tracing` instead, so it shows
            // only when asked for (RUST_LOG=llama_cpp_2=debug).
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LocalModelError::Load(format!("llama.cpp backend: {e}")))
}

/// The weights of `path`, loaded once per process.
fn weights(path: &Path) -> Result<&'static LlamaModel, LocalModelError> {
    static WEIGHTS: OnceLock<Mutex<HashMap<PathBuf, &'static LlamaModel>>> = OnceLock::new();
    let backend = backend()?;
    let mut cache = lock(WEIGHTS.get_or_init(Default::default));
    if let Some(model) = cache.get(path) {
        return Ok(model);
    }
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
        .map_err(|e| LocalModelError::Load(format!("{}: {e}", path.display())))?;
    let model: &'static LlamaModel = Box::leak(Box::new(model));
    cache.insert(path.to_path_buf(), model);
    Ok(model)
}

/// The engine for `path` with `options`, loading and starting it on first use. Blocking: call
/// it from a blocking thread.
pub(crate) fn engine(path: &Path, options: EngineOptions) -> Result<Arc<Engine>, LocalModelError> {
    type Key = (PathBuf, EngineOptions);
    static ENGINES: OnceLock<Mutex<HashMap<Key, Arc<Engine>>>> = OnceLock::new();
    let path = std::fs::canonicalize(path).map_err(|source| LocalModelError::Io {
        path: path.to_path_buf(),
        cause: source,
    })?;
    // Held while loading: two first uses of one file must not load it twice.
    let mut engines = lock(ENGINES.get_or_init(Default::default));
    if let Some(engine) = engines.get(&(path.clone(), options)) {
        return Ok(Arc::clone(engine));
    }
    let model = weights(&path)?;
    let n_ctx = model.n_ctx_train().min(options.max_context).max(256);
    let jobs = Arc::new(JobQueue::new());
    let queue = Arc::clone(&jobs);
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let threads = i32::try_from(options.threads.max(1)).unwrap_or(1);
    std::thread::Builder::new()
        .name("troupe-llama".to_string())
        .spawn(move || worker(model, n_ctx, threads, queue, ready_tx))
        .map_err(|e| LocalModelError::Load(format!("cannot start the inference thread: {e}")))?;
    let context_window = ready_rx
        .recv()
        .map_err(|_| LocalModelError::Load("the inference thread died while starting".into()))??;
    let name = model
        .meta_val_str("general.name")
        .ok()
        .filter(|n| !n.trim().is_empty())
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "local".to_string());
    let engine = Arc::new(Engine {
        model,
        template: model.chat_template(None).ok(),
        name,
        context_window,
        jobs,
    });
    engines.insert((path, options), Arc::clone(&engine));
    Ok(engine)
}

impl Engine {
    /// The model's name (GGUF `general.name`, else the file name).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The context window actually allocated, in tokens.
    pub(crate) fn context_window(&self) -> usize {
        self.context_window
    }

    /// Tokens of `text` as plain text (special-token syntax is not interpreted).
    pub(crate) fn count_tokens(&self, text: &str) -> usize {
        self.model
            .vocab()
            .tokenize(text.as_bytes(), false, false)
            .len()
    }

    /// The prompt for `messages` (role, content) with the GGUF's chat template, ending with the
    /// assistant's opening; `None` when the GGUF has no template llama.cpp can apply.
    pub(crate) fn apply_template(&self, messages: &[(String, String)]) -> Option<String> {
        let template = self.template.as_ref()?;
        let chat = messages
            .iter()
            .map(|(role, content)| LlamaChatMessage::new(role.clone(), content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        self.model.apply_chat_template(template, &chat, true).ok()
    }

    /// Queue a job; the receiver yields its result.
    pub(crate) fn submit(
        &self,
        job: Job,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<Generation, LocalModelError>>, LocalModelError>
    {
        let (reply, receiver) = tokio::sync::oneshot::channel();
        self.jobs
            .push(job.priority, (job, reply))
            .map_err(|_| LocalModelError::Inference("the inference thread has stopped".into()))?;
        Ok(receiver)
    }
}

/// Convert a JSON schema into a GBNF grammar with llama.cpp's own converter.
pub(crate) fn schema_to_grammar(schema: &serde_json::Value) -> Result<String, LocalModelError> {
    llama_cpp_2::json_schema_to_grammar(&schema.to_string())
        .map_err(|e| LocalModelError::Inference(format!("tool schema → grammar: {e}")))
}

fn context_params(n_ctx: u32, threads: i32) -> LlamaContextParams {
    LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(BATCH)
        .with_n_ubatch(BATCH)
        .with_n_threads(threads)
        .with_n_threads_batch(threads)
}

/// The worker: owns the context, serves jobs (interactive first) until the queue is closed.
fn worker(
    model: &'static LlamaModel,
    n_ctx: u32,
    threads: i32,
    queue: Arc<JobQueue<(Job, Reply)>>,
    ready: mpsc::SyncSender<Result<usize, LocalModelError>>,
) {
    let new_context = || -> Result<LlamaContext<'static>, LocalModelError> {
        // llama.cpp's context constructor mutates the model; never run two at once.
        let _creating = lock(&CONTEXT_CREATION);
        model
            .new_context(backend()?, context_params(n_ctx, threads))
            .map_err(|e| LocalModelError::Load(format!("cannot create a llama.cpp context: {e}")))
    };
    // The tokens the KV cache holds for sequence 0, position by position.
    let mut cached: Vec<LlamaToken> = Vec::new();
    let mut context = match new_context() {
        Ok(c) => {
            let _ = ready.send(Ok(c.n_ctx() as usize));
            Some(c)
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    while let Some((job, reply)) = queue.pop() {
        if job.cancel.load(Ordering::Relaxed) || reply.is_closed() {
            continue;
        }
        let ctx = match context.take().map_or_else(new_context, Ok) {
            Ok(c) => context.insert(c),
            Err(e) => {
                let _ = reply.send(Err(e));
                continue;
            }
        };
        // A panic inside llama-cpp-2 must not take the worker (and every later request) down;
        // the context it left behind is dropped and rebuilt for the next job.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            generate(model, ctx, &mut cached, &job)
        }));
        let result = match result {
            Ok(Ok(generation)) => Ok(generation),
            // What a failed or cancelled job decoded is not trusted by the next one.
            Ok(Err(e)) => {
                ctx.clear_kv_cache();
                cached.clear();
                Err(e)
            }
            Err(_) => {
                context = None;
                cached.clear();
                Err(LocalModelError::Inference(
                    "llama.cpp panicked during generation".into(),
                ))
            }
        };
        let _ = reply.send(result);
    }
}

/// How many leading tokens of `prompt` can stay in a KV cache that holds `cached`: their
/// common prefix, less one when it is the whole prompt (the last prompt token must be decoded
/// again for its logits).
fn reusable_prefix(cached: &[LlamaToken], prompt: &[LlamaToken]) -> usize {
    let common = cached
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count();
    common.min(prompt.len().saturating_sub(1))
}

/// Drop everything in the KV cache after the first `keep` tokens of `cached` and return how many
/// stayed (0 when the memory cannot drop a tail — then it is emptied).
fn keep_prefix(
    ctx: &mut LlamaContext<'static>,
    cached: &mut Vec<LlamaToken>,
    keep: usize,
) -> usize {
    let kept = u32::try_from(keep).ok().filter(|&k| k > 0).and_then(|k| {
        ctx.clear_kv_cache_seq(Some(0), Some(k), None)
            .ok()
            .filter(|&removed| removed)
    });
    match kept {
        Some(_) => {
            cached.truncate(keep);
            keep
        }
        None => {
            ctx.clear_kv_cache();
            cached.clear();
            0
        }
    }
}

fn generate(
    model: &'static LlamaModel,
    ctx: &mut LlamaContext<'static>,
    cached: &mut Vec<LlamaToken>,
    job: &Job,
) -> Result<Generation, LocalModelError> {
    let vocab = model.vocab();
    let fail =
        |what: &str, e: &dyn std::fmt::Display| LocalModelError::Inference(format!("{what}: {e}"));
    let started = Instant::now();
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

    let reused = keep_prefix(ctx, cached, reusable_prefix(cached, &tokens));
    let mut batch = LlamaBatch::new(BATCH as usize, 1);
    let last = tokens.len() - 1;
    for (chunk_index, chunk) in tokens[reused..].chunks(BATCH as usize).enumerate() {
        if job.cancel.load(Ordering::Relaxed) {
            return Err(LocalModelError::Cancelled);
        }
        batch.clear();
        for (i, token) in chunk.iter().enumerate() {
            let pos = reused + chunk_index * BATCH as usize + i;
            batch
                .add(*token, pos as i32, &[0], pos == last)
                .map_err(|e| fail("batch", &e))?;
        }
        ctx.decode(&mut batch).map_err(|e| fail("decode", &e))?;
        cached.extend_from_slice(chunk);
    }
    let prompt_time = started.elapsed();

    let mut sampler = sampler(model, job)?;
    let budget = (job.max_tokens as usize).min(n_ctx - tokens.len());
    let mut bytes = Vec::new();
    let mut text = String::new();
    let mut pieces = Utf8Pieces::default();
    let mut produced = 0;
    let mut logits_at = batch.n_tokens() - 1;
    let mut stop = Stop::Length;
    let generation_started = Instant::now();
    while produced < budget {
        if job.cancel.load(Ordering::Relaxed) {
            return Err(LocalModelError::Cancelled);
        }
        let token: LlamaToken = sampler.sample(ctx, logits_at);
        // Control tokens (`<|im_start|>` …) also end the turn: a model that opens a new turn
        // has finished this one.
        if vocab.is_eog(token) || vocab.is_control(token) {
            stop = Stop::EndOfTurn;
            break;
        }
        bytes.clear();
        vocab.token_to_piece_into(token, &mut bytes, false, None);
        if let Some(piece) = pieces.push(&bytes) {
            send_piece(job, &piece)?;
            text.push_str(&piece);
        }
        produced += 1;
        batch.clear();
        batch
            .add(token, (tokens.len() + produced - 1) as i32, &[0], true)
            .map_err(|e| fail("batch", &e))?;
        ctx.decode(&mut batch).map_err(|e| fail("decode", &e))?;
        cached.push(token);
        logits_at = 0;
    }
    if let Some(piece) = pieces.finish() {
        send_piece(job, &piece)?;
        text.push_str(&piece);
    }
    Ok(Generation {
        text,
        prompt_tokens: tokens.len(),
        output_tokens: produced,
        stop,
        prompt_time,
        generation_time: generation_started.elapsed(),
        reused_tokens: reused,
    })
}

/// Hand `piece` to the job's listener, if it has one, waiting while its channel is full.
fn send_piece(job: &Job, piece: &str) -> Result<(), LocalModelError> {
    match &job.pieces {
        Some(listener) => listener
            .blocking_send(piece.to_string())
            .map_err(|_| LocalModelError::Cancelled),
        None => Ok(()),
    }
}

/// The sampler chain: grammar (if any) first, so everything after it only sees allowed tokens.
/// Free text gets a mild repetition penalty (tiny models loop without one); grammar-constrained
/// JSON does not, because penalising repeated `"` and `,` would fight the grammar.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(ids: &[i32]) -> Vec<LlamaToken> {
        ids.iter().copied().map(LlamaToken::new).collect()
    }

    #[test]
    fn a_prompt_reuses_the_prefix_it_shares_with_the_cache() {
        let cached = tokens(&[1, 2, 3, 4, 9, 9]);
        assert_eq!(reusable_prefix(&cached, &tokens(&[1, 2, 3, 4, 5, 6])), 4);
        assert_eq!(reusable_prefix(&cached, &tokens(&[7, 2, 3])), 0);
        assert_eq!(reusable_prefix(&[], &tokens(&[1, 2])), 0);
        // A prompt the cache holds whole (or more) still decodes its last token for logits.
        assert_eq!(reusable_prefix(&cached, &tokens(&[1, 2, 3])), 2);
        assert_eq!(reusable_prefix(&cached, &cached), 5);
    }
}
