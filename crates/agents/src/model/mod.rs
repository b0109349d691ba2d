//! Model providers behind [`troupe_runtime::ChatModel`].
//!
//! - [`openai`]: any OpenAI-compatible HTTP server (the only module that knows `async-openai`);
//! - [`local`] (feature `local`, on by default): llama.cpp in process, the offline default;
//! - [`replay`]: record any provider's calls to JSONL and serve them back in tests;
//! - [`scripted`]: a fixed script, for tests and demos;
//! - [`select`]: which model compaction uses, and [`default_model`].

#[cfg(feature = "local")]
pub mod local;
mod observed_stream;
pub mod openai;
pub mod replay;
pub mod retry;
pub mod scripted;
pub mod select;
mod traced;

#[cfg(feature = "local")]
pub use local::{LocalModel, LocalModelConfig, LocalModelError};
pub use openai::{OpenAiConfig, OpenAiModel};
pub use replay::{RecordingModel, ReplayModel};
pub use retry::RetryPolicy;
pub use scripted::{ScriptedModel, ScriptedReply};
pub use select::{
    CompactionModel, ConfiguredModel, compaction_model, default_model, openai_configured,
};
pub use traced::{TracedModel, tool_span, traced_chat, traced_chat_stream};

/// An answer a provider reads delta by delta, after its first delta was read (so that errors
/// before the answer started are the call's, and retried, not the stream's).
pub(crate) trait DeltaReader: Send + Sized + 'static {
    /// The next delta; `None` at the end.
    fn next_delta(
        &mut self,
    ) -> impl std::future::Future<
        Output = Option<Result<troupe_runtime::ModelDelta, troupe_runtime::ModelError>>,
    > + Send;

    /// This answer as a stream that starts with `first` (the delta already read).
    fn into_stream(self, first: troupe_runtime::ModelDelta) -> troupe_runtime::ChatStream {
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
