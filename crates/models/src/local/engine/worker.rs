//! The inference thread: one llama.cpp context, its sequences (`sequences.rs`), and every
//! running job decoded together (continuous batching).
//!
//! Each pass builds one batch: the token each generating job sampled last (one per sequence),
//! then chunks of the prompts still being decoded, interactive jobs' first, up to `BATCH` tokens;
//! then it samples the next token of every job whose logits the batch produced. A job queued
//! meanwhile joins between passes while fewer than `parallel` run; when more wait, the queue
//! hands out interactive ones first. A job whose reader is slow keeps its text in an outbox and
//! sits out the passes until the reader takes it: only its own sequence pauses.
//!
//! When the cells run out, the least recently used idle sequence is emptied; when none is idle,
//! the job that joined last steps back (it waits for the others to finish and starts again) or,
//! when it has already streamed text, fails. A cancelled or failed job's sequence is emptied: what
//! it decoded is not trusted by the next job.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use llama_cpp_2::DecodeError;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use troupe_protocol::RequestPriority;
use troupe_protocol::sync::lock;

use super::batch::{Part, build};
use super::exit::inside_llama;
use super::job_setup::prepare;
use super::pieces::Utf8Pieces;
use super::queue::JobQueue;
use super::sequences::{KvCells, Sequences};
use super::{
    BATCH, CONTEXT_CREATION, CallRecord, EngineStats, Generation, Job, Reply, SEQUENCES, Stop,
    backend, context_params,
};
use crate::local::LocalModelError;

/// How long the thread sleeps when every running job waits for its reader.
const READERS_BUSY: Duration = Duration::from_millis(1);

/// One job being served.
pub(super) struct Running {
    pub(super) job: Job,
    reply: Reply,
    pub(super) seq: usize,
    pub(super) prompt: Vec<LlamaToken>,
    /// Leading prompt tokens the sequence already held.
    reused: usize,
    /// The next prompt token to decode.
    pub(super) next: usize,
    sampler: LlamaSampler,
    budget: usize,
    produced: usize,
    /// The token sampled last, not yet decoded.
    pub(super) pending: Option<LlamaToken>,
    /// Where its logits are in the batch just decoded.
    logits: Option<i32>,
    text: String,
    pieces: Utf8Pieces,
    /// Text the reader has not taken yet (its channel was full).
    pub(super) outbox: VecDeque<String>,
    /// Set once generation has ended; the job finishes when its outbox is empty.
    pub(super) stop: Option<Stop>,
    started: Instant,
    prompt_time: Duration,
    generation_started: Option<Instant>,
    /// Join order: the job that joined last steps back when the cells run out.
    pub(super) joined: u64,
}

impl Running {
    pub(super) fn prefilling(&self) -> bool {
        self.stop.is_none() && self.next < self.prompt.len()
    }

    pub(super) fn interactive(&self) -> bool {
        self.job.priority == RequestPriority::Interactive
    }
}

/// The KV cache of one context, as the sequence bookkeeping sees it.
pub(super) struct Cells<'a>(pub(super) &'a mut LlamaContext<'static>);

impl KvCells for Cells<'_> {
    fn truncate(&mut self, seq: usize, from: usize) -> bool {
        let seq = u32::try_from(seq).ok();
        let from = u32::try_from(from).ok().filter(|&f| f > 0);
        matches!(self.0.clear_kv_cache_seq(seq, from, None), Ok(true))
    }

    fn share_prefix(&mut self, src: usize, dst: usize, len: usize) {
        let (Ok(src), Ok(dst), Ok(len)) =
            (i32::try_from(src), i32::try_from(dst), u32::try_from(len))
        else {
            return;
        };
        // Positions below `i32::MAX` always convert.
        let _ = self.0.copy_kv_cache_seq(src, dst, None, Some(len));
    }
}

/// What the thread is started with.
pub(super) struct Setup {
    pub model: &'static LlamaModel,
    /// Context window to allocate.
    pub n_ctx: u32,
    pub threads: i32,
    /// Jobs decoded together at most.
    pub parallel: usize,
}

