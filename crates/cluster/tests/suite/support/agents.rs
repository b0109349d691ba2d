//! The agents the test nodes host: plain behaviours, no model.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint,
};

/// How many requests the `counter` agents of this process handled.
pub(crate) static COUNTED: AtomicUsize = AtomicUsize::new(0);

/// Answers `TEXT@NODE`; `panic` panics, `sleep MS` sleeps first, `count` counts, `trace` answers
/// the request's trace id, `format` the response format it was given (`name schema`, or `none`),
/// `ask NAME TEXT` asks another agent (maybe on another node).
struct TestAgent {
    node: String,
}

#[async_trait]
impl AgentBehavior for TestAgent {
    async fn handle(
        &mut self,
        request: AgentRequest,
        ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        let text = request.text.as_str();
        if text == "panic" {
            panic!("boom: told to panic on node {}", self.node);
        }
        if text == "count" {
            COUNTED.fetch_add(1, Ordering::SeqCst);
        }
        if text == "trace" {
            return Ok(request.trace.id().to_string());
        }
        if text == "format" {
            return Ok(request.response_format.map_or_else(
                || "none".to_string(),
                |f| format!("{} {}", f.name, f.schema),
            ));
        }
        if let Some(ms) = text.strip_prefix("sleep ") {
            tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(0))).await;
        }
        if let Some(rest) = text.strip_prefix("ask ") {
            let (name, question) = rest.split_once(' ').unwrap_or((rest, ""));
            let asked = AgentRequest {
                from: Some(ctx.name.clone()),
                text: question.to_string(),
                trace: request.trace.child(),
                response_format: None,
                request_id: None,
            };
            return ctx
                .directory
                .ask(name, asked, Duration::from_secs(30))
                .await
                .map_err(|e| AgentError::Failed(e.to_string()));
        }
        Ok(format!("{text}@{}", self.node))
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }
}

/// The factory of a test agent on node `node` (the agent's name does not change what it does).
pub(crate) fn factory(_name: &str, node: &str) -> BehaviorFactory {
    let node = node.to_string();
    Arc::new(move |_| Ok(Box::new(TestAgent { node: node.clone() }) as Box<dyn AgentBehavior>))
}
