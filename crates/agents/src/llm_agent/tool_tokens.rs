//! What the tool definitions a model request carries cost in the context window.
//!
//! Every request sends the tools' names, descriptions and JSON Schemas along with the
//! conversation, and they take room in the window like messages do: an MCP server with
//! thousands of tools, or one tool with a huge schema, can fill it on its own. They are counted
//! with the agent's counter (as JSON, which is how providers receive them), once per distinct
//! set — an MCP server can change its list between turns — and added to the conversation's
//! tokens wherever the context is checked or shown. A new set is first only bounded (its JSON's
//! bytes, for the BPE counters): a check far below its threshold decides on the bound, and the
//! set is tokenized only once something needs its exact count. When they alone reach compaction's target,
//! no compaction can make room for them: that is said once per set of tools, in the log and as
//! a [`Event::ContextWarning`].

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

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

#[derive(Debug, Clone)]
struct Counted {
    /// A hash of the definitions' JSON.
    fingerprint: u64,
    /// Their exact count, once something needed it.
    exact: Option<usize>,
    /// A number no smaller than the exact count, found without tokenizing (the exact count
    /// where the counter promises no bound).
    bound: usize,
    /// The definitions' JSON, kept until they are counted exactly (then dropped).
    json: Option<Arc<str>>,
    /// Whether the warning for this set went out.
    warned: bool,
}

impl Counted {
    /// A set not seen before: bounded, not tokenized (counted at once only where `counter`
    /// promises no bound).
    fn new(fingerprint: u64, json: String, empty: bool, counter: &dyn TokenCounter) -> Self {
        let (exact, bound, json) = if empty {
            (Some(0), 0, None)
        } else {
            match counter.count_upper_bound(&json) {
                Some(bound) => (None, bound, Some(Arc::from(json))),
                None => {
                    let exact = counter.count(&json);
                    (Some(exact), exact, None)
                }
            }
        };
        Counted {
            fingerprint,
            exact,
            bound,
            json,
            warned: false,
        }
    }

    /// The exact count, tokenizing the kept JSON the first time it is asked for.
    fn exact(&mut self, counter: &dyn TokenCounter) -> usize {
        if let Some(exact) = self.exact {
            return exact;
        }
        let exact = self.json.take().map_or(0, |json| counter.count(&json));
        self.exact = Some(exact);
        self.bound = exact;
        exact
    }
}

impl ToolTokens {
    /// Note `definitions` as the set in use (a new set is fingerprinted and bounded, not yet
    /// tokenized) and hand its entry to `read`.
    fn with_set<T>(
        &self,
        definitions: &[ToolDefinition],
        counter: &dyn TokenCounter,
        read: impl FnOnce(&mut Counted) -> T,
    ) -> T {
        let json = serde_json::to_string(definitions).unwrap_or_default();
        let mut hasher = DefaultHasher::new();
        json.hash(&mut hasher);
        let fingerprint = hasher.finish();
        let mut last = lock(&self.last);
        let counted = match last.take() {
            Some(counted) if counted.fingerprint == fingerprint => counted,
            _ => Counted::new(fingerprint, json, definitions.is_empty(), counter),
        };
        read(last.insert(counted))
    }

    /// Tokens `definitions` cost, counted with `counter` once per distinct set.
    pub(super) fn count(
        &self,
        definitions: &[ToolDefinition],
        counter: &dyn TokenCounter,
    ) -> usize {
        self.with_set(definitions, counter, |counted| counted.exact(counter))
    }

    /// A number no smaller than [`ToolTokens::count`] of `definitions`, found without
    /// tokenizing when the set was not counted yet: checks far below their thresholds decide
    /// on it, and a team whose checks all do never builds a vocabulary.
    pub(super) fn bound(
        &self,
        definitions: &[ToolDefinition],
        counter: &dyn TokenCounter,
    ) -> usize {
        self.with_set(definitions, counter, |counted| counted.bound)
    }

    /// The tokens of the last set seen, counted now if they were only bounded so far.
    pub(super) fn last(&self, counter: &dyn TokenCounter) -> Option<usize> {
        lock(&self.last)
            .as_mut()
            .map(|counted| counted.exact(counter))
    }

    /// The bound of the last set seen ([`ToolTokens::bound`]).
    pub(super) fn last_bound(&self) -> Option<usize> {
        lock(&self.last).as_ref().map(|counted| counted.bound)
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

    /// A bound of [`LlmAgent::tool_tokens`] found without tokenizing a set not yet counted
    /// ([`ToolTokens::bound`]).
    pub(super) fn tool_tokens_bound(&self) -> usize {
        let counter = self.context.counter.as_ref();
        self.context
            .tool_tokens
            .bound(&self.tool_definitions(), counter)
    }

    /// Tokens the tool definitions of the last model request cost (counted when it was sent),
    /// else of the next one: the context check after every turn and tool batch then costs no
    /// copy of the definitions.
    pub(super) fn request_tool_tokens(&self) -> usize {
        self.context
            .tool_tokens
            .last(self.context.counter.as_ref())
            .unwrap_or_else(|| self.tool_tokens())
    }

    /// A bound of [`LlmAgent::request_tool_tokens`] found without tokenizing a set not yet
    /// counted ([`ToolTokens::bound`]).
    pub(super) fn request_tool_tokens_bound(&self) -> usize {
        match self.context.tool_tokens.last_bound() {
            Some(bound) => bound,
            None => self
                .context
                .tool_tokens
                .bound(&self.tool_definitions(), self.context.counter.as_ref()),
        }
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
        let target = self.context.policy.target_tokens();
        // Far below the target the bound settles it, and nothing is tokenized.
        if self.context.tool_tokens.bound(definitions, counter) < target {
            return;
        }
        // The set just bounded: counted exactly without serializing it again.
        let tokens = self
            .context
            .tool_tokens
            .last(counter)
            .unwrap_or_else(|| self.context.tool_tokens.count(definitions, counter));
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
