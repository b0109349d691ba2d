//! The [`ToolRegistry`]: an agent's tool set, its OpenAI definitions and safe dispatch.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use troupe_protocol::{ToolCall, ToolDefinition};

use crate::call_events::observe_call;
use crate::context::ToolContext;
use crate::erased::{Erased, ErasedTool};
use crate::error::{RegistryError, ToolError};
use crate::fn_tool::FnTool;
use crate::json_tool::{ErasedJson, JsonTool};
use crate::result::{ToolFailure, ToolResult};
use crate::schema::is_object_schema;
use crate::source::{SourceFilter, ToolSource};
use crate::suggest::closest;
use crate::tool::Tool;
use troupe_protocol::{DEFAULT_OUTPUT_CAP, cap_output};

/// How long a tool call may run when neither the tool nor the registry says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone)]
enum Entry {
    /// One tool, registered by name.
    Tool(Arc<dyn ErasedTool>),
    /// Whatever tools a source lists at the time of asking.
    Source {
        source: Arc<dyn ToolSource>,
        /// Which of its tools this registry offers ([`ToolRegistry::remove`],
        /// [`ToolRegistry::retain`]).
        filter: SourceFilter,
    },
}

/// A set of tools, in registration order, that a model can call.
///
/// Cloning is cheap (tools are shared), so an agent can hand a copy to each turn and still
/// register more tools while it runs. A [`ToolSource`]'s tools are shared too: when its list
/// changes, every clone offers the new list.
#[derive(Clone)]
pub struct ToolRegistry {
    entries: Vec<Entry>,
    /// Set with [`ToolRegistry::set_timeout`], by tool name; wins over the tool's own.
    timeouts: HashMap<String, Duration>,
    default_timeout: Duration,
    output_cap: usize,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        ToolRegistry {
            entries: Vec::new(),
            timeouts: HashMap::new(),
            default_timeout: DEFAULT_TIMEOUT,
            output_cap: DEFAULT_OUTPUT_CAP,
        }
    }
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .field("default_timeout", &self.default_timeout)
            .field("output_cap", &self.output_cap)
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry (60 s default timeout, 64 KiB output cap).
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a tool. Fails when the name is taken or invalid, or when `T::Args` is not a struct.
    pub fn register<T: Tool>(&mut self, tool: T) -> Result<&mut Self, RegistryError> {
        self.insert(Arc::new(Erased::new(tool)))
    }

    /// Add a tool made from an async closure over its typed arguments.
    ///
    /// The arguments' doc comments become the parameter descriptions the model sees.
    ///
    /// ```no_run
    /// use schemars::JsonSchema;
    /// use serde::Deserialize;
    /// use troupe_tools::{ToolError, ToolRegistry};
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// struct WeatherArgs {
    ///     /// City name, e.g. "Lisbon".
    ///     city: String,
    /// }
    ///
    /// let mut tools = ToolRegistry::new();
    /// tools.register_fn("weather", "Current weather for a city.", |args: WeatherArgs| async move {
    ///     if args.city.is_empty() {
    ///         return Err(ToolError::respond("city must not be empty"));
    ///     }
    ///     Ok(format!("sunny in {}, 21 °C", args.city))
    /// })?;
    /// # Ok::<(), troupe_tools::RegistryError>(())
    /// ```
    pub fn register_fn<A, O, F, Fut>(
        &mut self,
        name: &str,
        description: &str,
        f: F,
    ) -> Result<&mut Self, RegistryError>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        self.register(FnTool::new(
            name,
            description,
            move |_ctx: ToolContext, args: A| f(args),
        ))
    }

    /// Like [`ToolRegistry::register_fn`], for closures that need the [`ToolContext`] (the
    /// workspace root, the ledger, the cancellation token).
    pub fn register_fn_with_context<A, O, F, Fut>(
        &mut self,
        name: &str,
        description: &str,
        f: F,
    ) -> Result<&mut Self, RegistryError>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        self.register(FnTool::new(name, description, f))
    }

    /// Add a tool whose parameters are a JSON Schema known at run time ([`JsonTool`]), such as
    /// a tool an MCP server serves. Fails like [`ToolRegistry::register`]: a taken or invalid
    /// name, or a schema that is not an object.
    pub fn register_json<T: JsonTool>(&mut self, tool: T) -> Result<&mut Self, RegistryError> {
        self.insert(Arc::new(ErasedJson(tool)))
    }

    /// Add a [`ToolSource`]: from now on this registry (and its clones) offers the tools the
    /// source lists at the time of asking. Fails like [`ToolRegistry::register_json`] when a
    /// tool it lists now has an invalid name or schema or a name that is taken, and when the
    /// source is already registered.
    pub fn register_source(
        &mut self,
        source: Arc<dyn ToolSource>,
    ) -> Result<&mut Self, RegistryError> {
        if self.entries.iter().any(|e| e.is_source(&source)) {
            return Err(RegistryError::DuplicateSource(source.label().to_string()));
        }
        let tools = source.tools();
        let mut listed = HashSet::new();
        for tool in tools.iter() {
            check(tool.name(), tool.parameters())?;
            if self.contains(tool.name()) || !listed.insert(tool.name()) {
                return Err(RegistryError::DuplicateTool(tool.name().to_string()));
            }
        }
        self.entries.push(Entry::Source {
            source,
            filter: SourceFilter::default(),
        });
        Ok(self)
    }

    fn insert(&mut self, tool: Arc<dyn ErasedTool>) -> Result<&mut Self, RegistryError> {
        let name = tool.name();
        check(name, tool.parameters())?;
        if self.contains(name) {
            return Err(RegistryError::DuplicateTool(name.to_string()));
        }
        self.entries.push(Entry::Tool(tool));
        Ok(self)
    }

    /// Remove a tool; returns whether it was offered. A [`ToolSource`]'s tool stays out of
    /// this registry even when the source lists it again.
    pub fn remove(&mut self, name: &str) -> bool {
        let offered = self.contains(name);
        self.entries
            .retain(|e| !matches!(e, Entry::Tool(t) if t.name() == name));
        for entry in &mut self.entries {
            if let Entry::Source { source, filter } = entry
                && source.tools().iter().any(|t| t.name() == name)
            {
                filter.remove(name);
            }
        }
        self.timeouts.remove(name);
        offered
    }

    /// Keep only the tools offered now whose name `keep` accepts. A [`ToolSource`]'s tools
    /// are then limited to those kept: tools it lists later are not offered here (a selection
    /// such as "this one tool of that server" stays that selection).
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        let offered: HashSet<String> = self.names().into_iter().collect();
        self.entries.retain(|e| match e {
            Entry::Tool(tool) => keep(tool.name()),
            Entry::Source { .. } => true,
        });
        for entry in &mut self.entries {
            if let Entry::Source { source, filter } = entry {
                let kept = source
                    .tools()
                    .iter()
                    .map(|t| t.name())
                    .filter(|n| filter.allows(n) && offered.contains(*n) && keep(n))
                    .map(str::to_string)
                    .collect();
                *filter = SourceFilter::Only(kept);
            }
        }
        self.timeouts
            .retain(|name, _| offered.contains(name) && keep(name));
    }

    /// Override one tool's timeout (wins over the tool's own [`Tool::timeout`]). A
    /// [`ToolSource`]'s tool keeps the override while the source lists it by that name.
    pub fn set_timeout(&mut self, tool: &str, timeout: Duration) -> Result<(), RegistryError> {
        if !self.contains(tool) {
            return Err(RegistryError::UnknownTool(tool.to_string()));
        }
        self.timeouts.insert(tool.to_string(), timeout);
        Ok(())
    }

    /// The timeout for tools that set none (60 s unless changed).
    pub fn set_default_timeout(&mut self, timeout: Duration) {
        self.default_timeout = timeout;
    }

    /// The most bytes of output a call may return; longer output is cut in the middle with a
    /// marker stating the original size (64 KiB unless changed).
    pub fn set_output_cap(&mut self, bytes: usize) {
        self.output_cap = bytes;
    }

    /// The timeout a call of `tool` runs under, if it is registered.
    pub fn timeout_of(&self, tool: &str) -> Option<Duration> {
        self.find(tool).map(|t| self.effective_timeout(t.as_ref()))
    }

    /// Add every tool of `other` (with its timeout overrides). Nothing is added when any name is
    /// already taken. A [`ToolSource`] both hold stays one source here, offering the tools
    /// either offers.
    pub fn merge(&mut self, other: &ToolRegistry) -> Result<(), RegistryError> {
        if let Some(dup) = other.names().into_iter().find(|n| self.contains(n)) {
            return Err(RegistryError::DuplicateTool(dup));
        }
        for entry in &other.entries {
            let same_source = match entry {
                Entry::Tool(_) => None,
                Entry::Source { source, filter } => self
                    .entries
                    .iter_mut()
                    .find(|mine| mine.is_source(source))
                    .map(|mine| (mine, filter)),
            };
            match same_source {
                Some((Entry::Source { filter: mine, .. }, theirs)) => {
                    *mine = mine.union(theirs);
                }
                _ => self.entries.push(entry.clone()),
            }
        }
        for (name, timeout) in &other.timeouts {
            self.timeouts.entry(name.clone()).or_insert(*timeout);
        }
        Ok(())
    }

    /// The OpenAI function definitions of every tool offered now, in registration order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.offered()
            .iter()
            .map(|tool| ToolDefinition {
                name: tool.name().to_string(),
                description: tool.description().to_string(),
                parameters: tool.parameters().clone(),
            })
            .collect()
    }

    /// Every tool's name, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.offered()
            .iter()
            .map(|tool| tool.name().to_string())
            .collect()
    }

    /// Whether a tool has this name.
    pub fn contains(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// Number of tools offered now.
    pub fn len(&self) -> usize {
        self.offered().len()
    }

    /// Whether no tool is offered now.
    pub fn is_empty(&self) -> bool {
        self.offered().is_empty()
    }

    fn find(&self, name: &str) -> Option<Arc<dyn ErasedTool>> {
        self.offered().into_iter().find(|tool| tool.name() == name)
    }

    /// The tools offered now, in registration order: every registered tool, then in its place
    /// each source's listed tools that are valid, not removed, and not named like a registered
    /// tool or an earlier source's.
    fn offered(&self) -> Vec<Arc<dyn ErasedTool>> {
        let mut taken: HashSet<String> = self
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::Tool(tool) => Some(tool.name().to_string()),
                Entry::Source { .. } => None,
            })
            .collect();
        let mut offered = Vec::new();
        for entry in &self.entries {
            match entry {
                Entry::Tool(tool) => offered.push(tool.clone()),
                Entry::Source { source, filter } => {
                    for tool in source.tools().iter() {
                        let name = tool.name();
                        if !filter.allows(name)
                            || check(name, tool.parameters()).is_err()
                            || !taken.insert(name.to_string())
                        {
                            continue;
                        }
                        offered.push(Arc::new(ErasedJson(tool.clone())));
                    }
                }
            }
        }
        offered
    }

    fn effective_timeout(&self, tool: &dyn ErasedTool) -> Duration {
        self.timeouts
            .get(tool.name())
            .copied()
            .or_else(|| tool.timeout())
            .unwrap_or(self.default_timeout)
    }

    /// Run one tool call and turn whatever happens into a [`ToolResult`].
    ///
    /// Never panics and never fails: unknown tools, bad arguments, panics, timeouts and
    /// cancellation become error results whose content tells the model what went wrong; output
    /// over the cap is truncated. The tool sees `ctx` with `tool_call_id` set to `call.id`.
    /// Publishes the call's started and finished events on `ctx.events` ([`observe_call`]).
    pub async fn dispatch(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let ctx = ctx.clone().with_tool_call_id(call.id.clone());
        observe_call(call, &ctx, async {
            let mut result = self.run(call, &ctx).await;
            result.content = cap_output(result.content, self.output_cap);
            result
        })
        .await
    }

    async fn run(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let name = call.function.name.as_str();
        let Some(tool) = self.find(name) else {
            return self.unknown_tool(name);
        };
        let timeout = self.effective_timeout(tool.as_ref());
        // The call's own token: cancelled with the caller's, and by the guard when the call
        // times out or its future is dropped (the turn abandoned). Dropping a future cannot
        // stop work it moved to a blocking thread (a `grep` walk), so the token must say so.
        let call_cancel = ctx.cancel.child_token();
        let cancel_on_drop = call_cancel.clone().drop_guard();
        let call_ctx = ctx.clone().with_cancel(call_cancel.clone());
        // The future borrows only `call_ctx` and the tool; a panic leaves neither half-updated
        // in a way later calls could observe (the ledger recovers from poisoning), so unwinding
        // through it is safe to catch.
        let call_future =
            AssertUnwindSafe(tool.call_json(&call_ctx, &call.function.arguments)).catch_unwind();
        let result = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => ToolResult::error(
                ToolFailure::Cancelled,
                format!("{name} was cancelled before it finished; its effects may be partial"),
            ),
            outcome = tokio::time::timeout(timeout, call_future) => match outcome {
                Ok(Ok(result)) => result,
                Ok(Err(panic)) => ToolResult::error(
                    ToolFailure::Panicked,
                    format!(
                        "{name} crashed (panic: {}); this is a bug in the tool, not in your \
                         arguments; try another way to reach your goal",
                        panic_message(panic.as_ref())
                    ),
                ),
                Err(_) => {
                    call_cancel.cancel();
                    ToolResult::error(
                        ToolFailure::TimedOut,
                        format!(
                            "{name} did not finish within {} and was stopped; try a smaller \
                             or simpler request",
                            describe_duration(timeout)
                        ),
                    )
                }
            },
        };
        // A call that ended (by itself, by timing out, or cancelled by the caller) has its token
        // in its final state; only dropping this future midway must still cancel it.
        cancel_on_drop.disarm();
        result
    }

    fn unknown_tool(&self, name: &str) -> ToolResult {
        let names = self.names();
        let message = if names.is_empty() {
            format!("unknown tool \"{name}\"; no tools are available, answer without calling one")
        } else {
            let hint = closest(name, &names)
                .map(|n| format!("did you mean \"{n}\"? "))
                .unwrap_or_default();
            format!(
                "unknown tool \"{name}\"; {hint}available tools: {}",
                names.join(", ")
            )
        };
        ToolResult::error(ToolFailure::UnknownTool, message)
    }
}

impl Entry {
    fn is_source(&self, other: &Arc<dyn ToolSource>) -> bool {
        // The data pointers: the same source may be reached through different vtables.
        matches!(self, Entry::Source { source, .. }
            if std::ptr::addr_eq(Arc::as_ptr(source), Arc::as_ptr(other)))
    }
}

/// Whether a tool with this name and parameter schema can be offered to a model.
fn check(name: &str, parameters: &serde_json::Value) -> Result<(), RegistryError> {
    if !is_valid_name(name) {
        return Err(RegistryError::InvalidName(name.to_string()));
    }
    if !is_object_schema(parameters) {
        return Err(RegistryError::ArgsNotAnObject {
            tool: name.to_string(),
            schema: parameters.to_string(),
        });
    }
    Ok(())
}

/// OpenAI function names: 1-64 characters of `a-zA-Z0-9_-`.
fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "no message".to_string()
    }
}

/// `60 s`, `1.5 s`, `250 ms`.
fn describe_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}
