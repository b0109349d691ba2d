//! A2A 1.0's JSON-RPC wire types: the agent card, messages and their parts, tasks, the stream's
//! events, and the JSON-RPC envelope around them.
//!
//! A2A 1.0 is defined in protobuf (`lf.a2a.v1`); its JSON-RPC binding carries the protobuf JSON
//! mapping: camelCase fields, enums as their full names (`TASK_STATE_COMPLETED`, `ROLE_USER`),
//! a `oneof` as whichever one field is present (`{"text": …}` for a text part, `{"task": …}` for
//! a send's task). Methods are the gRPC service's names (`SendMessage`, `GetTask`, …) and every
//! request carries the `A2A-Version: 1.0` header. A2A 0.3 (`message/send`, `kind`
//! discriminators, lower-case states) is not spoken: the official SDK serves it only behind a
//! compatibility switch, and troupe speaks the current version (README, "A2A").
//!
//! Fields troupe does not use are ignored on reading, as the protobuf JSON mapping asks of a
//! reader that may be older than the writer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version troupe speaks, sent in [`VERSION_HEADER`] and in every card interface.
pub const PROTOCOL_VERSION: &str = "1.0";
/// The header carrying the protocol version of a request.
pub const VERSION_HEADER: &str = "A2A-Version";
/// Where an agent's card is, relative to its base URL.
pub const CARD_PATH: &str = ".well-known/agent-card.json";
/// The protocol binding troupe speaks, as a card's interfaces name it.
pub const JSONRPC_BINDING: &str = "JSONRPC";

/// The JSON-RPC methods of A2A 1.0 that troupe serves and calls.
pub mod method {
    /// Send a message; the answer is a task (or a message).
    pub const SEND_MESSAGE: &str = "SendMessage";
    /// Send a message and stream the task's events (SSE).
    pub const SEND_STREAMING_MESSAGE: &str = "SendStreamingMessage";
    /// A task by id.
    pub const GET_TASK: &str = "GetTask";
    /// Tasks, optionally of one context.
    pub const LIST_TASKS: &str = "ListTasks";
    /// Cancel a running task.
    pub const CANCEL_TASK: &str = "CancelTask";
    /// Stream a running task's events again (0.3's `tasks/resubscribe`).
    pub const SUBSCRIBE_TO_TASK: &str = "SubscribeToTask";
}

/// JSON-RPC and A2A error codes.
pub mod code {
    /// The body is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC request (or a body over the size limit).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// No such task (or not this caller's).
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// The task is already finished.
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// An operation troupe does not offer (push notifications, subscribing to a finished task).
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    /// A protocol version troupe does not speak.
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

/// An agent's card: who it is, where and how to reach it, what it can do.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCard {
    /// The agent's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Where it answers, by protocol binding; the first is preferred.
    pub supported_interfaces: Vec<AgentInterface>,
    /// The agent's own version.
    pub version: String,
    /// Streaming and the like.
    pub capabilities: AgentCapabilities,
    /// How a caller authenticates, by scheme name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub security_schemes: BTreeMap<String, SecurityScheme>,
    /// Which schemes a request must satisfy (any one requirement).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub security_requirements: Vec<SecurityRequirement>,
    /// Media types it reads.
    pub default_input_modes: Vec<String>,
    /// Media types it writes.
    pub default_output_modes: Vec<String>,
    /// What it is good at.
    pub skills: Vec<AgentSkill>,
}

/// One way to reach an agent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentInterface {
    /// The endpoint.
    pub url: String,
    /// `JSONRPC`, `HTTP+JSON` or `GRPC`.
    pub protocol_binding: String,
    /// The protocol version spoken there.
    pub protocol_version: String,
}

/// What an agent can do beyond a plain send.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCapabilities {
    /// Whether it streams (`SendStreamingMessage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Whether it pushes notifications.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
}

/// A skill on a card.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentSkill {
    /// A stable id.
    pub id: String,
    /// A short name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Keywords.
    pub tags: Vec<String>,
    /// Example requests.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// A security scheme: the two troupe speaks are read; any other kind reads as neither.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecurityScheme {
    /// A key in a header (or a query parameter, or a cookie: troupe sends headers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_security_scheme: Option<ApiKeySecurityScheme>,
    /// HTTP authentication (`Bearer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_auth_security_scheme: Option<HttpAuthSecurityScheme>,
}

/// An API key and where it goes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiKeySecurityScheme {
    /// `header`, `query` or `cookie`.
    pub location: String,
    /// The header's (parameter's, cookie's) name.
    pub name: String,
}

