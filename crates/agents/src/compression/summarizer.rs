//! [`ModelSummarizer`]: any [`ChatModel`] as the compaction crate's [`Summarizer`], with the
//! mechanical summarizer behind it for answers that cannot be trusted.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use troupe_compaction::summary::{
    InlineSummary, MechanicalSummarizer, Summarizer, SummarizerError, SummaryPrompt, vet_summary,
};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, RequestPriority, ToolChoice, ToolDefinition, sync,
};

use crate::compaction_settings::shared_counter;

/// Summaries written by a chat model (tier 3 of compaction).
///
/// A model that fails, or whose answer fails [`vet_summary`] — the bare section skeleton, a
/// JSON blob looping until the token limit, the prompt read back, a note about work the
/// transcript never mentions, an answer far over its budget — would otherwise replace real
/// messages with nothing, or with fiction. Then the [`MechanicalSummarizer`] answers the same
/// prompt instead (user requests quoted, tools used, decisions, errors), a warning is logged, and
/// [`ModelSummarizer::take_fallbacks`] says which check failed.
///
/// When the model is the asking agent's own ([`ModelSummarizer::with_agent_prompt`]), a
/// segment is summarized by continuing the agent's conversation: the request is the agent's
/// messages as it sent them, its tool definitions, and the instruction last, so a caching
/// provider (or the local engine's kept prefix) reads all but the instruction from its cache.
/// An unusable answer there is asked again with the separate prompt before the mechanical
/// summary stands in.
#[derive(Clone)]
pub struct ModelSummarizer {
    model: Arc<dyn ChatModel>,
    /// Why the mechanical summary stood in, once per time it did (shared by clones).
    fallbacks: Arc<Mutex<Vec<String>>>,
    /// The agent's tool definitions and their tokens, when the model is the agent's own.
    agent_tools: Option<(Arc<[ToolDefinition]>, usize)>,
}

impl ModelSummarizer {
    /// Summarize with `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelSummarizer {
            model,
            fallbacks: Arc::default(),
            agent_tools: None,
        }
    }

    /// The model is the asking agent's own, which sends `tools` with every call: summaries
    /// continue the agent's conversation, with these tools (they come ahead of the messages in
    /// the prompt a provider caches) and `tool_choice: none`.
    pub fn with_agent_prompt(mut self, tools: Vec<ToolDefinition>) -> Self {
        // Counted as the agent counts them: as JSON, which is how providers receive them.
        let tokens = if tools.is_empty() {
            0
        } else {
            shared_counter().count(&serde_json::to_string(&tools).unwrap_or_default())
        };
        self.agent_tools = Some((tools.into(), tokens));
        self
    }

    /// Why the mechanical summary was used instead of the model's, one entry per time, oldest
    /// first; taking them empties the list. The compression agent adds them to the report.
    pub fn take_fallbacks(&self) -> Vec<String> {
        std::mem::take(&mut *sync::lock(&self.fallbacks))
    }

    /// The model's name.
    pub fn model_name(&self) -> String {
        self.model.info().name
    }

    /// Say that the model's answer (`on` which prompt) was not used, `why`, and what `then`
    /// stood in: a warning, and a line of [`ModelSummarizer::take_fallbacks`].
    fn fell_back(&self, on: &str, why: &str, then: &str) {
        let model = self.model.info().name;
        tracing::warn!(model = %model, reason = %why, "the summarizer model gave no usable summary{on}; {then}");
        sync::lock(&self.fallbacks).push(format!(
            "summarizer model `{model}` gave no usable summary{on} ({why}); {then}"
        ));
    }

    /// The model's answer to `request` if [`vet_summary`] trusts it as a summary for `prompt`;
    /// else why not (the call failed, or the check that rejected it).
    async fn ask_vetted(
        &self,
        request: ChatRequest,
        prompt: &SummaryPrompt,
    ) -> Result<String, String> {
        let response = self.model.chat(request).await.map_err(|e| e.to_string())?;
        let text = response.message.text();
        vet_summary(&text, prompt, shared_counter().as_ref())
            .map_err(|rejection| rejection.to_string())?;
        Ok(text)
    }
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    fn context_window(&self) -> usize {
        self.model.info().context_window
    }

    async fn summarize(&self, prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system(prompt.system.clone()).into(),
                ChatMessage::user(prompt.user.clone()).into(),
            ],
            tool_choice: ToolChoice::None,
            temperature: Some(0.2),
            max_tokens: u32::try_from(prompt.max_output_tokens).ok(),
            // A long summarizer prefill must not sit ahead of an agent's call on a model with
            // one queue (the local model): the agents' own calls go first.
            priority: RequestPriority::Background,
            ..ChatRequest::default()
        };
        let why = match self.ask_vetted(request, &prompt).await {
            Ok(text) => return Ok(text),
            Err(why) => why,
        };
        self.fell_back("", &why, "used the mechanical summary");
        MechanicalSummarizer::new().summarize(prompt).await
    }

    fn inline_overhead(&self) -> Option<usize> {
        self.agent_tools.as_ref().map(|(_, tokens)| *tokens)
    }

    async fn summarize_inline(&self, request: InlineSummary) -> Result<String, SummarizerError> {
        let Some((tools, _)) = &self.agent_tools else {
            return self.summarize(request.prompt).await;
        };
        let chat = ChatRequest {
            messages: request.messages.into_iter().map(Arc::new).collect(),
            // The agent's tools stay in the request so its prefix is the agent's; the answer is
            // text (a weak model asked with `auto` and a user message last calls a tool).
            tools: tools.to_vec(),
            tool_choice: ToolChoice::None,
            temperature: Some(0.2),
            max_tokens: u32::try_from(request.prompt.max_output_tokens).ok(),
            priority: RequestPriority::Background,
            // Filled in by the traced model (the compression agent's name).
            agent: None,
            // A summary is prose, whatever format the agent's own request asked for.
            response_format: None,
        };
        // Vetted against the separate prompt: its material is the segment.
        let why = match self.ask_vetted(chat, &request.prompt).await {
            Ok(text) => return Ok(text),
            Err(why) => why,
        };
        self.fell_back(
            " on the agent's prompt",
            &why,
            "asked again with a prompt of its own",
        );
        Err(SummarizerError::Failed(why))
    }
}
