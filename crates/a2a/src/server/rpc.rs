//! The served agents' HTTP routes: each agent's card, and its JSON-RPC endpoint (send, stream,
//! get, list, cancel, subscribe) behind the body limit, the version check and the auth.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::broadcast;
use troupe_protocol::TraceContext;

use crate::server::auth::ServerAuth;
use crate::server::contexts::ContextRefusal;
use crate::server::tasks::{Asker, TaskRefusal, TaskStore};
use crate::wire::{
    AgentCard, CARD_PATH, GetTaskRequest, ListTasksRequest, ListTasksResponse, RpcRequest,
    RpcResponse, SendMessageRequest, SendMessageResponse, StreamResponse, Task,
    TaskArtifactUpdateEvent, TaskIdRequest, TaskState, TaskStatusUpdateEvent, VERSION_HEADER, code,
    method,
};

/// Tasks a `ListTasks` page holds by default, and at most.
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 100;

/// What every route reads.
pub(crate) struct Served {
    pub(crate) ask: Asker,
    pub(crate) cards: HashMap<String, AgentCard>,
    pub(crate) auth: ServerAuth,
    pub(crate) max_request_bytes: usize,
    pub(crate) tasks: TaskStore,
}

pub(crate) fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route(&format!("/agents/{{name}}/{CARD_PATH}"), get(card))
        .route("/agents/{name}", post(rpc))
        .route("/agents/{name}/", post(rpc))
        .with_state(served)
}

async fn card(State(served): State<Arc<Served>>, Path(name): Path<String>) -> Response {
    match served.cards.get(&name) {
        Some(card) => axum::Json(card).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("no agent `{name}` is served here"),
        )
            .into_response(),
    }
}

/// A JSON-RPC answer with an HTTP status (200 but for transport-level refusals).
fn answer(status: StatusCode, response: RpcResponse) -> Response {
    (status, axum::Json(response)).into_response()
}

fn refuse(id: Value, code: i64, message: impl Into<String>) -> Response {
    answer(StatusCode::OK, RpcResponse::error(id, code, message))
}

async fn rpc(
    State(served): State<Arc<Served>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !served.cards.contains_key(&name) {
        return answer(
            StatusCode::NOT_FOUND,
            RpcResponse::error(
                Value::Null,
                code::METHOD_NOT_FOUND,
                format!("no agent `{name}` is served here"),
            ),
        );
    }
    let Some(caller) = served.auth.caller_of(&headers).map(str::to_string) else {
        // Before the body is read: a caller without a key costs nothing more.
        return answer(
            StatusCode::UNAUTHORIZED,
            RpcResponse::error(
                Value::Null,
                code::INVALID_REQUEST,
                "missing or wrong credentials: this agent's card names the scheme",
            ),
        );
    };
    if let Some(refused) = unreadable(&headers) {
        return refused;
    }
    let cap = served.max_request_bytes;
    let too_large = || {
        answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            RpcResponse::error(
                Value::Null,
                code::INVALID_REQUEST,
                format!("the request body is over the server's {cap}-byte limit: refused unread"),
            ),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > cap as u64) {
        return too_large();
    }
    // Read to the cap; a body that stalls or breaks off (troupe_host::serve's body limits) is
    // said to be so, not taken for a large one.
    let mut bytes = Vec::new();
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        match chunk {
            Ok(chunk) if bytes.len() + chunk.len() > cap => return too_large(),
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(e) => {
                return answer(
                    StatusCode::BAD_REQUEST,
                    RpcResponse::error(
                        Value::Null,
                        code::INVALID_REQUEST,
                        format!("the request body did not arrive whole: {e}"),
                    ),
                );
            }
        }
    }
    let request: RpcRequest = match serde_json::from_slice(&bytes) {
        Ok(request) => request,
        Err(e) => {
            let code = if serde_json::from_slice::<Value>(&bytes).is_ok() {
                code::INVALID_REQUEST
            } else {
                code::PARSE_ERROR
            };
            return refuse(
                Value::Null,
                code,
                format!("not a JSON-RPC 2.0 request: {e}"),
            );
        }
    };
    let id = request.id.clone();
    if request.jsonrpc != "2.0" {
        return refuse(id, code::INVALID_REQUEST, "`jsonrpc` must be \"2.0\"");
    }
    let trace = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceContext::from_traceparent)
        .map(|parent| parent.child())
        .unwrap_or_else(TraceContext::new_root);
    dispatch(&served, (&name, &caller), request, trace).await
}

