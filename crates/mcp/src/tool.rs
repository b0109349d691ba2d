//! One tool of an MCP server, as a [`JsonTool`] in a troupe registry.

use std::sync::Weak;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use troupe_tools::{JsonTool, ToolContext, ToolError};

use crate::connection::{CallError, Connection};
use crate::content::render;

/// A server's tool under its registry name; calls are sent to the server by its own name.
pub(crate) struct McpTool {
    /// The name the model calls it by (`SERVER__tool`).
    pub(crate) name: String,
    /// The name the server knows it by.
    pub(crate) remote: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
    pub(crate) timeout: Option<Duration>,
    /// Weak: the connection holds its tools; registries keep it alive through its
    /// [`crate::tool_list::McpToolSource`].
    pub(crate) connection: Weak<Connection>,
}

#[async_trait]
impl JsonTool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        args: Map<String, Value>,
    ) -> Result<String, ToolError> {
        let Some(connection) = self.connection.upgrade() else {
            return Err(ToolError::respond(format!(
                "{} is no longer available: its MCP server was shut down",
                self.name
            )));
        };
        let server = connection.name();
        let span = tracing::Span::current();
        span.record(troupe_protocol::trace::semconv::MCP_SERVER, server);
        if let Some(policy) = connection.sandbox_policy() {
            span.record(
                troupe_protocol::trace::semconv::SANDBOX_POLICY,
                policy.name(),
            );
        }
        match connection.call(&self.remote, args).await {
            Ok(result) if result.is_error == Some(true) => Err(ToolError::respond(format!(
                "{} failed (reported by MCP server `{server}`): {}",
                self.name,
                render(&result)
            ))),
            Ok(result) => Ok(render(&result)),
            Err(CallError::Refused(reason)) => Err(ToolError::respond(format!(
                "MCP server `{server}` refused the call to {}: {reason}",
                self.name
            ))),
            Err(CallError::TooLarge(reason)) => Err(ToolError::respond(format!(
                "MCP server `{server}`'s result for {} was too large: {reason}",
                self.name
            ))),
            Err(CallError::Exited(message) | CallError::Unavailable(message)) => {
                Err(ToolError::respond(message))
            }
        }
    }
}

/// The server's input schema as function-calling parameters: `$schema` dropped, `type` and
/// `properties` added when a server leaves them out (both mean an object).
pub(crate) fn parameters(input_schema: &Map<String, Value>) -> Value {
    let mut schema = input_schema.clone();
    schema.remove("$schema");
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".to_string()));
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        schema
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    Value::Object(schema)
}
