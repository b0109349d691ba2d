//! The models a stall replay runs on: the latency model (a formula, or a real server timing the
//! calls) and the transcript-replaying agent model.

#[allow(clippy::wildcard_imports)]
use super::*;

/// How long a model call takes, before `--time-scale`: `fixed + prompt / prefill + output /
/// decode`, tokens estimated as characters ÷ 4.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Latency {
    pub(super) fixed_s: f64,
    pub(super) prefill_tok_s: f64,
    pub(super) decode_tok_s: f64,
}

/// The agent: a hosted coding model's call, about 1 s (0.4 s + 20k-token prompt ÷ 50k tok/s +
/// 40 answer tokens ÷ 80 tok/s ≈ 1.3 s).
pub(crate) const AGENT_LATENCY: Latency = Latency {
    fixed_s: 0.4,
    prefill_tok_s: 50_000.0,
    decode_tok_s: 80.0,
};

/// The summarizer: a slower call that reads a long segment, about 10 s (1 s + 15k-token
/// prompt ÷ 2.5k tok/s + a 150-token summary ÷ 50 tok/s ≈ 10 s).
pub(crate) const SUMMARIZER_LATENCY: Latency = Latency {
    fixed_s: 1.0,
    prefill_tok_s: 2_500.0,
    decode_tok_s: 50.0,
};

/// The latency model in words, for the JSON line.
pub(crate) fn latency_description() -> String {
    let one = |l: Latency| {
        format!(
            "{} s + prompt/{} tok/s + output/{} tok/s",
            l.fixed_s, l.prefill_tok_s, l.decode_tok_s
        )
    };
    format!(
        "transcript replay (agent) + ScriptedModel summary (summarizer), each behind LatencyModel: agent {}, summarizer {}; tokens = chars/4; times x time_scale",
        one(AGENT_LATENCY),
        one(SUMMARIZER_LATENCY)
    )
}

pub(super) fn chars_to_tokens(chars: usize) -> f64 {
    chars as f64 / 4.0
}

pub(super) fn message_chars(m: &ChatMessage) -> usize {
    m.text().len()
        + m.calls()
            .iter()
            .map(|c| c.function.name.len() + c.function.arguments.len())
            .sum::<usize>()
}

/// A chat model decorator that sleeps as long as [`Latency`] says a call of this size takes
/// (times `scale`), and adds the time slept to `slept_ns`.
pub(crate) struct LatencyModel {
    pub(super) inner: Arc<dyn ChatModel>,
    pub(super) latency: Latency,
    pub(super) scale: f64,
    pub(super) slept_ns: Arc<AtomicU64>,
}

#[async_trait]
impl ChatModel for LatencyModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    /// The answer is computed first, then held back for the call's time, then streamed.
    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let prompt: usize = request.messages.iter().map(|m| message_chars(m)).sum();
        let response = self.inner.chat(request).await?;
        let l = self.latency;
        let seconds = l.fixed_s
            + chars_to_tokens(prompt) / l.prefill_tok_s
            + chars_to_tokens(message_chars(&response.message)) / l.decode_tok_s;
        let pause = Duration::from_secs_f64(seconds * self.scale);
        tokio::time::sleep(pause).await;
        let ns = u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
        self.slept_ns.fetch_add(ns, Ordering::Relaxed);
        Ok(stream_response(response, 64))
    }
}

/// The agent's model against a real server: every call is also sent to `server` (the agent's
/// prompt, flattened to plain text, asking for as many tokens as the transcript's answer has),
/// and the transcript's answer comes back once the server has answered — the call takes the
/// server's real time. The server's own answer is dropped (a 135M model would not replay the
/// transcript); its failures are counted.
pub(crate) struct ServedModel {
    pub(super) inner: Arc<dyn ChatModel>,
    pub(super) server: Arc<dyn ChatModel>,
    pub(super) waited_ns: Arc<AtomicU64>,
    pub(super) failures: Arc<AtomicU64>,
}

/// A conversation as plain system/user/assistant text: tool calls and results become text, so
/// any chat template takes it.
pub(super) fn flattened(messages: &[Arc<ChatMessage>]) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| {
            let mut text = m.text();
            for call in m.calls() {
                let _ = write!(
                    text,
                    "\n[call {}] {}",
                    call.function.name, call.function.arguments
                );
            }
            match m.role {
                r if r.is_instructions() => ChatMessage::system(text),
                Role::Assistant => ChatMessage::assistant(text),
                Role::Tool => ChatMessage::user(format!("[tool result]\n{text}")),
                _ => ChatMessage::user(text),
            }
        })
        .collect()
}

#[async_trait]
impl ChatModel for ServedModel {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let messages = flattened(&request.messages);
        let response = self.inner.chat(request).await?;
        let answer_tokens = chars_to_tokens(message_chars(&response.message)).ceil() as u32;
        let mut served = ChatRequest::new(messages);
        served.max_tokens = Some(answer_tokens.clamp(1, 512));
        served.temperature = Some(0.0);
        let started = std::time::Instant::now();
        if self.server.chat(served).await.is_err() {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waited_ns.fetch_add(ns, Ordering::Relaxed);
        Ok(stream_response(response, 64))
    }
}

/// The summarizer against a real server: its answers as they come, timed.
pub(crate) struct TimedServer {
    pub(super) server: Arc<dyn ChatModel>,
    pub(super) waited_ns: Arc<AtomicU64>,
}

#[async_trait]
impl ChatModel for TimedServer {
    fn info(&self) -> ModelInfo {
        self.server.info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let started = std::time::Instant::now();
        let out = self.server.chat(request).await;
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waited_ns.fetch_add(ns, Ordering::Relaxed);
        Ok(stream_response(out?, 64))
    }
}

/// Where the models' time comes from.
#[derive(Clone)]
pub(crate) enum Clock {
    /// [`LatencyModel`] with this time scale.
    Formula(f64),
    /// A real OpenAI-compatible server (a llama.cpp `llama-server`): the agent's calls are
    /// timed by it ([`ServedModel`]), the summarizer is it.
    Server(Arc<dyn ChatModel>),
}

/// The agent's model: answers each call with the next assistant message of the request being
/// replayed; once they are used up (the transcript's request ended on tool calls), "Done.".
pub(super) struct TranscriptModel {
    pub(super) window: usize,
    pub(super) answers: Mutex<VecDeque<ChatMessage>>,
}

impl TranscriptModel {
    pub(super) fn load(&self, answers: Vec<ChatMessage>) {
        if let Ok(mut queue) = self.answers.lock() {
            *queue = answers.into();
        }
    }
}

#[async_trait]
impl ChatModel for TranscriptModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: "transcript-replay".into(),
            context_window: self.window,
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, _request: ChatRequest) -> Result<ChatStream, ModelError> {
        let next = self.answers.lock().ok().and_then(|mut q| q.pop_front());
        let message = match next {
            Some(m) if m.has_tool_calls() => {
                let text = m.text();
                let content = (!text.is_empty()).then_some(text);
                ChatMessage::assistant_tool_calls(content, m.calls().to_vec())
            }
            Some(m) => ChatMessage::assistant(m.text()),
            None => ChatMessage::assistant("Done."),
        };
        let finish_reason = if message.has_tool_calls() {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        let output_tokens = chars_to_tokens(message_chars(&message)) as u64;
        Ok(stream_response(
            ChatResponse {
                message,
                usage: Usage {
                    input_tokens: 0,
                    output_tokens,
                    ..Default::default()
                },
                finish_reason,
            },
            64,
        ))
    }
}
