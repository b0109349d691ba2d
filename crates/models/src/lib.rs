//! troupe-models: the model providers behind [`troupe_protocol::ChatModel`].
//!
//! - [`OpenAiModel`]: any OpenAI-compatible HTTP server (`openai/`, the only module that knows
//!   `async-openai`);
//! - [`AnthropicModel`]: Claude through the Anthropic Messages API, with prompt caching placed
//!   by troupe (`anthropic/`, the only module that knows the Messages wire types);
//! - [`LocalModel`] (feature `local`, on by default): llama.cpp in process, the offline default;
//!   [`fetch`] finds or downloads its GGUF;
//! - [`RecordingModel`] and [`ReplayModel`]: record any provider's calls to JSONL and serve them
//!   back in tests; [`Cassettes`] does it for a whole team, one cassette per agent;
//! - [`ScriptedModel`]: a fixed script, for tests and demos;
//! - [`RateLimitedModel`]: any model under a [`RateLimit`] shared by all its callers;
//! - [`compaction_model`]: which model compaction uses, and [`default_model`];
//! - [`schema_to_grammar`]: JSON Schema → GBNF, the local model's tool-call and typed-answer
//!   grammar (a port of llama.cpp's converter, equal to it text for text).
//!
//! Every item has one path, `troupe_models::Name`: the provider modules are private. The spans
//! every call goes through (`TracedModel`) are the agents crate's: they meter an agent's spend.

mod answer_limits;
mod anthropic;
mod attempt;
mod deadlines;
mod grammar;
#[cfg(feature = "local")]
mod local;
mod observed_stream;
mod openai;
mod rate_limit;
mod replay;
mod retry;
mod scripted;
mod select;
mod sse_answer;

#[cfg(feature = "local")]
pub use local::{AutoToolCalls, LocalModel, LocalModelConfig, LocalModelError, fetch};
// The benches' raw llama.cpp baseline: public for them, not part of the documented surface.
pub use anthropic::{ANTHROPIC_BASE_URL, ANTHROPIC_VERSION, AnthropicConfig, AnthropicModel};
pub use grammar::{SchemaGrammarError, schema_to_grammar};
#[cfg(feature = "local")]
#[doc(hidden)]
pub use local::baseline;
pub use observed_stream::{StreamObserver, observe};
pub use openai::{
    AuthStyle, DEFAULT_OPENAI_MODEL, MaxTokensField, OPENAI_BASE_URL, OpenAiConfig, OpenAiModel,
    known_context_window,
};
pub use rate_limit::{RateLimit, RateLimitError, RateLimitStats, RateLimitedModel};
pub use replay::{
    CASSETTE_VERSION, CASSETTES_ENV, CassetteMode, Cassettes, DivergenceKind, REPLAY_CHUNK_CHARS,
    RecordingModel, ReplayDivergence, ReplayError, ReplayModel,
};
pub use retry::RetryPolicy;
pub use scripted::{SCRIPTED_CHUNK_CHARS, ScriptedModel, ScriptedReply};
pub use select::{
    CompactionModelSource, UnknownCompactionModel, compaction_model, default_model,
    openai_configured,
};

/// An answer a provider reads delta by delta, after its first delta was read (so that errors
/// before the answer started are the call's, and retried, not the stream's).
pub(crate) trait DeltaReader: Send + Sized + 'static {
    /// The next delta; `None` at the end.
    fn next_delta(
        &mut self,
    ) -> impl std::future::Future<
        Output = Option<Result<troupe_protocol::ModelDelta, troupe_protocol::ModelError>>,
    > + Send;

    /// This answer as a stream that starts with `first` (the delta already read).
    fn into_stream(self, first: troupe_protocol::ModelDelta) -> troupe_protocol::ChatStream {
        let rest = futures::stream::unfold(self, |mut answer| async move {
            let item = answer.next_delta().await?;
            Some((item, answer))
        });
        Box::pin(futures::StreamExt::chain(
            futures::stream::iter([Ok(first)]),
            rest,
        ))
    }
}

/// At most `max` characters of `s`, with an ellipsis when cut: provider output quoted in errors.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}
