//! What the tool definitions a model request carries cost in the context window.
//!
//! Every request sends the tools' names, descriptions and JSON Schemas along with the
//! conversation, and they take room in the window like messages do: an MCP server with
//! thousands of tools, or one tool with a huge schema, can fill it on its own. They are counted
//! with the agent's counter (as JSON, which is how providers receive them), once per distinct
//! set — an MCP server can change its list between turns — and added to the conversation's
//! tokens wherever the context is checked or shown. When they alone reach compaction's target,
//! no compaction can make room for them: that is said once per set of tools, in the log and as
//! a [`Event::ContextWarning`].

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use troupe_protocol::sync::lock;
use troupe_protocol::{Event, ToolDefinition, TraceId};
use troupe_runtime::AgentContext;
use troupe_tokens::TokenCounter;

use super::LlmAgent;

/// The count for the last set of tool definitions seen.
#[derive(Debug, Default)]
pub(super) struct ToolTokens {
    last: Mutex<Option<Counted>>,
}

#[derive(Debug, Clone, Copy)]
struct Counted {
    /// A hash of the definitions' JSON.
    fingerprint: u64,
    tokens: usize,
    /// Whether the warning for this set went out.
    warned: bool,
}

impl ToolTokens {
    /// Tokens `definitions` cost, counted with `counter` once per distinct set.
    pub(super) fn count(
        &self,
        definitions: &[ToolDefinition],
        counter: &dyn TokenCounter,
    ) -> usize {
        let json = serde_json::to_string(definitions).unwrap_or_default();
        let mut hasher = DefaultHasher::new();
        json.hash(&mut hasher);
        let fingerprint = hasher.finish();
        let mut last = lock(&self.last);
        if let Some(counted) = *last
            && counted.fingerprint == fingerprint
        {
            return counted.tokens;
        }
        let tokens = if definitions.is_empty() {
            0
        } else {
            counter.count(&json)
        };
        *last = Some(Counted {
            fingerprint,
            tokens,
            warned: false,
        });
        tokens
    }

    /// The tokens of the last set counted, if one was.
    pub(super) fn last(&self) -> Option<usize> {
        // Copied out, so the lock is released before anyone counts afresh.
        let last = *lock(&self.last);
        last.map(|counted| counted.tokens)
    }

    /// Whether the warning about the last set counted is still to be said; from now on it is
    /// not (once per set of tools).
    fn warn_once(&self) -> bool {
        match lock(&self.last).as_mut() {
            Some(counted) if counted.warned => false,
            Some(counted) => {
                counted.warned = true;
                true
            }
            None => true,
        }
    }
}

impl LlmAgent {
    /// Tokens the tool definitions of the next model request cost.
    pub(super) fn tool_tokens(&self) -> usize {
        let counter = self.context.counter.as_ref();
        self.context
            .tool_tokens
            .count(&self.tool_definitions(), counter)
    }

    /// Tokens the tool definitions of the last model request cost (counted when it was sent),
    /// else of the next one: the context check after every turn and tool batch then costs no
    /// copy of the definitions.
    pub(super) fn request_tool_tokens(&self) -> usize {
        self.context
            .tool_tokens
            .last()
            .unwrap_or_else(|| self.tool_tokens())
    }

    /// Before a model call with `definitions`: when they alone take compaction's target or
    /// more, say so (once per set of tools).
    pub(super) fn warn_if_tools_crowd_the_context(
        &self,
        definitions: &[ToolDefinition],
        ctx: &AgentContext,
        trace_id: TraceId,
    ) {
        let counter = self.context.counter.as_ref();
        let tokens = self.context.tool_tokens.count(definitions, counter);
        let target = self.context.policy.target_tokens();
        if tokens < target || !self.context.tool_tokens.warn_once() {
            return;
        }
        tracing::warn!(
            agent = %ctx.name,
            tool_tokens = tokens,
            target,
            window = self.context.policy.context_window,
            tools = definitions.len(),
            "the tool definitions alone take {tokens} tokens, at least compaction's target of \
             {target}: no compaction can make room for them; offer this agent fewer tools (e.g. \
             `mcp:SERVER/TOOL` instead of a whole server)"
        );
        ctx.events.publish(
            Some(trace_id),
            Event::ContextWarning {
                agent: ctx.name.clone(),
                tokens: self.tokens() + tokens,
                window: self.context.policy.context_window,
            },
        );
    }
}
