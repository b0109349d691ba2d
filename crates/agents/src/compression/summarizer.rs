//! [`ModelSummarizer`]: any [`ChatModel`] as the compaction crate's [`Summarizer`], with the
//! mechanical summarizer behind it for answers that cannot be trusted.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use troupe_compaction::summary::{
    InlineSummary, MechanicalSummarizer, Summarizer, SummarizerError, SummaryPrompt,
    SummaryRejection, vet_summary,
};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ModelDelta, RequestPriority, ToolChoice, ToolDefinition,
    sync,
};

use crate::compaction_settings::shared_counter;

mod early;

/// Windows up to this many tokens are a small model's (the embedded model's is 8 192): its
/// summaries are asked with less material than the window holds.
const SMALL_WINDOW: usize = 16_384;

/// The share of a small model's window its summary request's material may take: the material
/// a quarter, the note at most a quarter (the fold's bound), the instructions and the slack the
/// rest — which also leaves room for a model whose tokenizer counts a third more than troupe's.
const SMALL_MATERIAL_SHARE: usize = 4;

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
///
/// A small model's (a window of at most 16k tokens) summary request carries only as much of the
/// segment as the note needs: its messages cut down evenly to a quarter of the window
/// ([`SummaryPrompt::within_material`]), the longest first; the mechanical summary, when it
/// stands in, still reads all of it. A summary the model cannot fill is known early: the
/// answer is read as it streams and dropped as soon as it is plainly the bare skeleton or an
/// echo of the prompt, and once the model has failed so in a compaction (one
/// `ModelSummarizer` serves one), its later summaries there are mechanical without asking it
/// again — on the embedded model each would cost a long prefill for the same skeleton.
#[derive(Clone)]
pub struct ModelSummarizer {
    model: Arc<dyn ChatModel>,
    /// Why the mechanical summary stood in, once per time it did (shared by clones).
    fallbacks: Arc<Mutex<Vec<String>>>,
    /// The agent's tool definitions and their tokens, when the model is the agent's own.
    agent_tools: Option<(Arc<[ToolDefinition]>, usize)>,
    /// Set once the model has given an answer it could not fill (shared by clones): why.
    unfit: Arc<Mutex<Option<String>>>,
}

/// Why a model's answer was not used.
enum Unusable {
    /// The call failed.
    Failed(String),
    /// The answer was refused by [`vet_summary`] (or, while it streamed, by the early check).
    Refused(SummaryRejection),
}

impl Unusable {
    fn why(&self) -> String {
        match self {
            Unusable::Failed(why) => why.clone(),
            Unusable::Refused(rejection) => rejection.to_string(),
        }
    }

    /// Whether the model showed it cannot write this kind of note at all (not merely this one
    /// too long, or a call that failed): nothing but headings, or the prompt read back.
    fn cannot_fill(&self) -> bool {
        matches!(
            self,
            Unusable::Refused(
                SummaryRejection::Empty
                    | SummaryRejection::Skeleton
                    | SummaryRejection::ThinSections { .. }
                    | SummaryRejection::EchoesPrompt(_)
            )
        )
    }
}

impl ModelSummarizer {
    /// Summarize with `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        ModelSummarizer {
            model,
            fallbacks: Arc::default(),
            agent_tools: None,
            unfit: Arc::default(),
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
    /// else why not. The answer is read as it streams: one that is plainly unusable before it
    /// ends (`early::hopeless`) is dropped there, which stops the model generating it.
    async fn ask_vetted(
        &self,
        request: ChatRequest,
        prompt: &SummaryPrompt,
    ) -> Result<String, Unusable> {
        let mut stream = self
            .model
            .chat_stream(request)
            .await
            .map_err(|e| Unusable::Failed(e.to_string()))?;
        let mut text = String::new();
        while let Some(delta) = stream.next().await {
            match delta.map_err(|e| Unusable::Failed(e.to_string()))? {
                // Judged when a line completes: only whole lines are.
                ModelDelta::Text(piece) if piece.contains('\n') => {
                    text.push_str(&piece);
                    if let Some(rejection) = early::hopeless(&text) {
                        return Err(Unusable::Refused(rejection));
                    }
                }
                ModelDelta::Text(piece) => text.push_str(&piece),
                _ => {}
            }
        }
        vet_summary(&text, prompt, shared_counter().as_ref()).map_err(Unusable::Refused)?;
        Ok(text)
    }

    /// Why the model is not asked any more in this compaction, if it is not.
    fn known_unfit(&self) -> Option<String> {
        sync::lock(&self.unfit).clone()
    }

    /// Remember that the model could not fill a summary, when `unusable` shows it.
    fn note_unfit(&self, unusable: &Unusable) {
        if unusable.cannot_fill() {
            sync::lock(&self.unfit).get_or_insert_with(|| unusable.why());
        }
    }

    /// The request's material: all of it, or for a small model a quarter of its window.
    fn material(&self, prompt: &SummaryPrompt) -> SummaryPrompt {
        let window = self.model.info().context_window;
        if window > SMALL_WINDOW {
            return prompt.clone();
        }
        prompt.within_material(window / SMALL_MATERIAL_SHARE, shared_counter().as_ref())
    }
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    fn context_window(&self) -> usize {
        self.model.info().context_window
    }

    async fn summarize(&self, prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        if let Some(why) = self.known_unfit() {
            self.fell_back(
                "",
                &format!("not asked: earlier in this compaction {why}"),
                "used the mechanical summary",
            );
            return MechanicalSummarizer::new().summarize(prompt).await;
        }
        let asked = self.material(&prompt);
        let request = ChatRequest {
            messages: vec![
                ChatMessage::system(asked.system.clone()).into(),
                ChatMessage::user(asked.user.clone()).into(),
            ],
            tool_choice: ToolChoice::None,
            temperature: Some(0.2),
            max_tokens: u32::try_from(prompt.max_output_tokens).ok(),
            // A long summarizer prefill must not sit ahead of an agent's call on a model with
            // one queue (the local model): the agents' own calls go first.
            priority: RequestPriority::Background,
            ..ChatRequest::default()
        };
        let unusable = match self.ask_vetted(request, &asked).await {
            Ok(text) => return Ok(text),
            Err(unusable) => unusable,
        };
        self.note_unfit(&unusable);
        self.fell_back("", &unusable.why(), "used the mechanical summary");
        // The mechanical summary reads the whole segment, not the model's cut of it.
        MechanicalSummarizer::new().summarize(prompt).await
    }

    fn inline_overhead(&self) -> Option<usize> {
        self.agent_tools.as_ref().map(|(_, tokens)| *tokens)
    }

    async fn summarize_inline(&self, request: InlineSummary) -> Result<String, SummarizerError> {
        let Some((tools, _)) = &self.agent_tools else {
            return self.summarize(request.prompt).await;
        };
        if self.known_unfit().is_some() {
            return self.summarize(request.prompt).await;
        }
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
        let unusable = match self.ask_vetted(chat, &request.prompt).await {
            Ok(text) => return Ok(text),
            Err(unusable) => unusable,
        };
        self.fell_back(
            " on the agent's prompt",
            &unusable.why(),
            "asked again with a prompt of its own",
        );
        Err(SummarizerError::Failed(unusable.why()))
    }
}
