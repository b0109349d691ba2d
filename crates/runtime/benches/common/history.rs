//! An agent that keeps its conversation the way `LlmAgent` does, and realistic messages for it.
//!
//! The `ask_history` benchmark and the memory bench ask it with histories of different lengths:
//! what a request costs must not grow with how much the agent has said before.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use troupe_protocol::{ChatMessage, Conversation, ConversationMark};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, BehaviorState,
    Checkpoint,
};

/// The corpus of real transcripts (never committed; see its README).
fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
}

/// Realistic messages to build histories from: every message of the corpus's transcripts when
/// the corpus is there, else synthetic messages of similar sizes (a user request, an assistant
/// tool call, a tool result of a few KiB, an assistant answer).
pub fn sample_messages() -> Vec<ChatMessage> {
    let mut messages = Vec::new();
    if let Ok(entries) = std::fs::read_dir(corpus_dir()) {
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        paths.sort();
        for path in paths {
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(file) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue;
            };
            if let Ok(found) = serde_json::from_value::<Vec<ChatMessage>>(file["messages"].clone())
            {
                messages.extend(found);
            }
        }
    }
    if messages.is_empty() {
        eprintln!(
            "corpus absent at {}: synthetic messages",
            corpus_dir().display()
        );
        let code = "fn handle(&mut self, request: Request) -> Result<Answer, Error> {\n".repeat(40);
        messages = vec![
            ChatMessage::user(
                "Please fix the failing test in src/parser.rs and explain why it failed.",
            ),
            ChatMessage::assistant(
                "I'll read the parser first, then run the test suite to see the failure.",
            ),
            ChatMessage::tool_result("call_1", code),
            ChatMessage::assistant(
                "The parser dropped the last token when the input ended without a newline; \
                 I changed the loop bound and the test passes now."
                    .repeat(2),
            ),
        ];
    }
    messages
}

/// `n` messages cycling through `samples`.
pub fn history_of(samples: &[ChatMessage], n: usize) -> Vec<ChatMessage> {
    samples.iter().cycle().take(n).cloned().collect()
}

/// Behaviour-specific state like an `LlmAgent`'s (ledger, archive, last report): small here.
#[derive(Debug, Default, Clone)]
struct HistoryState {
    files_touched: Vec<String>,
}

/// Keeps a conversation as `LlmAgent` does: marks where the request found it (to roll back on a
/// model error), pushes the request and an answer, and brings its checkpoint up to date after
/// every request (the new messages; the state, shared, only when it changed).
pub struct HistoryAgent {
    conversation: Conversation,
    /// Where the conversation stood when the agent was built: what a reset rewinds to.
    base_mark: ConversationMark,
    /// What a request's history is reset to between measurements.
    base: Arc<Vec<ChatMessage>>,
    /// The answer every request pushes (a realistic assistant message).
    answer: ChatMessage,
    state: HistoryState,
}

impl HistoryAgent {
    /// Go back to the base history (between measured batches, so the history stays near `n`):
    /// drop the messages the requests pushed, as a failed request's rollback does.
    pub fn reset(&mut self) {
        if !self.conversation.rewind(self.base_mark) {
            self.conversation = Conversation::from_messages(self.base.iter().cloned());
            self.base_mark = self.conversation.mark();
        }
    }

    /// How many messages the conversation holds.
    pub fn len(&self) -> usize {
        self.conversation.len()
    }
}

/// A factory for a [`HistoryAgent`] holding `history`, answering with `answer`.
pub fn history_factory(history: Vec<ChatMessage>, answer: ChatMessage) -> BehaviorFactory {
    let base = Arc::new(history);
    Arc::new(move |checkpoint: Option<Checkpoint>| {
        let conversation = match checkpoint {
            Some(c) => c.conversation,
            None => Conversation::from_messages(base.iter().cloned()),
        };
        Ok(Box::new(HistoryAgent {
            base_mark: conversation.mark(),
            conversation,
            base: base.clone(),
            answer: answer.clone(),
            state: HistoryState::default(),
        }) as Box<dyn AgentBehavior>)
    })
}

#[async_trait]
impl AgentBehavior for HistoryAgent {
    async fn handle(
        &mut self,
        request: AgentRequest,
        _ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let before = self.conversation.mark();
        self.conversation.push(ChatMessage::user(request.text));
        self.conversation.push(self.answer.clone());
        std::hint::black_box(&before);
        Ok("done".to_string())
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            conversation: self.conversation.clone(),
            state: BehaviorState::new(self.state.clone()),
        }
    }

    fn update_checkpoint(&self, checkpoint: &mut Checkpoint) {
        checkpoint.conversation.catch_up(&self.conversation);
        if checkpoint.state.get::<HistoryState>().is_none() {
            checkpoint.state = BehaviorState::new(self.state.clone());
        }
    }
}
