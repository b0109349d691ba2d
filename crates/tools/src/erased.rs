//! The type-erased twin of [`Tool`] that lets the registry hold tools of different types.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::args::parse_args;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::result::{ToolFailure, ToolResult};
use crate::schema::parameters_schema;
use crate::tool::Tool;

/// A tool seen through JSON: arguments in as a string, a [`ToolResult`] out.
#[async_trait]
pub(crate) trait ErasedTool: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    fn parameters(&self) -> &Value;
    fn timeout(&self) -> Option<Duration>;
    /// Parse, call and render; panics and timeouts are the registry's business.
    async fn call_json(&self, ctx: &ToolContext, raw_args: &str) -> ToolResult;
}

/// A typed tool with its schema computed once.
pub(crate) struct Erased<T: Tool> {
    tool: T,
    parameters: Value,
}

impl<T: Tool> Erased<T> {
    pub(crate) fn new(tool: T) -> Self {
        Erased {
            tool,
            parameters: parameters_schema::<T::Args>(),
        }
    }
}

#[async_trait]
impl<T: Tool> ErasedTool for Erased<T> {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> &str {
        self.tool.description()
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn timeout(&self) -> Option<Duration> {
        self.tool.timeout()
    }

    async fn call_json(&self, ctx: &ToolContext, raw_args: &str) -> ToolResult {
        let args = match parse_args::<T::Args>(self.tool.name(), raw_args, &self.parameters) {
            Ok(args) => args,
            Err((failure, message)) => return ToolResult::error(failure, message),
        };
        match self.tool.call(ctx, args).await {
            Ok(output) => render_output(self.tool.name(), &output),
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

/// A JSON string is shown verbatim (most tools return text); anything else as compact JSON.
fn render_output<O: Serialize>(tool: &str, output: &O) -> ToolResult {
    match serde_json::to_value(output) {
        Ok(Value::String(text)) => ToolResult::success(text),
        Ok(value) => ToolResult::success(value.to_string()),
        Err(e) => ToolResult::error(
            ToolFailure::InvalidOutput,
            format!(
                "{tool} produced output that could not be serialized ({e}); this is a bug in \
                 the tool"
            ),
        ),
    }
}