/// HTTP authentication.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpAuthSecurityScheme {
    /// The scheme, `Bearer` for troupe.
    pub scheme: String,
}

/// Schemes that together satisfy the card, by name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecurityRequirement {
    /// Scheme name → scopes.
    pub schemes: BTreeMap<String, StringList>,
}

/// A list of strings (protobuf's wrapper for a map's repeated values).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StringList {
    /// The strings.
    pub list: Vec<String>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Role {
    /// The caller.
    #[serde(rename = "ROLE_USER")]
    User,
    /// The agent.
    #[serde(rename = "ROLE_AGENT")]
    Agent,
    /// Not said (or a role this version does not know).
    #[default]
    #[serde(rename = "ROLE_UNSPECIFIED", other)]
    Unspecified,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Message {
    /// Its id, chosen by its writer.
    pub message_id: String,
    /// The conversation it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task it continues (an answer to `input-required`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Who wrote it.
    pub role: Role,
    /// Its content.
    pub parts: Vec<Part>,
}

impl Message {
    /// A text message.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            message_id: crate::ids::new_id(),
            role,
            parts: vec![Part::text(text)],
            ..Message::default()
        }
    }

    /// Its parts as text (see [`parts_text`]).
    pub fn text_content(&self) -> String {
        parts_text(&self.parts)
    }
}

/// Parts as one text: text parts as they are, data parts as their JSON, a file by its URL or
/// name; joined by newlines.
pub fn parts_text(parts: &[Part]) -> String {
    let pieces: Vec<String> = parts.iter().filter_map(Part::as_text).collect();
    pieces.join("\n")
}

/// A piece of content: text, structured data, or a file (by URL or as base64 bytes).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Part {
    /// Text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Structured data (any JSON value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// A file's URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A file's bytes, base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// A file's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The content's media type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part {
            text: Some(text.into()),
            ..Part::default()
        }
    }

    /// A data part.
    pub fn data(data: Value) -> Self {
        Part {
            data: Some(data),
            media_type: Some("application/json".into()),
            ..Part::default()
        }
    }

    /// This part as text a model can read; `None` for an empty part.
    pub fn as_text(&self) -> Option<String> {
        if let Some(text) = &self.text {
            return Some(text.clone());
        }
        if let Some(data) = &self.data {
            return Some(data.to_string());
        }
        if let Some(url) = &self.url {
            return Some(format!("[file: {url}]"));
        }
        self.raw.as_ref().map(|raw| {
            let name = self.filename.as_deref().unwrap_or("unnamed");
            format!("[file {name}: {} base64 characters]", raw.len())
        })
    }
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum TaskState {
    /// Accepted, not started.
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    /// Running.
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    /// Done; its artifacts hold the answer.
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    /// Failed; its status message says why.
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    /// Cancelled.
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    /// Waiting for the caller's answer to its status message.
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    /// Refused by the agent.
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    /// Waiting for credentials.
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
    /// Not said (or a state this version does not know).
    #[default]
    #[serde(rename = "TASK_STATE_UNSPECIFIED", other)]
    Unspecified,
}

impl TaskState {
    /// Whether the task will not change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Whether the task waits for the caller (input or credentials).
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

/// A task's state, with the agent's message about it and when it was set.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// What the agent says about it (the question of `input-required`, a failure's reason).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// A unit of work an agent does for one message (and the answers it asked for).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Task {
    /// Its id, chosen by the server.
    pub id: String,
    /// The conversation it belongs to.
    pub context_id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// What it produced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// The messages exchanged for it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
}

/// Something a task produced.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Artifact {
    /// Its id (chunks of one artifact share it).
    pub artifact_id: String,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its content.
    pub parts: Vec<Part>,
}

/// A task's status changed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskStatusUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its conversation.
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
}

/// A task produced (a chunk of) an artifact.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its conversation.
    pub context_id: String,
    /// The artifact, or its next chunk.
    pub artifact: Artifact,
    /// Whether this chunk continues the artifact of the same id.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    /// Whether this is the artifact's last chunk.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub last_chunk: bool,
}

/// How a send is to be answered.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SendMessageConfiguration {
    /// Media types the caller reads.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    /// How much history the answer's task carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Answer at once with the task, not when it is done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_immediately: Option<bool>,
}

/// `SendMessage` and `SendStreamingMessage`'s params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SendMessageRequest {
    /// The message.
    pub message: Message,
    /// How to answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
}

