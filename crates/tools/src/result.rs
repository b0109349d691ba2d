//! What a dispatched tool call produced: the text for the model and how the call went.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The result of one dispatched tool call.
///
/// `content` is always what the model should see next as the `tool` message, errors included:
/// every message says what was wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The tool message's content.
    pub content: String,
    /// How the call went.
    pub outcome: ToolOutcome,
}

impl ToolResult {
    /// A successful result.
    pub fn success(content: impl Into<String>) -> Self {
        ToolResult {
            content: content.into(),
            outcome: ToolOutcome::Success,
        }
    }

    /// A failed result the model should see.
    pub fn error(failure: ToolFailure, content: impl Into<String>) -> Self {
        ToolResult {
            content: content.into(),
            outcome: ToolOutcome::Error(failure),
        }
    }

    /// A fatal result: the request should end.
    pub fn fatal(message: impl Into<String>) -> Self {
        let message = message.into();
        ToolResult {
            content: message.clone(),
            outcome: ToolOutcome::Fatal(message),
        }
    }

    /// Whether the call failed (fatal or not).
    pub fn is_error(&self) -> bool {
        !matches!(self.outcome, ToolOutcome::Success)
    }

    /// Whether the failure should end the request.
    pub fn is_fatal(&self) -> bool {
        matches!(self.outcome, ToolOutcome::Fatal(_))
    }

    /// The failure class, when the call failed without being fatal.
    pub fn failure(&self) -> Option<&ToolFailure> {
        match &self.outcome {
            ToolOutcome::Error(f) => Some(f),
            _ => None,
        }
    }
}

/// How a tool call went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ToolOutcome {
    /// The tool ran and returned output (possibly truncated, with a marker in the content).
    Success,
    /// The call failed; the content tells the model why. The request goes on.
    Error(ToolFailure),
    /// The tool reported a failure no retry can fix; the request should end.
    Fatal(String),
}

/// The class of a non-fatal tool-call failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "failure", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolFailure {
    /// The arguments were not valid JSON.
    MalformedArguments,
    /// The arguments were JSON but did not match the tool's parameters.
    InvalidArguments {
        /// The offending field as a path (`path`, `edits[0].old`), when it could be located.
        field: Option<String>,
    },
    /// No tool has the requested name.
    UnknownTool,
    /// The tool panicked.
    Panicked,
    /// The tool ran past its timeout.
    TimedOut,
    /// The call was cancelled through the context's token.
    Cancelled,
    /// The tool refused or failed with a message for the model
    /// ([`crate::ToolError::RespondToModel`]).
    Refused,
    /// A path argument resolved outside the workspace root.
    PathEscape,
    /// The tool's output could not be serialized.
    InvalidOutput,
}

impl ToolFailure {
    /// The variant's name in snake case (`unknown_tool`, `timed_out`, …), as serialized: a
    /// low-cardinality value for the OpenTelemetry `error.type` attribute.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolFailure::MalformedArguments => "malformed_arguments",
            ToolFailure::InvalidArguments { .. } => "invalid_arguments",
            ToolFailure::UnknownTool => "unknown_tool",
            ToolFailure::Panicked => "panicked",
            ToolFailure::TimedOut => "timed_out",
            ToolFailure::Cancelled => "cancelled",
            ToolFailure::Refused => "refused",
            ToolFailure::PathEscape => "path_escape",
            ToolFailure::InvalidOutput => "invalid_output",
        }
    }
}

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolFailure::MalformedArguments => "malformed arguments",
            ToolFailure::InvalidArguments { .. } => "invalid arguments",
            ToolFailure::UnknownTool => "unknown tool",
            ToolFailure::Panicked => "tool panicked",
            ToolFailure::TimedOut => "timed out",
            ToolFailure::Cancelled => "cancelled",
            ToolFailure::Refused => "refused",
            ToolFailure::PathEscape => "path outside the workspace",
            ToolFailure::InvalidOutput => "invalid output",
        })
    }
}
