//! The only module that knows llama.cpp (through `llama-cpp-2`).
//!
//! One backend per process; each GGUF file is loaded once and shared by every [`Engine`] over
//! it (the weights are leaked on purpose: they live as long as the process, and a `'static`
//! model lets a worker own its `LlamaContext` without self-borrowing). A `LlamaContext` is not
//! shareable, so each engine owns one worker thread (`worker.rs`) that owns one context and
//! serves requests from a queue. The async side never blocks: it queues a job and awaits a
//! oneshot reply. A job carries a cancel flag checked before it starts and between batches.
//!
//! The context holds one KV sequence per conversation (`sequences.rs`): each agent's calls, and
//! its background (compression) calls, keep their tokens in a sequence of their own — as do an
//! asker's conversations that start differently (the compressor's tool loop, its summaries) — so agents
//! taking turns decode only what is new to each — the longest prefix a prompt shares with any
//! sequence is reused. The least recently used idle sequence is emptied when the cells run out.
//! A cancelled or failed job's sequence is emptied after it.
//!
//! Running jobs are decoded together (continuous batching, `worker.rs`): prompts in chunks, then
//! one token per generating sequence per batch; a job queued meanwhile joins between batches.
//! The queue has two lanes (`queue.rs`): when more jobs wait than may run, queued interactive
//! calls (an agent's turn) go before queued background ones (the compression agent's).
//!
//! A job may also ask for its text as it is generated: whole UTF-8 pieces go into a bounded
//! channel; a reader that is slow pauses its own sequence (the others go on), and one that
//! stops reading (drops the receiver) ends the job.

pub mod baseline;
mod batch;
mod exit;
mod job_setup;
mod pieces;
mod queue;
mod sequences;
mod worker;

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use troupe_protocol::RequestPriority;
use troupe_protocol::sync::lock;

use super::LocalModelError;
use queue::JobQueue;

/// Serialises `LlamaModel::new_context` (see `worker`).
static CONTEXT_CREATION: Mutex<()> = Mutex::new(());

/// Tokens decoded per batch (prompt chunks and generated tokens together).
const BATCH: u32 = 512;

/// KV sequences in a context: the conversations whose tokens stay cached at once. The cells
/// are shared (a unified cache), so idle sequences cost only the cells they hold.
const SEQUENCES: u32 = 16;

/// How an engine is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct EngineOptions {
    /// Upper bound of the context window to allocate (the GGUF's training context may be
    /// larger than RAM allows).
    pub max_context: u32,
    /// CPU threads for decoding.
    pub threads: usize,
    /// Jobs decoded together at most (at least 1, at most `SEQUENCES / 2`, so a job that
    /// joins always finds an idle sequence and conversations keep theirs).
    pub parallel: usize,
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
    /// The agent that asks: with the lane and the conversation, which KV sequence the job
    /// continues.
    pub agent: Option<String>,
    /// Which of the asker's conversations the job continues: a hash of how it starts (its
    /// system prompt), so one asker's separate conversations — the compression agent's tool
    /// loop and its summaries — keep a sequence each instead of cutting one another's.
    pub conversation: u64,
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
    /// Leading prompt tokens already in the KV cache, not decoded again.
    pub reused_tokens: usize,
}

/// What the engine did for one finished call: the benchmarks' record, replayed by
/// [`baseline::Baseline::run_call`] to time llama.cpp doing the same decoding.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallRecord {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Leading prompt tokens its sequence already held (not decoded).
    pub reused_tokens: usize,
    /// Tokens generated.
    pub output_tokens: usize,
    /// From joining to the prompt's last token decoded (tokenizing and claiming included).
    pub prompt_time: Duration,
    /// From the first token sampled to the last.
    pub generation_time: Duration,
}

/// Calls kept for [`Engine::take_calls`] (the oldest go first).
const CALLS_KEPT: usize = 256;

/// What the worker has done, for benchmarks.
#[derive(Debug, Default)]
pub(crate) struct EngineStats {
    /// Prompt tokens decoded (those reused from the cache not counted).
    prompt_tokens_decoded: AtomicU64,
    /// The calls finished since the last [`Engine::take_calls`], at most [`CALLS_KEPT`].
    calls: Mutex<std::collections::VecDeque<CallRecord>>,
}

impl EngineStats {
    /// Note a finished call.
    fn record(&self, call: CallRecord) {
        let mut calls = lock(&self.calls);
        if calls.len() == CALLS_KEPT {
            calls.pop_front();
        }
        calls.push_back(call);
    }
}

type Reply = tokio::sync::oneshot::Sender<Result<Generation, LocalModelError>>;

/// A loaded model with its worker.
pub(crate) struct Engine {
    model: &'static LlamaModel,
    template: Option<LlamaChatTemplate>,
    name: String,
    context_window: usize,
    jobs: Arc<JobQueue<(Job, Reply)>>,
    stats: Arc<EngineStats>,
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
    let stats = Arc::new(EngineStats::default());
    let worker_stats = Arc::clone(&stats);
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let threads = i32::try_from(options.threads.max(1)).unwrap_or(1);
    std::thread::Builder::new()
        .name("troupe-llama".to_string())
        .spawn(move || {
            let setup = worker::Setup {
                model,
                n_ctx,
                threads,
                parallel: options.parallel.clamp(1, SEQUENCES as usize / 2),
            };
            worker::run(setup, queue, ready_tx, worker_stats)
        })
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
        stats,
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

    /// Prompt tokens decoded since the engine started (reused ones not counted).
    pub(crate) fn prompt_tokens_decoded(&self) -> u64 {
        self.stats.prompt_tokens_decoded.load(Ordering::Relaxed)
    }

    /// The calls finished since the last time they were taken, oldest first.
    pub(crate) fn take_calls(&self) -> Vec<CallRecord> {
        lock(&self.stats.calls).drain(..).collect()
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

fn context_params(n_ctx: u32, threads: i32) -> LlamaContextParams {
    LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(BATCH)
        .with_n_ubatch(BATCH)
        .with_n_threads(threads)
        .with_n_threads_batch(threads)
        .with_n_seq_max(SEQUENCES)
        // One pool of cells for all sequences: each may use the whole window, and a prefix
        // shared between sequences is held once.
        .with_kv_unified(true)
}
