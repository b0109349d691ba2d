//! The errors of tools and of the registry.

/// How a tool call failed, from the tool's side.
///
/// Most failures are the model's to fix (a missing file, an ambiguous edit): return
/// [`ToolError::RespondToModel`] and the message becomes the tool result, so the model can try
/// again. [`ToolError::Fatal`] is for failures no retry can fix; it ends the agent's request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// Shown to the model as the tool result; the request goes on with the next model call.
    #[error("{0}")]
    RespondToModel(String),
    /// A path argument resolved outside the workspace root; shown to the model, the request
    /// goes on.
    #[error("{0}")]
    PathEscape(String),
    /// The request ends with this message (the other tool calls still get their results).
    #[error("{0}")]
    Fatal(String),
}

impl ToolError {
    /// A [`ToolError::RespondToModel`] with this message.
    pub fn respond(message: impl Into<String>) -> Self {
        ToolError::RespondToModel(message.into())
    }

    /// A [`ToolError::Fatal`] with this message.
    pub fn fatal(message: impl Into<String>) -> Self {
        ToolError::Fatal(message.into())
    }

    /// The message, whatever the kind.
    pub fn message(&self) -> &str {
        match self {
            ToolError::RespondToModel(m) | ToolError::PathEscape(m) | ToolError::Fatal(m) => m,
        }
    }
}

/// Why a registry operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Another tool already has this name.
    #[error("a tool named \"{0}\" is already registered; tool names must be unique")]
    DuplicateTool(String),
    /// This [`crate::ToolSource`] is already registered.
    #[error("{0} is already registered as a tool source")]
    DuplicateSource(String),
    /// No tool has this name.
    #[error("no tool named \"{0}\" is registered")]
    UnknownTool(String),
    /// The name is not usable as an OpenAI function name.
    #[error("invalid tool name \"{0}\": use 1 to 64 characters from a-z, A-Z, 0-9, '_' and '-'")]
    InvalidName(String),
    /// The tool's arguments do not form a JSON object, which function calling requires.
    #[error(
        "the arguments of tool \"{tool}\" must be a struct (a JSON object), but its \
         schema is {schema}"
    )]
    ArgsNotAnObject {
        /// The name of the tool being registered.
        tool: String,
        /// The schema that was generated, compact JSON.
        schema: String,
    },
}