/// Everything the thread owns.
struct Worker {
    model: &'static LlamaModel,
    n_ctx: u32,
    threads: i32,
    parallel: usize,
    context: Option<LlamaContext<'static>>,
    sequences: Sequences,
    running: Vec<Running>,
    /// Jobs that stepped back when the cells ran out: they start again once nothing runs.
    parked: VecDeque<(Job, Reply)>,
    joined: u64,
    stats: Arc<EngineStats>,
}

/// The thread's body: serves jobs until the queue is closed and drained.
pub(super) fn run(
    setup: Setup,
    queue: Arc<JobQueue<(Job, Reply)>>,
    ready: mpsc::SyncSender<Result<usize, LocalModelError>>,
    stats: Arc<EngineStats>,
) {
    let mut worker = Worker {
        model: setup.model,
        n_ctx: setup.n_ctx,
        threads: setup.threads,
        parallel: setup.parallel,
        context: None,
        sequences: Sequences::new(SEQUENCES as usize),
        running: Vec::new(),
        parked: VecDeque::new(),
        joined: 0,
        stats,
    };
    match worker.new_context() {
        Ok(c) => {
            let _ = ready.send(Ok(c.n_ctx() as usize));
            worker.context = Some(c);
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    }
    let mut batch = LlamaBatch::new(BATCH as usize, 1);
    loop {
        if worker.running.is_empty() {
            // Nothing runs: a job that stepped back goes first, else wait for the queue.
            let next = worker.parked.pop_front().or_else(|| queue.pop());
            match next {
                Some((job, reply)) => worker.join(job, reply),
                None => return,
            }
        }
        while worker.running.len() < worker.parallel && worker.parked.is_empty() {
            match queue.try_pop() {
                Some((job, reply)) => worker.join(job, reply),
                None => break,
            }
        }
        worker.settle();
        if worker.running.is_empty() {
            continue;
        }
        // A panic inside llama-cpp-2 must not take the thread (and every later request) down:
        // the context it left behind is dropped and rebuilt for the next job.
        let pass =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.pass(&mut batch)));
        match pass {
            Ok(true) => {}
            Ok(false) => std::thread::sleep(READERS_BUSY),
            Err(_) => worker.lose_context(),
        }
        worker.settle();
    }
}

