//! A small behaviour for supervisor tests: it remembers what it was told and can be made to fail.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use troupe_protocol::{ChatMessage, Conversation};
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint,
};

/// Echoes requests and keeps them in its conversation. Special requests:
/// `panic` panics, `fatal` returns a fatal error, `sleep <ms>` sleeps, `ask <agent> <text>` asks
/// another agent, `history` answers with every user message so far, `shout` rewrites every
/// message so far in capitals (as a compaction rewrites history). Its checkpoint follows the
/// conversation with `Conversation::catch_up`, as an `LlmAgent`'s does.
pub struct Echo {
    conversation: Conversation,
}

pub fn echo_factory() -> BehaviorFactory {
    Arc::new(|checkpoint: Option<Checkpoint>| {
        let conversation = checkpoint.map(|c| c.conversation).unwrap_or_default();
        Ok(Box::new(Echo { conversation }) as Box<dyn AgentBehavior>)
    })
}

#[async_trait]
impl AgentBehavior for Echo {
    async fn handle(
        &mut self,
        request: AgentRequest,
        ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let text = request.text.clone();
        if text == "panic" {
            panic!("boom: the echo agent was told to panic");
        }
        if text == "fatal" {
            return Err(AgentError::Fatal("told to fail".into()));
        }
        if text == "history" {
            let seen: Vec<String> = self
                .conversation
                .messages()
                .iter()
                .map(|m| m.text())
                .collect();
            return Ok(seen.join("|"));
        }
        if text == "shout" {
            let shouted = self
                .conversation
                .messages()
                .iter()
                .map(|m| {
                    let mut m = ChatMessage::clone(m);
                    m.set_text(m.text().to_uppercase());
                    m
                })
                .collect();
            self.conversation.replace_messages(shouted);
            return Ok("shouted".into());
        }
        if let Some(ms) = text.strip_prefix("sleep ") {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
        }
        self.conversation.push(ChatMessage::user(text.clone()));
        if let Some(rest) = text.strip_prefix("ask ") {
            let (to, what) = rest.split_once(' ').unwrap();
            let hop = AgentRequest {
                from: Some(ctx.name.clone()),
                text: what.to_string(),
                trace: request.trace.child(),
                response_format: None,
                request_id: None,
            };
            let answer = ctx
                .directory
                .ask(to, hop, Duration::from_secs(5))
                .await
                .map_err(|e| AgentError::Failed(e.to_string()))?;
            return Ok(format!("{} relayed: {answer}", ctx.name));
        }
        Ok(format!("{}: {text}", ctx.name))
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            conversation: self.conversation.clone(),
            state: Default::default(),
        }
    }

    fn update_checkpoint(&self, checkpoint: &mut Checkpoint) {
        checkpoint.conversation.catch_up(&self.conversation);
    }
}

impl Echo {
    pub fn checkpoint_len(&self) -> usize {
        self.conversation.len()
    }

    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }
}
