//! The [`ToolRegistry`]: an agent's tool set, its OpenAI definitions and safe dispatch.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use troupe_runtime::{Event, ToolCall, ToolDefinition};

use crate::context::ToolContext;
use crate::erased::{Erased, ErasedTool};
use crate::error::{RegistryError, ToolError};
use crate::fn_tool::FnTool;
use crate::json_tool::{ErasedJson, JsonTool};
use crate::output::{DEFAULT_OUTPUT_CAP, cap_output};
use crate::result::{ToolFailure, ToolResult};
use crate::schema::is_object_schema;
use crate::suggest::closest;
use crate::tool::Tool;

/// How long a tool call may run when neither the tool nor the registry says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct Entry {
    tool: Arc<dyn ErasedTool>,
    /// Set with [`ToolRegistry::set_timeout`]; wins over the tool's own.
    timeout: Option<Duration>,
}

/// A set of tools, in registration order, that a model can call.
///
/// Cloning is cheap (tools are shared), so an agent can hand a copy to each turn and still
/// register more tools while it runs.
#[derive(Clone)]
pub struct ToolRegistry {
    entries: Vec<Entry>,
    default_timeout: Duration,
    output_cap: usize,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        ToolRegistry {
            entries: Vec::new(),
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

    fn insert(&mut self, tool: Arc<dyn ErasedTool>) -> Result<&mut Self, RegistryError> {
        let name = tool.name();
        if !is_valid_name(name) {
            return Err(RegistryError::InvalidName(name.to_string()));
        }
        if self.contains(name) {
            return Err(RegistryError::DuplicateTool(name.to_string()));
        }
        if !is_object_schema(tool.parameters()) {
            return Err(RegistryError::ArgsNotAnObject {
                tool: name.to_string(),
                schema: tool.parameters().to_string(),
            });
        }
        self.entries.push(Entry {
            tool,
            timeout: None,
        });
        Ok(self)
    }

    /// Remove a tool; returns whether it was registered.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.tool.name() != name);
        self.entries.len() != before
    }

    /// Override one tool's timeout (wins over the tool's own [`Tool::timeout`]).
    pub fn set_timeout(&mut self, tool: &str, timeout: Duration) -> Result<(), RegistryError> {
        let entry = self
            .entries
            .iter_mut()
            .find(|e| e.tool.name() == tool)
            .ok_or_else(|| RegistryError::UnknownTool(tool.to_string()))?;
        entry.timeout = Some(timeout);
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
        self.entry(tool).map(|e| self.effective_timeout(e))
    }

    /// Add every tool of `other` (with its timeout override). Nothing is added when any name is
    /// already taken.
    pub fn merge(&mut self, other: &ToolRegistry) -> Result<(), RegistryError> {
        if let Some(dup) = other.entries.iter().find(|e| self.contains(e.tool.name())) {
            return Err(RegistryError::DuplicateTool(dup.tool.name().to_string()));
        }
        self.entries.extend(other.entries.iter().cloned());
        Ok(())
    }

    /// The OpenAI function definitions of every tool, in registration order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.entries
            .iter()
            .map(|e| ToolDefinition {
                name: e.tool.name().to_string(),
                description: e.tool.description().to_string(),
                parameters: e.tool.parameters().clone(),
            })
            .collect()
    }

    /// Every tool's name, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| e.tool.name().to_string())
            .collect()
    }

    /// Whether a tool has this name.
    pub fn contains(&self, name: &str) -> bool {
        self.entry(name).is_some()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.tool.name() == name)
    }

    fn effective_timeout(&self, entry: &Entry) -> Duration {
        entry
            .timeout
            .or_else(|| entry.tool.timeout())
            .unwrap_or(self.default_timeout)
    }

    /// Run one tool call and turn whatever happens into a [`ToolResult`].
    ///
    /// Never panics and never fails: unknown tools, bad arguments, panics, timeouts and
    /// cancellation become error results whose content tells the model what went wrong; output
    /// over the cap is truncated. The tool sees `ctx` with `tool_call_id` set to `call.id`.
    /// Publishes [`Event::ToolCallStarted`] and [`Event::ToolCallFinished`] on `ctx.events`.
    pub async fn dispatch(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let ctx = ctx.clone().with_tool_call_id(call.id.clone());
        let tool = call.function.name.clone();
        ctx.events.publish(
            ctx.trace_id.clone(),
            Event::ToolCallStarted {
                agent: ctx.agent.clone(),
                tool: tool.clone(),
                call_id: call.id.clone(),
            },
        );
        let started = Instant::now();
        let mut result = self.run(call, &ctx).await;
        result.content = cap_output(result.content, self.output_cap);
        ctx.events.publish(
            ctx.trace_id.clone(),
            Event::ToolCallFinished {
                agent: ctx.agent.clone(),
                tool,
                call_id: call.id.clone(),
                is_error: result.is_error(),
                ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            },
        );
        result
    }

    async fn run(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let name = call.function.name.as_str();
        let Some(entry) = self.entry(name) else {
            return self.unknown_tool(name);
        };
        let timeout = self.effective_timeout(entry);
        // The future borrows only `ctx` and the tool; a panic leaves neither half-updated in a
        // way later calls could observe (the ledger recovers from poisoning), so unwinding
        // through it is safe to catch.
        let call_future =
            AssertUnwindSafe(entry.tool.call_json(ctx, &call.function.arguments)).catch_unwind();
        tokio::select! {
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
                Err(_) => ToolResult::error(
                    ToolFailure::TimedOut,
                    format!(
                        "{name} did not finish within {} and was stopped; try a smaller or \
                         simpler request",
                        describe_duration(timeout)
                    ),
                ),
            },
        }
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