/// Answer `request` to `caller` of `agent` (who asks: every task it reaches is its own).
async fn dispatch(
    served: &Served,
    who: (&str, &str),
    request: RpcRequest,
    trace: TraceContext,
) -> Response {
    let id = request.id.clone();
    match request.method.as_str() {
        method::SEND_MESSAGE => {
            let params: SendMessageRequest = match params(&request) {
                Ok(p) => p,
                Err(message) => return refuse(id, code::INVALID_PARAMS, message),
            };
            let (task, mut events) = match served
                .tasks
                .start(&served.ask, who, params.message, trace)
                .await
            {
                Ok(started) => started,
                Err(refusal) => return refused_task(id, &refusal),
            };
            // A send answers once the task is over (its events close) or waits for the caller.
            loop {
                match events.recv().await {
                    Ok(StreamResponse::StatusUpdate(update))
                        if update.status.state.is_terminal()
                            || update.status.state.is_interrupted() =>
                    {
                        break;
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
            let history = params.configuration.and_then(|c| c.history_length);
            let task = served.tasks.get(who, &task.id, history).unwrap_or(task);
            result(id, &SendMessageResponse::Task(task))
        }
        method::SEND_STREAMING_MESSAGE => {
            let params: SendMessageRequest = match params(&request) {
                Ok(p) => p,
                Err(message) => return refuse(id, code::INVALID_PARAMS, message),
            };
            match served
                .tasks
                .start(&served.ask, who, params.message, trace)
                .await
            {
                Ok((task, events)) => {
                    let catch_up = catch_up(&served.tasks, who, &task.id);
                    stream(id, task, events, catch_up)
                }
                Err(refusal) => refused_task(id, &refusal),
            }
        }
        method::SUBSCRIBE_TO_TASK => {
            let params: TaskIdRequest = match params(&request) {
                Ok(p) => p,
                Err(message) => return refuse(id, code::INVALID_PARAMS, message),
            };
            match served.tasks.subscribe(who, &params.id) {
                Ok((task, events)) => {
                    let catch_up = catch_up(&served.tasks, who, &task.id);
                    stream(id, task, events, catch_up)
                }
                Err(TaskRefusal::Finished(state)) => refuse(
                    id,
                    code::UNSUPPORTED_OPERATION,
                    format!(
                        "task `{}` is finished ({state:?}): GetTask has it",
                        params.id
                    ),
                ),
                Err(refusal) => refused_task(id, &refusal),
            }
        }
        method::GET_TASK => {
            let params: GetTaskRequest = match params(&request) {
                Ok(p) => p,
                Err(message) => return refuse(id, code::INVALID_PARAMS, message),
            };
            match served.tasks.get(who, &params.id, params.history_length) {
                Some(task) => result(id, &task),
                None => refused_task(id, &TaskRefusal::NotFound),
            }
        }
        method::CANCEL_TASK => {
            let params: TaskIdRequest = match params(&request) {
                Ok(p) => p,
                Err(message) => return refuse(id, code::INVALID_PARAMS, message),
            };
            match served.tasks.cancel(who, &params.id).await {
                Ok(task) => result(id, &task),
                Err(refusal) => refused_task(id, &refusal),
            }
        }
        method::LIST_TASKS => {
            let params: ListTasksRequest = match params(&request) {
                Ok(p) => p,
                Err(message) => return refuse(id, code::INVALID_PARAMS, message),
            };
            let page_size = params
                .page_size
                .and_then(|s| usize::try_from(s).ok())
                .filter(|s| *s > 0)
                .map_or(DEFAULT_PAGE, |s| s.min(MAX_PAGE));
            let offset = match params.page_token.as_deref().filter(|t| !t.is_empty()) {
                None => 0,
                Some(token) => match token.parse::<usize>() {
                    Ok(offset) => offset,
                    Err(_) => {
                        return refuse(
                            id,
                            code::INVALID_PARAMS,
                            format!("`{token}` is not a page token of this server"),
                        );
                    }
                },
            };
            let (tasks, total) = served.tasks.list(
                who,
                params.context_id.as_deref(),
                params.status.filter(|s| *s != TaskState::Unspecified),
                offset,
                page_size,
                params.include_artifacts.unwrap_or(false),
            );
            let next = offset + tasks.len();
            let response = ListTasksResponse {
                tasks,
                next_page_token: if next < total {
                    next.to_string()
                } else {
                    String::new()
                },
                page_size: i32::try_from(page_size).unwrap_or(i32::MAX),
                total_size: i32::try_from(total).unwrap_or(i32::MAX),
            };
            result(id, &response)
        }
        other => {
            let hint = if other.contains('/') {
                " (an A2A 0.3 name: troupe speaks A2A 1.0 — SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask)"
            } else {
                ""
            };
            refuse(
                id,
                code::METHOD_NOT_FOUND,
                format!("no method `{other}`{hint}"),
            )
        }
    }
}

/// A request whose body is not read: not `application/json` (a browser's form or `text/plain`
/// post, which it sends to any origin without asking), or without an `A2A-Version` of 1.x (one
/// without the header is A2A 0.3, as the protocol has it, and a browser sends no such header
/// to another origin unless a preflight allowed it).
fn unreadable(headers: &HeaderMap) -> Option<Response> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Some(answer(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            RpcResponse::error(
                Value::Null,
                code::INVALID_REQUEST,
                "a JSON-RPC request is sent as `Content-Type: application/json`: refused unread",
            ),
        ));
    }
    let version = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok());
    match version {
        Some(version) if version.trim().split('.').next() == Some("1") => None,
        Some(version) => Some(refuse(
            Value::Null,
            code::VERSION_NOT_SUPPORTED,
            format!("A2A version {version} is not spoken here: troupe speaks A2A 1.0"),
        )),
        None => Some(refuse(
            Value::Null,
            code::VERSION_NOT_SUPPORTED,
            "no A2A-Version header, which is A2A 0.3: troupe speaks A2A 1.0 (send `A2A-Version: 1.0`)",
        )),
    }
}

