//! Scoped compression (seed 000): a closed scope's messages become one summary between scope
//! markers, written by the compression agent with the model the caller names.

use std::sync::Arc;

use troupe_protocol::{ChatMessage, ChatModel, MessageId, MessageKind};
use troupe_runtime::AgentContext;

use crate::compression::{COMPRESSION_AGENT, ScopeSummaryRequest, summarize_scope};

use super::LlmAgent;
use super::jobs::ScopeError;
use super::request::RequestContext;

/// An agent's open scopes, and the model that summarized the last one closed.
#[derive(Default)]
pub(super) struct Scopes {
    /// Open scopes, innermost last: label and the first id that belongs to it.
    open: Vec<(String, MessageId)>,
    /// The model a scope closed without naming one is summarized with.
    last_model: Option<Arc<dyn ChatModel>>,
}

impl Scopes {
    /// Open a scope labelled so, from message `first` on.
    pub(super) fn open(&mut self, label: String, first: MessageId) {
        self.open.push((label, first));
    }

    /// The conversation they belong to is gone (`/clear`, `/resume`): no scope is open.
    pub(super) fn forget_open(&mut self) {
        self.open.clear();
    }
}

impl LlmAgent {
    /// Close the innermost scope: its messages become one summary between scope markers.
    pub(super) async fn close_scope(
        &mut self,
        prompt: Option<String>,
        model: Option<Arc<dyn ChatModel>>,
        ctx: &AgentContext,
        job: &RequestContext,
    ) -> Result<Option<String>, ScopeError> {
        let (label, start) = self
            .scopes
            .open
            .last()
            .cloned()
            .ok_or(ScopeError::NoScope)?;
        let model = model
            .or_else(|| self.scopes.last_model.clone())
            .ok_or(ScopeError::NoModel)?;
        self.scopes.open.pop();
        let first = self
            .context
            .conversation
            .messages()
            .iter()
            .position(|m| m.id >= start);
        let Some(first) = first else { return Ok(None) };
        let entries: Vec<ChatMessage> = self.context.conversation.messages()[first..]
            .iter()
            .map(|m| ChatMessage::clone(m))
            .collect();
        if !ctx.directory.is_live(COMPRESSION_AGENT) {
            self.scopes.open.push((label, start));
            return Err(ScopeError::NoCompressionAgent);
        }
        let request = ScopeSummaryRequest {
            agent: ctx.name.clone(),
            label: label.clone(),
            messages: entries.clone(),
            prompt,
            model: model.clone(),
            spend: Some(self.spend.clone()),
        };
        let answer = summarize_scope(&ctx.directory, job.trace.child(), request).await;
        let summary = match answer {
            Ok(Ok(summary)) => summary,
            Ok(Err(e)) => {
                self.scopes.open.push((label, start));
                return Err(ScopeError::Scope(e));
            }
            Err(e) => {
                self.scopes.open.push((label, start));
                return Err(ScopeError::Ask(e));
            }
        };
        let mut kept: Vec<Arc<ChatMessage>> =
            self.context.conversation.messages()[..first].to_vec();
        let id = self.context.conversation.allocate_id();
        let mut marker =
            ChatMessage::user(format!("<scope label=\"{label}\">\n{summary}\n</scope>"))
                .with_kind(MessageKind::Summary);
        marker.id = id;
        self.context.archive.record_replacement(id, &entries);
        kept.push(Arc::new(marker));
        self.context.conversation.replace_shared(kept);
        self.ahead.rewritten("a scope was closed");
        self.scopes.last_model = Some(model);
        Ok(Some(summary))
    }
}
