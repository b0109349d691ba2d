//! The A2A client: a remote agent's card read, and its JSON-RPC methods called, within
//! [`ClientLimits`].

use std::collections::VecDeque;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use troupe_protocol::TraceContext;

use crate::body::read_capped;
use crate::error::A2aError;
use crate::limits::ClientLimits;
use crate::wire::{
    AgentCard, CARD_PATH, JSONRPC_BINDING, PROTOCOL_VERSION, RpcRequest, RpcResponse,
    SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskIdRequest, VERSION_HEADER,
    method,
};
use troupe_host::sse::{SseDecoder, SseError, SseEvent, SseLimits};

/// Where a remote A2A agent is and how to talk to it.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aRemote {
    /// The agent's base URL; its card is at `{base_url}/.well-known/agent-card.json`.
    pub base_url: String,
    /// The environment variable holding the key the card's security scheme asks for (read
    /// through `troupe_host::credentials`, so `troupe` finds it after moving keys out of its
    /// environment). The key is sent only when the card asks for one.
    pub key_env: Option<String>,
    /// Whether the card may send requests to another host than the one it was read from. Off:
    /// a card that points elsewhere (and would take the key there) is refused.
    pub allow_other_hosts: bool,
    /// Caps and clocks.
    pub limits: ClientLimits,
}

impl A2aRemote {
    /// A remote agent at `base_url`, with default limits and no key.
    pub fn new(base_url: impl Into<String>) -> Self {
        A2aRemote {
            base_url: base_url.into(),
            key_env: None,
            allow_other_hosts: false,
            limits: ClientLimits::default(),
        }
    }

    /// Read the key the card asks for from this environment variable.
    pub fn key_env(mut self, name: impl Into<String>) -> Self {
        self.key_env = Some(name.into());
        self
    }

    /// Other caps and clocks.
    pub fn limits(mut self, limits: ClientLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// The header a key travels in; its value is marked sensitive and never printed.
#[derive(Clone)]
struct Credential {
    name: HeaderName,
    value: HeaderValue,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}: <redacted>)", self.name)
    }
}

/// A connected remote agent: its card, its JSON-RPC endpoint, the key it asked for.
#[derive(Debug, Clone)]
pub struct A2aClient {
    http: reqwest::Client,
    card: AgentCard,
    endpoint: Url,
    credential: Option<Credential>,
    limits: ClientLimits,
}