/// The request's params as `T`, or why they are not.
fn params<T: DeserializeOwned>(request: &RpcRequest) -> Result<T, String> {
    serde_json::from_value(request.params.clone())
        .map_err(|e| format!("params of {}: {e}", request.method))
}

fn result<T: Serialize>(id: Value, value: &T) -> Response {
    match serde_json::to_value(value) {
        Ok(value) => answer(StatusCode::OK, RpcResponse::result(id, value)),
        Err(e) => refuse(id, code::INTERNAL_ERROR, e.to_string()),
    }
}

fn refused_task(id: Value, refusal: &TaskRefusal) -> Response {
    match refusal {
        TaskRefusal::Context(
            why @ (ContextRefusal::Busy { .. }
            | ContextRefusal::NoLogRoom { .. }
            | ContextRefusal::Spawn(_)),
        ) => refuse(id, code::INTERNAL_ERROR, why.to_string()),
        TaskRefusal::Context(why @ ContextRefusal::Shared { .. }) => {
            refuse(id, code::UNSUPPORTED_OPERATION, why.to_string())
        }
        TaskRefusal::Context(why) => refuse(id, code::INVALID_PARAMS, why.to_string()),
        TaskRefusal::NotFound => refuse(id, code::TASK_NOT_FOUND, "no such task for this agent"),
        TaskRefusal::ContextMismatch => refuse(
            id,
            code::INVALID_PARAMS,
            "the message's contextId is not its task's: send it in the task's context (or without a contextId)",
        ),
        TaskRefusal::Finished(state) if state.is_terminal() => refuse(
            id,
            code::TASK_NOT_CANCELABLE,
            format!("the task is {state:?}: it takes no more messages and cannot be cancelled"),
        ),
        TaskRefusal::Finished(state) => refuse(
            id,
            code::INVALID_PARAMS,
            format!(
                "the task is {state:?} and waits for no answer: send without its taskId to start another"
            ),
        ),
    }
}

