//! [`JsonTool`]: a tool whose parameter schema is data known only at run time — a tool served by
//! another process, such as an MCP server — rather than a Rust type.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::args::parse_json_args;
use crate::context::ToolContext;
use crate::erased::ErasedTool;
use crate::error::ToolError;
use crate::result::{ToolFailure, ToolResult};

/// A tool described by a JSON Schema instead of a typed `Args` (see [`crate::Tool`] for typed
/// tools). Register it with [`crate::ToolRegistry::register_json`].
///
/// The registry checks the model's arguments against [`JsonTool::parameters`] before calling
/// (type, required and unknown fields, enums, ranges), so a bad call is answered with the same
/// messages a typed tool gets, without a round trip to the process that serves the tool.
#[async_trait]
pub trait JsonTool: Send + Sync + 'static {
    /// The name the model calls it by (1-64 characters of `a-zA-Z0-9_-`).
    fn name(&self) -> &str;

    /// What it does and when to use it, for the model.
    fn description(&self) -> &str;

    /// The JSON Schema of its arguments; must describe an object (`"type": "object"`).
    fn parameters(&self) -> &Value;

    /// How long one call may take; `None` means the registry's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Run the tool with arguments that passed the schema check; returns the text for the model.
    async fn call(&self, ctx: &ToolContext, args: Map<String, Value>) -> Result<String, ToolError>;
}

/// A [`JsonTool`] seen as an [`ErasedTool`].
pub(crate) struct ErasedJson<T: JsonTool>(pub(crate) T);

#[async_trait]
impl<T: JsonTool> ErasedTool for ErasedJson<T> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn description(&self) -> &str {
        self.0.description()
    }

    fn parameters(&self) -> &Value {
        self.0.parameters()
    }

    fn timeout(&self) -> Option<Duration> {
        self.0.timeout()
    }

    async fn call_json(&self, ctx: &ToolContext, raw_args: &str) -> ToolResult {
        let args = match parse_json_args(self.0.name(), raw_args, self.0.parameters()) {
            Ok(args) => args,
            Err((failure, message)) => return ToolResult::error(failure, message),
        };
        match self.0.call(ctx, args).await {
            Ok(text) => ToolResult::success(text),
            Err(ToolError::RespondToModel(message)) => {
                ToolResult::error(ToolFailure::Refused, message)
            }
            Err(ToolError::PathEscape(message)) => {
                ToolResult::error(ToolFailure::PathEscape, message)
            }
            Err(ToolError::Fatal(message)) => ToolResult::fatal(message),
        }
    }
}