impl A2aClient {
    /// Read the agent's card and choose its JSON-RPC interface.
    ///
    /// # Errors
    /// An unreachable or oversized card, one that is not a card, one pointing at another host
    /// (unless allowed), one with no A2A 1.x JSON-RPC interface, one asking for a key that was
    /// not given or cannot be sent.
    pub async fn connect(remote: &A2aRemote) -> Result<Self, A2aError> {
        troupe_host::tls::install_crypto_provider();
        let limits = remote.limits;
        let http = reqwest::Client::builder()
            .connect_timeout(limits.connect)
            // A redirect could carry the key to a host the card did not name.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|source| A2aError::Http {
                what: "building the HTTP client".into(),
                source,
            })?;
        let base = parse_url(remote.base_url.trim_end_matches('/'))?;
        let card_url = parse_url(&format!(
            "{}/{CARD_PATH}",
            base.as_str().trim_end_matches('/')
        ))?;
        let what = format!("reading the agent card at {card_url}");
        let response = within(limits.connect, &what, http.get(card_url.clone()).send()).await?;
        let response = http_error(response, &what).await?;
        let body = read_capped(response, limits.card_bytes, limits.idle, "the agent card").await?;
        let card: AgentCard = serde_json::from_slice(&body).map_err(|e| A2aError::Malformed {
            what: what.clone(),
            reason: e.to_string(),
        })?;
        let endpoint = choose_endpoint(&card, &card_url, remote.allow_other_hosts)?;
        let credential = credential_for(&card, remote.key_env.as_deref())?;
        Ok(A2aClient {
            http,
            card,
            endpoint,
            credential,
            limits,
        })
    }

    /// The agent's card.
    pub fn card(&self) -> &AgentCard {
        &self.card
    }

    /// Whether the card says the agent streams.
    pub fn streams(&self) -> bool {
        self.card.capabilities.streaming == Some(true)
    }

    /// The limits this client holds the agent to.
    pub fn limits(&self) -> ClientLimits {
        self.limits
    }

    /// `SendMessage`: the task (or message) once the agent has finished or paused it.
    ///
    /// # Errors
    /// Transport, size, time and protocol errors, and the agent's JSON-RPC error.
    pub async fn send(
        &self,
        request: &SendMessageRequest,
        trace: Option<&TraceContext>,
    ) -> Result<SendMessageResponse, A2aError> {
        self.call(method::SEND_MESSAGE, request, trace, self.limits.deadline)
            .await
    }

    /// `SendStreamingMessage`: the task's events as they come.
    ///
    /// # Errors
    /// As [`send`](Self::send), for the stream's start; each event may fail on its own.
    pub async fn stream(
        &self,
        request: &SendMessageRequest,
        trace: Option<&TraceContext>,
    ) -> Result<A2aEventStream, A2aError> {
        let what = "starting the agent's stream";
        let response = self
            .post(method::SEND_STREAMING_MESSAGE, request, trace, what)
            .await?;
        let json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if json {
            // An error instead of a stream (the SDK answers a refused stream this way).
            let body =
                read_capped(response, self.limits.body_bytes, self.limits.idle, what).await?;
            let answer: RpcResponse = parse(&body, what)?;
            return Err(rpc_error(answer, what));
        }
        Ok(A2aEventStream {
            response,
            // One cap for a line and an event: an event of one `data:` line is that line.
            decoder: SseDecoder::new(SseLimits {
                line: self.limits.event_bytes,
                event: self.limits.event_bytes,
            }),
            queue: VecDeque::new(),
            idle: self.limits.idle,
            ended: false,
        })
    }

    /// `GetTask`.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn get_task(&self, id: &str) -> Result<Task, A2aError> {
        let request = TaskIdRequest { id: id.into() };
        self.call(method::GET_TASK, &request, None, self.limits.connect)
            .await
    }

    /// `CancelTask`.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn cancel_task(&self, id: &str) -> Result<Task, A2aError> {
        let request = TaskIdRequest { id: id.into() };
        self.call(method::CANCEL_TASK, &request, None, self.limits.connect)
            .await
    }

    async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
        trace: Option<&TraceContext>,
        deadline: Duration,
    ) -> Result<R, A2aError> {
        let what = format!("calling {method}");
        let exchange = async {
            let response = self.post(method, params, trace, &what).await?;
            let body =
                read_capped(response, self.limits.body_bytes, self.limits.idle, &what).await?;
            let answer: RpcResponse = parse(&body, &what)?;
            let Some(result) = answer.result else {
                return Err(rpc_error(answer, &what));
            };
            serde_json::from_value(result).map_err(|e| A2aError::Malformed {
                what: what.clone(),
                reason: e.to_string(),
            })
        };
        within(deadline, &what, exchange).await
    }

    async fn post<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        trace: Option<&TraceContext>,
        what: &str,
    ) -> Result<reqwest::Response, A2aError> {
        let params = serde_json::to_value(params).map_err(|e| A2aError::Malformed {
            what: what.into(),
            reason: e.to_string(),
        })?;
        let mut builder = self
            .http
            .post(self.endpoint.clone())
            .header(VERSION_HEADER, PROTOCOL_VERSION)
            .json(&RpcRequest::new(method, params));
        if let Some(trace) = trace {
            builder = builder.header("traceparent", trace.traceparent());
        }
        if let Some(credential) = &self.credential {
            builder = builder.header(credential.name.clone(), credential.value.clone());
        }
        let response = within(self.limits.connect, what, builder.send()).await?;
        http_error(response, what).await
    }
}

/// A remote task's events as they arrive, each within the idle limit.
#[derive(Debug)]
pub struct A2aEventStream {
    response: reqwest::Response,
    decoder: SseDecoder,
    queue: VecDeque<SseEvent>,
    idle: Duration,
    ended: bool,
}

