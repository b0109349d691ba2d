//! The asking side: how a team's [`Directory`](troupe_runtime::Directory) reaches an agent on
//! another node. Names are found in ractor's process groups (each node's gateway joins one group
//! per agent it hosts, in the [`SCOPE`] scope); requests go to that node's gateway.

use std::time::Duration;

use async_trait::async_trait;
use ractor::rpc::CallResult;
use ractor::{ActorCell, ActorRef};
use tracing::Instrument;
use troupe_protocol::TraceContext;
use troupe_protocol::trace::semconv;
use troupe_runtime::{AgentRequest, AskError, RemoteAgents};

use crate::peers::Peers;
use crate::wire::{self, Delivery, GatewayMsg, WireReply, WireRequest, WireResponseFormat};

/// The process-group scope troupe's agent names live in.
pub(crate) const SCOPE: &str = "troupe";

/// The group every node's gateway joins (not a valid agent name, so it cannot collide).
pub(crate) const GATEWAYS: &str = "troupe:gateway";

/// The group only node `node`'s gateway joins: ractor's node ids are numbered per connecting
/// server, so in a process with more than one node (tests) an id alone can name another peer.
pub(crate) fn gateway_of(node: &str) -> String {
    format!("{GATEWAYS}:{node}")
}

/// How long a node has to acknowledge a delivery before the ask fails.
pub(crate) const ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// Extra time the asker gives the answer over the agent's own timeout (the wire's round trip).
const ANSWER_SLACK: Duration = Duration::from_secs(2);

/// [`RemoteAgents`] over ractor_cluster: the route this node's directory takes to other nodes.
pub(crate) struct ClusterRoute {
    pub(crate) node: String,
    pub(crate) peers: Peers,
    /// How long an ask whose node went away waits for the agent's new home
    /// ([`NodeConfig::failover`](crate::NodeConfig::failover)); the team's directory does the
    /// waiting, since the new home may be this node.
    pub(crate) failover: Duration,
}

/// How a wire call ended.
enum Called {
    Reply(WireReply),
    /// The peer's gateway or the connection to it went away before answering.
    Down,
    TimedOut,
}

impl ClusterRoute {
    /// The gateway of the remote node hosting `name`, and that node's name.
    fn find(&self, name: &str) -> Option<(ActorCell, String)> {
        let members = ractor::pg::get_scoped_members(&SCOPE.to_string(), &name.to_string());
        members
            .into_iter()
            .find(|cell| !cell.get_id().is_local())
            .map(|cell| {
                let node_id = cell.get_id().node();
                let node = self
                    .peers
                    .name_of(node_id)
                    .unwrap_or_else(|| format!("node-{node_id}"));
                (cell, node)
            })
    }

    fn no_such_agent(&self, name: &str) -> AskError {
        AskError::NoSuchAgent {
            name: name.to_string(),
            known: self.names().into_iter().map(|(n, _)| n).collect(),
        }
    }

    /// The delivery of `request` to `name`, the gateway it goes to and that gateway's node.
    fn delivery(
        &self,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
        wants_answer: bool,
        job_kind: Option<&str>,
    ) -> Result<(Delivery, ActorCell, String), AskError> {
        let Some((gateway, node)) = self.find(name) else {
            return Err(self.no_such_agent(name));
        };
        let delivery = Delivery {
            // The caller's id when it gave one (a retry is the same request), else a new one.
            request_id: request
                .request_id
                .unwrap_or_else(|| AgentRequest::fresh_id(&self.node)),
            agent: name.to_string(),
            from: request.from,
            text: request.text,
            job_kind: job_kind.map(str::to_string),
            traceparent: request.trace.traceparent(),
            from_node: self.node.clone(),
            timeout_ms: millis(timeout),
            wants_answer,
            // A typed ask's schema goes with it, so the agent's model there is constrained too.
            response_format: request.response_format.map(WireResponseFormat::from),
        };
        Ok((delivery, gateway, node))
    }
}