impl Worker {
    fn new_context(&self) -> Result<LlamaContext<'static>, LocalModelError> {
        // llama.cpp's context constructor mutates the model; never run two at once.
        let _creating = lock(&CONTEXT_CREATION);
        let backend = backend()?;
        inside_llama(|| {
            self.model
                .new_context(backend, context_params(self.n_ctx, self.threads))
        })
        .map_err(|e| LocalModelError::Load(format!("cannot create a llama.cpp context: {e}")))
    }

    /// Start `job`: tokenize it, claim its sequence (cut to the prefix it reuses), build its
    /// sampler. A job that cannot start is answered at once.
    fn join(&mut self, job: Job, reply: Reply) {
        if job.cancel.load(Ordering::Relaxed) || reply.is_closed() {
            return;
        }
        let started = Instant::now();
        let ctx = match self.context.take().map_or_else(|| self.new_context(), Ok) {
            Ok(c) => self.context.insert(c),
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let model = self.model;
        let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            prepare(model, ctx, &mut self.sequences, &job)
        }));
        let (claim, prompt, sampler, budget) = match joined {
            Ok(Ok(Some(prepared))) => prepared,
            // Every sequence busy: cannot happen below `parallel`; wait like a stepped-back job.
            Ok(Ok(None)) => {
                self.parked.push_back((job, reply));
                return;
            }
            Ok(Err(e)) => {
                let _ = reply.send(Err(e));
                return;
            }
            Err(_) => {
                let _ = reply.send(Err(panicked()));
                self.lose_context();
                return;
            }
        };
        self.joined += 1;
        self.running.push(Running {
            job,
            reply,
            seq: claim.seq,
            reused: claim.reused,
            next: claim.reused,
            prompt,
            sampler,
            budget,
            produced: 0,
            pending: None,
            logits: None,
            text: String::new(),
            pieces: Utf8Pieces::default(),
            outbox: VecDeque::new(),
            stop: None,
            started,
            prompt_time: Duration::ZERO,
            generation_started: None,
            joined: self.joined,
        });
    }

    /// Hand out waiting text; answer and remove the jobs that are done, cancelled or whose
    /// reader went away.
    fn settle(&mut self) {
        let mut i = 0;
        while i < self.running.len() {
            let r = &mut self.running[i];
            let gone = r.job.cancel.load(Ordering::Relaxed) || r.reply.is_closed();
            let outcome = if gone || deliver(r).is_err() {
                Some(Err(LocalModelError::Cancelled))
            } else {
                match r.stop {
                    Some(stop) if r.outbox.is_empty() => Some(Ok(stop)),
                    _ => None,
                }
            };
            match outcome {
                Some(outcome) => {
                    let r = self.running.swap_remove(i);
                    self.finish(r, outcome);
                }
                None => i += 1,
            }
        }
    }

    /// Answer `r`: its sequence keeps what it decoded when it ended well, and is emptied when
    /// it failed.
    fn finish(&mut self, r: Running, outcome: Result<Stop, LocalModelError>) {
        let result = match outcome {
            Ok(stop) => {
                self.sequences.release(r.seq);
                let generation = Generation {
                    text: r.text,
                    prompt_tokens: r.prompt.len(),
                    output_tokens: r.produced,
                    stop,
                    prompt_time: r.prompt_time,
                    generation_time: r.generation_started.map_or(Duration::ZERO, |s| s.elapsed()),
                    reused_tokens: r.reused,
                };
                self.stats.record(CallRecord {
                    prompt_tokens: generation.prompt_tokens,
                    reused_tokens: generation.reused_tokens,
                    output_tokens: generation.output_tokens,
                    prompt_time: generation.prompt_time,
                    generation_time: generation.generation_time,
                });
                Ok(generation)
            }
            Err(e) => {
                match self.context.as_mut() {
                    Some(ctx) => self.sequences.discard(r.seq, &mut Cells(ctx)),
                    None => self.sequences.release(r.seq),
                }
                Err(e)
            }
        };
        let _ = r.reply.send(result);
    }

    /// The context panicked: every running job fails, nothing is cached any more.
    fn lose_context(&mut self) {
        self.context = None;
        self.sequences.forget_all();
        for r in std::mem::take(&mut self.running) {
            let _ = r.reply.send(Err(panicked()));
        }
    }

    /// One batch: build, decode, sample. `false` when no job could add anything (every one
    /// waits for its reader).
    fn pass(&mut self, batch: &mut LlamaBatch<'static>) -> bool {
        let Some(ctx) = self.context.as_mut() else {
            self.lose_context();
            return true;
        };
        let plan = match build(batch, &self.running, &self.sequences) {
            Ok(plan) => plan,
            Err(e) => {
                self.fail_all(&e);
                return true;
            }
        };
        if plan.is_empty() {
            return false;
        }
        match inside_llama(|| ctx.decode(batch)) {
            Ok(()) => {}
            Err(DecodeError::NoKvCacheSlot) => {
                self.make_room(&plan);
                return true;
            }
            Err(e) => {
                let e = LocalModelError::Inference(format!("decode: {e}"));
                let failed: Vec<usize> = plan.iter().map(|(i, ..)| *i).collect();
                self.fail(&failed, &e);
                return true;
            }
        }
        for (i, part, logits) in plan {
            let r = &mut self.running[i];
            match part {
                Part::Token(token) => {
                    self.sequences.extend(r.seq, &[token]);
                    r.pending = None;
                }
                Part::Prompt(from, to) => {
                    self.sequences.extend(r.seq, &r.prompt[from..to]);
                    self.stats
                        .prompt_tokens_decoded
                        .fetch_add((to - from) as u64, Ordering::Relaxed);
                    r.next = to;
                    if to == r.prompt.len() {
                        r.prompt_time = r.started.elapsed();
                    }
                }
            }
            r.logits = logits;
        }
        let vocab = self.model.vocab();
        let mut bytes = Vec::new();
        for r in &mut self.running {
            let Some(at) = r.logits.take() else {
                continue;
            };
            if r.produced >= r.budget {
                r.stop = Some(Stop::Length);
            } else {
                r.generation_started.get_or_insert_with(Instant::now);
                let token = r.sampler.sample(ctx, at);
                // Control tokens (`<|im_start|>` …) also end the turn: a model that opens a new
                // turn has finished this one.
                if vocab.is_eog(token) || vocab.is_control(token) {
                    r.stop = Some(Stop::EndOfTurn);
                } else {
                    bytes.clear();
                    vocab.token_to_piece_into(token, &mut bytes, false, None);
                    if let Some(piece) = r.pieces.push(&bytes) {
                        post(r, piece);
                    }
                    r.produced += 1;
                    if r.produced >= r.budget {
                        r.stop = Some(Stop::Length);
                    } else {
                        r.pending = Some(token);
                    }
                }
            }
            if r.stop.is_some()
                && let Some(piece) = r.pieces.finish()
            {
                post(r, piece);
            }
        }
        true
    }

    /// The cells ran out for `plan`: empty the least recently used idle sequence, else the job
    /// that joined last steps back (or fails, when it has already streamed text, or runs alone).
    fn make_room(&mut self, plan: &[(usize, Part, Option<i32>)]) {
        if let Some(ctx) = self.context.as_mut()
            && self.sequences.evict_idle(&mut Cells(ctx))
        {
            return;
        }
        let Some(last) = plan
            .iter()
            .map(|(i, ..)| *i)
            .max_by_key(|&i| self.running[i].joined)
        else {
            return;
        };
        let r = &self.running[last];
        if r.produced == 0 && self.running.len() > 1 {
            let r = self.running.swap_remove(last);
            if let Some(ctx) = self.context.as_mut() {
                self.sequences.discard(r.seq, &mut Cells(ctx));
            }
            self.parked.push_back((r.job, r.reply));
        } else {
            let e = LocalModelError::Inference(format!(
                "the KV cache is full: {} requests at once need more than its {} cells",
                self.running.len(),
                self.n_ctx
            ));
            self.fail(&[last], &e);
        }
    }

    /// Fail the running jobs at `indices` with `e`.
    fn fail(&mut self, indices: &[usize], e: &LocalModelError) {
        let mut indices = indices.to_vec();
        // Highest first: `swap_remove` moves only jobs past the one removed.
        indices.sort_unstable_by(|a, b| b.cmp(a));
        indices.dedup();
        for i in indices {
            let r = self.running.swap_remove(i);
            self.finish(r, Err(copy_error(e)));
        }
    }

    fn fail_all(&mut self, e: &LocalModelError) {
        let all: Vec<usize> = (0..self.running.len()).collect();
        self.fail(&all, e);
    }
}

/// Queue `piece` for the job's reader, if it has one.
fn post(r: &mut Running, piece: String) {
    if r.job.pieces.is_some() {
        r.outbox.push_back(piece.clone());
    }
    r.text.push_str(&piece);
}

/// Hand the job's waiting text to its reader as far as the channel has room; `Err` when the
/// reader is gone.
fn deliver(r: &mut Running) -> Result<(), ()> {
    let Some(listener) = &r.job.pieces else {
        r.outbox.clear();
        return Ok(());
    };
    while let Some(piece) = r.outbox.pop_front() {
        match listener.try_send(piece) {
            Ok(()) => {}
            Err(tokio::sync::mpsc::error::TrySendError::Full(piece)) => {
                r.outbox.push_front(piece);
                break;
            }
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => return Err(()),
        }
    }
    Ok(())
}

fn panicked() -> LocalModelError {
    LocalModelError::Inference("llama.cpp panicked during generation".into())
}

/// The same error again, for each job a shared failure ends.
fn copy_error(e: &LocalModelError) -> LocalModelError {
    match e {
        LocalModelError::Cancelled => LocalModelError::Cancelled,
        other => LocalModelError::Inference(other.to_string()),
    }
}