impl A2aEventStream {
    /// The next event; `None` when the peer ended the stream.
    pub async fn next(&mut self) -> Option<Result<StreamResponse, A2aError>> {
        loop {
            match self.queue.pop_front() {
                Some(SseEvent::Data(data)) => return Some(stream_event(&data)),
                // OpenAI's end marker is no JSON-RPC response: a peer sending it is not A2A.
                Some(SseEvent::Done) => {
                    return Some(Err(A2aError::Malformed {
                        what: "a streamed event".into(),
                        reason: "`[DONE]` is not a JSON-RPC response".into(),
                    }));
                }
                None => {}
            }
            if self.ended {
                return None;
            }
            let chunk = match tokio::time::timeout(self.idle, self.response.chunk()).await {
                Err(_) => {
                    self.ended = true;
                    return Some(Err(A2aError::Timeout {
                        what: "waiting for the agent's next streamed event".into(),
                        secs: self.idle.as_secs_f64(),
                    }));
                }
                Ok(Err(source)) => {
                    self.ended = true;
                    return Some(Err(A2aError::Http {
                        what: "reading the agent's stream".into(),
                        source,
                    }));
                }
                Ok(Ok(None)) => {
                    self.ended = true;
                    continue;
                }
                Ok(Ok(Some(chunk))) => chunk,
            };
            match self.decoder.push(&chunk) {
                Ok(events) => self.queue.extend(events),
                Err(e) => {
                    self.ended = true;
                    return Some(Err(sse_error(e)));
                }
            }
        }
    }
}

/// The decoder's refusal as the client's error: a cap passed is [`A2aError::TooLarge`].
fn sse_error(error: SseError) -> A2aError {
    match error {
        SseError::LineTooLong { cap } => A2aError::TooLarge {
            what: "a streamed line".into(),
            cap,
        },
        SseError::EventTooLarge { cap } => A2aError::TooLarge {
            what: "a streamed event".into(),
            cap,
        },
        other => A2aError::Malformed {
            what: "a streamed line".into(),
            reason: other.to_string(),
        },
    }
}

fn stream_event(data: &str) -> Result<StreamResponse, A2aError> {
    let what = "a streamed event";
    let answer: RpcResponse = parse(data.as_bytes(), what)?;
    let Some(result) = answer.result else {
        return Err(rpc_error(answer, what));
    };
    serde_json::from_value(result).map_err(|e| A2aError::Malformed {
        what: what.into(),
        reason: e.to_string(),
    })
}

fn parse<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, A2aError> {
    serde_json::from_slice(body).map_err(|e| A2aError::Malformed {
        what: what.into(),
        reason: e.to_string(),
    })
}

fn rpc_error(answer: RpcResponse, what: &str) -> A2aError {
    match answer.error {
        Some(error) => A2aError::Rpc {
            code: error.code,
            message: error.message,
        },
        None => A2aError::Malformed {
            what: what.into(),
            reason: "neither a result nor an error".into(),
        },
    }
}

fn parse_url(url: &str) -> Result<Url, A2aError> {
    Url::parse(url).map_err(|e| A2aError::BadUrl {
        url: url.into(),
        reason: e.to_string(),
    })
}

/// `future`, or a timeout naming `what`.
async fn within<T, E>(
    limit: Duration,
    what: &str,
    future: impl Future<Output = Result<T, E>>,
) -> Result<T, A2aError>
where
    E: IntoA2aError,
{
    match tokio::time::timeout(limit, future).await {
        Ok(result) => result.map_err(|e| e.into_a2a(what)),
        Err(_) => Err(A2aError::Timeout {
            what: what.into(),
            secs: limit.as_secs_f64(),
        }),
    }
}

/// Errors [`within`] passes on: reqwest's (named by what was done) and ours.
trait IntoA2aError {
    fn into_a2a(self, what: &str) -> A2aError;
}

impl IntoA2aError for reqwest::Error {
    fn into_a2a(self, what: &str) -> A2aError {
        A2aError::Http {
            what: what.into(),
            source: self,
        }
    }
}

impl IntoA2aError for A2aError {
    fn into_a2a(self, _what: &str) -> A2aError {
        self
    }
}