/// What a stream that fell behind is caught up with: its task as it is now and, while the task
/// runs, its events from then on (`TaskStore::catch_up` for the stream's caller).
type CatchUp =
    Box<dyn Fn() -> Option<(Task, Option<broadcast::Receiver<StreamResponse>>)> + Send + Sync>;

/// The catch-up of `who`'s task `task_id`.
fn catch_up(tasks: &TaskStore, (agent, caller): (&str, &str), task_id: &str) -> CatchUp {
    let tasks = tasks.clone();
    let (agent, caller, task_id) = (agent.to_string(), caller.to_string(), task_id.to_string());
    Box::new(move || tasks.catch_up((&agent, &caller), &task_id))
}

/// A stream's state: what it still has to send, and where more comes from.
struct Streaming {
    id: Value,
    events: Option<broadcast::Receiver<StreamResponse>>,
    queued: VecDeque<StreamResponse>,
    over: bool,
    catch_up: CatchUp,
}

/// A task that finished or waits for its caller ends the stream, as A2A has it: the caller
/// answers with a new message on the task.
fn ends_stream(event: &StreamResponse) -> bool {
    matches!(event, StreamResponse::StatusUpdate(update)
        if update.status.state.is_terminal() || update.status.state.is_interrupted())
}

/// The events that bring a stream up to `task` as it is: each artifact whole (replacing what
/// the stream had of it), then the status.
fn caught_up(task: &Task) -> Vec<StreamResponse> {
    let over = task.status.state.is_terminal();
    task.artifacts
        .iter()
        .map(|artifact| {
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                artifact: artifact.clone(),
                append: false,
                last_chunk: over,
            })
        })
        .chain(std::iter::once(StreamResponse::StatusUpdate(
            TaskStatusUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: task.status.clone(),
            },
        )))
        .collect()
}

/// A task's events as SSE: the task first, then every event until it is over. A stream that
/// falls behind the task's events (its reader slower than the agent) is caught up — the
/// answer so far whole, then the status — and goes on from there, never ended for it.
fn stream(
    id: Value,
    task: Task,
    events: broadcast::Receiver<StreamResponse>,
    catch_up: CatchUp,
) -> Response {
    let first = RpcResponse::result(
        id.clone(),
        serde_json::to_value(StreamResponse::Task(task)).unwrap_or(Value::Null),
    );
    let state = Streaming {
        id,
        events: Some(events),
        queued: VecDeque::new(),
        over: false,
        catch_up,
    };
    let rest = futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queued.pop_front() {
                if ends_stream(&event) {
                    state.over = true;
                    state.queued.clear();
                }
                let value = serde_json::to_value(&event).unwrap_or(Value::Null);
                return Some((RpcResponse::result(state.id.clone(), value), state));
            }
            if state.over {
                return None;
            }
            let events = state.events.as_mut()?;
            match events.recv().await {
                Ok(event) => state.queued.push_back(event),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "an A2A stream fell behind: caught up");
                    let (task, events) = (state.catch_up)()?;
                    state.queued.extend(caught_up(&task));
                    state.events = events;
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let all = futures::stream::once(async move { first })
        .chain(rest)
        .map(|response| {
            let data = serde_json::to_string(&response).unwrap_or_default();
            Ok::<_, Infallible>(SseEvent::default().data(data))
        });
    Sse::new(all)
        .keep_alive(KeepAlive::default())
        .into_response()
}