/// `SendMessage`'s result: a task, or a message for an agent that answers without one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    /// The task the message started or continued.
    Task(Task),
    /// A direct answer.
    Message(Message),
}

/// One event of a stream (`SendStreamingMessage`, `SubscribeToTask`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    /// The task as it is (the stream's first event).
    Task(Task),
    /// A direct answer (the stream's only event).
    Message(Message),
    /// Its status changed.
    StatusUpdate(TaskStatusUpdateEvent),
    /// It produced (a chunk of) an artifact.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// `GetTask`'s params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetTaskRequest {
    /// The task.
    pub id: String,
    /// How many of its last messages to return (all when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

/// `CancelTask`'s and `SubscribeToTask`'s params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskIdRequest {
    /// The task.
    pub id: String,
}

/// `ListTasks`'s params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListTasksRequest {
    /// Only this conversation's tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Only tasks in this state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    /// At most this many (default 50, at most 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i32>,
    /// Where the last page ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    /// Whether tasks carry their artifacts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_artifacts: Option<bool>,
}

/// `ListTasks`'s result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListTasksResponse {
    /// This page's tasks, newest first.
    pub tasks: Vec<Task>,
    /// The next page's token; empty on the last page.
    pub next_page_token: String,
    /// The page size used.
    pub page_size: i32,
    /// How many tasks matched in all.
    pub total_size: i32,
}

/// A JSON-RPC 2.0 request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcRequest {
    /// Always `2.0`.
    pub jsonrpc: String,
    /// The caller's id for the answer.
    #[serde(default)]
    pub id: Value,
    /// The method.
    pub method: String,
    /// Its params.
    #[serde(default)]
    pub params: Value,
}

impl RpcRequest {
    /// A request of `method` with `params`.
    pub fn new(method: &str, params: Value) -> Self {
        RpcRequest {
            jsonrpc: "2.0".into(),
            id: Value::String(crate::ids::new_id()),
            method: method.into(),
            params,
        }
    }
}

/// A JSON-RPC 2.0 answer: a result or an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcResponse {
    /// Always `2.0`.
    #[serde(default)]
    pub jsonrpc: String,
    /// The request's id.
    #[serde(default)]
    pub id: Value,
    /// The result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

impl RpcResponse {
    /// A result.
    pub fn result(id: Value, result: Value) -> Self {
        RpcResponse {
            jsonrpc: "2.0".into(),
            id,
            result: Some(result),
            error: None,
        }
    }

    /// An error.
    pub fn error(id: Value, code: i64, message: impl Into<String>) -> Self {
        RpcResponse {
            jsonrpc: "2.0".into(),
            id,
            result: None,
            error: Some(RpcError {
                code,
                message: message.into(),
                data: None,
            }),
        }
    }
}

/// A JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// The code ([`code`]).
    pub code: i64,
    /// What went wrong.
    pub message: String,
    /// Details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdks_stream_events_read_as_troupes_types() {
        // Captured from a2a-sdk 1.3.0's server (tests/sdk_agent.py).
        let status = r#"{"statusUpdate": {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"messageId": "m", "contextId": "c1", "taskId": "t1", "role": "ROLE_AGENT", "parts": [{"text": "Which city?"}]}, "timestamp": "2026-11-28T12:17:23.548211Z"}}}"#;
        let StreamResponse::StatusUpdate(update) =
            serde_json::from_str::<StreamResponse>(status).unwrap()
        else {
            panic!("not a status update");
        };
        assert_eq!(update.status.state, TaskState::InputRequired);
        assert_eq!(update.status.message.unwrap().text_content(), "Which city?");
        let send = r#"{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a","name":"answer","parts":[{"text":"echo: "},{"text":"hello"}]}]}}"#;
        let SendMessageResponse::Task(task) = serde_json::from_str(send).unwrap() else {
            panic!("not a task");
        };
        assert_eq!(task.artifacts[0].parts.len(), 2);
        // A state a later version adds reads as unspecified, not as an error.
        let later: TaskState = serde_json::from_str(r#""TASK_STATE_DREAMING""#).unwrap();
        assert_eq!(later, TaskState::Unspecified);
    }

    #[test]
    fn a_message_is_written_in_the_protobuf_json_mapping() {
        let mut message = Message::text(Role::User, "hi");
        message.message_id = "m1".into();
        message.context_id = Some("c".into());
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"messageId": "m1", "contextId": "c", "role": "ROLE_USER",
                "parts": [{"text": "hi"}]})
        );
    }
}