/// `response`, or its HTTP error status with the start of its body.
async fn http_error(
    response: reqwest::Response,
    what: &str,
) -> Result<reqwest::Response, A2aError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = read_capped(response, 64 * 1024, Duration::from_secs(5), what)
        .await
        .map(|b| String::from_utf8_lossy(&b).chars().take(300).collect())
        .unwrap_or_default();
    Err(A2aError::Status {
        what: what.into(),
        status: status.as_u16(),
        body,
    })
}

/// The card's first JSON-RPC interface of A2A 1.x, on the card's own host unless allowed.
fn choose_endpoint(card: &AgentCard, card_url: &Url, other_hosts: bool) -> Result<Url, A2aError> {
    let speaks = |version: &str| version.is_empty() || version.split('.').next() == Some("1");
    let Some(interface) = card.supported_interfaces.iter().find(|i| {
        i.protocol_binding.eq_ignore_ascii_case(JSONRPC_BINDING) && speaks(&i.protocol_version)
    }) else {
        let offered: Vec<String> = card
            .supported_interfaces
            .iter()
            .map(|i| format!("{} {}", i.protocol_binding, i.protocol_version))
            .collect();
        return Err(A2aError::NoInterface {
            offered: if offered.is_empty() {
                "nothing".into()
            } else {
                offered.join(", ")
            },
        });
    };
    let endpoint = parse_url(&interface.url)?;
    let same_host = endpoint.scheme() == card_url.scheme()
        && endpoint.host_str() == card_url.host_str()
        && endpoint.port_or_known_default() == card_url.port_or_known_default();
    if !same_host && !other_hosts {
        return Err(A2aError::OtherHost {
            card_url: card_url.to_string(),
            endpoint: endpoint.to_string(),
        });
    }
    Ok(endpoint)
}

/// The header the card's security asks for, with the key from `key_env`; none when the card
/// asks for nothing (a key is never sent where it was not asked for).
fn credential_for(card: &AgentCard, key_env: Option<&str>) -> Result<Option<Credential>, A2aError> {
    // The schemes a requirement names, or every declared scheme when no requirement is listed.
    let mut names: Vec<&String> = card
        .security_requirements
        .iter()
        .flat_map(|r| r.schemes.keys())
        .collect();
    if names.is_empty() {
        names = card.security_schemes.keys().collect();
    }
    if names.is_empty() {
        return Ok(None);
    }
    let mut unsendable = Vec::new();
    for name in names {
        let Some(scheme) = card.security_schemes.get(name) else {
            continue;
        };
        let header = if let Some(http) = &scheme.http_auth_security_scheme
            && http.scheme.eq_ignore_ascii_case("bearer")
        {
            Some((AUTHORIZATION, true))
        } else if let Some(api_key) = &scheme.api_key_security_scheme
            && api_key.location.eq_ignore_ascii_case("header")
        {
            HeaderName::from_bytes(api_key.name.as_bytes())
                .ok()
                .map(|h| (h, false))
        } else {
            None
        };
        let Some((header, bearer)) = header else {
            unsendable.push(name.clone());
            continue;
        };
        let Some(env) = key_env else {
            return Err(A2aError::Auth(format!(
                "the agent's card asks for a key (scheme `{name}`): name the environment variable holding it (A2aRemote::key_env)"
            )));
        };
        let key = troupe_host::credentials::var(env)
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| {
                A2aError::Auth(format!(
                    "the agent's card asks for a key (scheme `{name}`) but ${env} is unset or empty"
                ))
            })?;
        let text = if bearer { format!("Bearer {key}") } else { key };
        let mut value = HeaderValue::from_str(&text).map_err(|_| {
            A2aError::Auth(format!("the key in ${env} is not a valid header value"))
        })?;
        value.set_sensitive(true);
        return Ok(Some(Credential {
            name: header,
            value,
        }));
    }
    Err(A2aError::Auth(format!(
        "the agent's card asks for credentials troupe cannot send (schemes: {}); troupe sends HTTP Bearer and API keys in a header",
        unsendable.join(", ")
    )))
}