/// What the acknowledgement of a delivery says.
fn acknowledged(called: Called, node: &str) -> Result<(), AskError> {
    let node = node.to_string();
    match called {
        Called::Reply(WireReply::Accepted) => Ok(()),
        Called::Reply(WireReply::Refused(reason)) => Err(AskError::Remote { node, reason }),
        Called::Reply(other) => Err(AskError::Remote {
            node,
            reason: format!("unexpected acknowledgement {other:?}"),
        }),
        Called::Down => Err(AskError::NodeDown { node }),
        Called::TimedOut => Err(AskError::Remote {
            node,
            reason: format!("no acknowledgement within {ACK_TIMEOUT:?}"),
        }),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[async_trait]
impl RemoteAgents for ClusterRoute {
    fn failover(&self) -> Duration {
        self.failover
    }

    fn locate(&self, name: &str) -> Option<String> {
        self.find(name).map(|(_, node)| node)
    }

    fn names(&self) -> Vec<(String, String)> {
        let mut names: Vec<(String, String)> = ractor::pg::which_scoped_groups(&SCOPE.to_string())
            .into_iter()
            .filter(|group| !group.starts_with(GATEWAYS))
            .filter_map(|group| self.locate(&group).map(|node| (group, node)))
            .collect();
        names.sort();
        names
    }

    async fn ask(
        &self,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
    ) -> Result<String, AskError> {
        self.ask_spanned(name, request, timeout, None).await
    }

    async fn ask_job(
        &self,
        name: &str,
        kind: &str,
        payload: String,
        trace: TraceContext,
        timeout: Duration,
    ) -> Result<String, AskError> {
        let request = AgentRequest {
            from: None,
            text: payload,
            trace,
            response_format: None,
            request_id: None,
        };
        self.ask_spanned(name, request, timeout, Some(kind)).await
    }

    async fn send(&self, name: &str, request: AgentRequest) -> Result<(), AskError> {
        let (delivery, gateway, node) =
            self.delivery(name, request, Duration::from_secs(300), false, None)?;
        let ack = call(
            &gateway,
            &WireRequest::Deliver(Box::new(delivery)),
            ACK_TIMEOUT,
        )
        .await;
        acknowledged(ack, &node)
    }
}

impl ClusterRoute {
    /// A remote ask — text, or a job of `job_kind` — inside its `remote_ask` span.
    async fn ask_spanned(
        &self,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
        job_kind: Option<&str>,
    ) -> Result<String, AskError> {
        // The span that sends the request; the other node's `remote_request` span names it as
        // its parent (by the id it is given here), so the trace is one tree across nodes.
        let sending = request.trace.child();
        let span = tracing::info_span!(
            "remote_ask",
            { semconv::OPERATION_NAME } = "remote_ask",
            { semconv::AGENT_NAME } = %name,
            { semconv::TRACE_ID } = %sending.id(),
            { semconv::SPAN_ID } = %format!("{:016x}", sending.span_id),
            { semconv::NODE } = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let request = AgentRequest {
            trace: sending,
            ..request
        };
        async {
            let result = self.ask_once(name, request, timeout, job_kind).await;
            if let Err(error) = &result {
                tracing::Span::current().record("error.type", error_kind(error));
            }
            result
        }
        .instrument(span)
        .await
    }

    /// Deliver and await in one round trip: both calls are sent at once, in that order, on the
    /// one ordered connection to the node; the acknowledgement is checked before the answer is
    /// believed.
    async fn ask_once(
        &self,
        name: &str,
        request: AgentRequest,
        timeout: Duration,
        job_kind: Option<&str>,
    ) -> Result<String, AskError> {
        let (delivery, gateway, node) = self.delivery(name, request, timeout, true, job_kind)?;
        tracing::Span::current().record(semconv::NODE, node.as_str());
        let wait = WireRequest::Await {
            request_id: delivery.request_id.clone(),
            timeout_ms: millis(timeout),
        };
        let deliver = WireRequest::Deliver(Box::new(delivery));
        // A failed acknowledgement ends the ask at once (dropping the pending await).
        let ((), mut answer) = tokio::try_join!(
            async { acknowledged(call(&gateway, &deliver, ACK_TIMEOUT).await, &node) },
            async { Ok(call(&gateway, &wait, timeout + ANSWER_SLACK).await) }
        )?;
        if matches!(answer, Called::Reply(WireReply::UnknownRequest)) {
            // The await overtook the delivery: ask again, now that it is acknowledged.
            answer = call(&gateway, &wait, timeout + ANSWER_SLACK).await;
        }
        match answer {
            Called::Reply(WireReply::Answer(Err(AskError::Timeout { .. }))) | Called::TimedOut => {
                Err(AskError::Timeout {
                    name: name.to_string(),
                    timeout,
                })
            }
            Called::Reply(WireReply::Answer(answer)) => answer,
            Called::Reply(WireReply::Refused(reason)) => Err(AskError::Remote { node, reason }),
            Called::Reply(other) => Err(AskError::Remote {
                node,
                reason: format!("unexpected answer {other:?}"),
            }),
            Called::Down => Err(AskError::NodeDown { node }),
        }
    }
}

/// One framed call to a remote gateway.
async fn call(gateway: &ActorCell, request: &WireRequest, timeout: Duration) -> Called {
    let gateway: ActorRef<GatewayMsg> = gateway.clone().into();
    let frame = wire::encode(request);
    match gateway
        .call(|reply| GatewayMsg::Call { frame, reply }, Some(timeout))
        .await
    {
        Ok(CallResult::Success(bytes)) => match wire::decode::<WireReply>(&bytes) {
            Ok(reply) => Called::Reply(reply),
            Err(error) => Called::Reply(WireReply::Refused(error.to_string())),
        },
        Ok(CallResult::Timeout) => Called::TimedOut,
        Ok(CallResult::SenderError) | Err(_) => Called::Down,
    }
}

fn error_kind(error: &AskError) -> &'static str {
    match error {
        AskError::NodeDown { .. } => "node_down",
        AskError::Remote { .. } => "remote_refused",
        AskError::Timeout { .. } => "timeout",
        _ => "ask_failed",
    }
}
