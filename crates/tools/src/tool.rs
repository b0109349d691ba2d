//! The typed [`Tool`] trait that every tool implements.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::context::ToolContext;
use crate::error::ToolError;

/// A tool a model can call.
///
/// `Args` is deserialized from the model's JSON arguments and its `schemars` schema is what the
/// model sees; it must be a struct (a JSON object). `Output` is serialized for the model: a value
/// that serializes to a JSON string is shown verbatim, anything else as compact JSON.
///
/// ```no_run
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use troupe_tools::{Tool, ToolContext, ToolError};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs {
///     /// The first number.
///     a: i64,
///     /// The second number.
///     b: i64,
/// }
///
/// struct Add;
///
/// #[async_trait::async_trait]
/// impl Tool for Add {
///     type Args = AddArgs;
///     type Output = i64;
///     fn name(&self) -> &str { "add" }
///     fn description(&self) -> &str { "Add two integers." }
///     async fn call(&self, _ctx: &ToolContext, args: AddArgs) -> Result<i64, ToolError> {
///         args.a.checked_add(args.b).ok_or_else(|| ToolError::respond("the sum overflows i64"))
///     }
/// }
/// ```
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The arguments, parsed from the model's JSON.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// What the tool returns.
    type Output: Serialize + Send;

    /// The name the model calls it by (1-64 characters of `a-zA-Z0-9_-`).
    fn name(&self) -> &str;

    /// What it does and when to use it, for the model.
    fn description(&self) -> &str;

    /// How long one call may take; `None` means the registry's default (60 s).
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Run the tool.
    async fn call(&self, ctx: &ToolContext, args: Self::Args) -> Result<Self::Output, ToolError>;
}

/// Arguments for a tool that takes none (`{}`; an empty argument string is accepted too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NoArgs {}
