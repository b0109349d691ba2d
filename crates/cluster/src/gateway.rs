//! The gateway: the one actor per node that other nodes talk to. It hands their requests to the
//! node's own agents through the team's [`Directory`], exactly as a local `ask` would.
//!
//! Delivery is two calls: `Deliver` is acknowledged at once (the request is in the gateway's
//! hands), then `Await` waits for the answer. A delivery id seen before is acknowledged and not
//! handled again, and its answer stays here until it is collected (or crowded out by
//! [`ANSWERS_KEPT`] newer ones), so an asker that reconnects and awaits again gets the same
//! answer rather than a second run.
//!
//! A delivery's typed-answer format reaches the agent's model only once checked
//! ([`WireResponseFormat::checked`](crate::wire::WireResponseFormat::checked)): one a peer sends
//! that no answer type would make is refused at acknowledgement, before anything runs.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::watch;
use tracing::Instrument;
use troupe_protocol::ResponseFormat;
use troupe_protocol::TraceContext;
use troupe_protocol::trace::semconv;
use troupe_runtime::{AgentRequest, AskError, Directory};

use crate::wire::{self, Delivery, GatewayMsg, WireReply, WireRequest};

/// Deliveries remembered (with their answers once ready), newest first out of the door last.
pub(crate) const ANSWERS_KEPT: usize = 4096;

/// One delivery's answer: `None` until the agent has answered.
type AnswerSlot = watch::Receiver<Option<Result<String, AskError>>>;

pub(crate) struct Gateway;

pub(crate) struct GatewayArgs {
    pub(crate) node: String,
    pub(crate) directory: Directory,
}

pub(crate) struct GatewayState {
    node: String,
    directory: Directory,
    answers: HashMap<String, AnswerSlot>,
    /// Delivery ids in arrival order, to forget the oldest past [`ANSWERS_KEPT`].
    order: VecDeque<String>,
}

impl Actor for Gateway {
    type Msg = GatewayMsg;
    type State = GatewayState;
    type Arguments = GatewayArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: GatewayArgs,
    ) -> Result<GatewayState, ActorProcessingErr> {
        Ok(GatewayState {
            node: args.node,
            directory: args.directory,
            answers: HashMap::new(),
            order: VecDeque::new(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: GatewayMsg,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        let GatewayMsg::Call { frame, reply } = message;
        match wire::decode::<WireRequest>(&frame) {
            Err(error) => answer(reply, &WireReply::Refused(error.to_string())),
            Ok(WireRequest::Hello { .. }) => answer(
                reply,
                &WireReply::Hello {
                    node: state.node.clone(),
                },
            ),
            Ok(WireRequest::Deliver(mut delivery)) => {
                match delivery
                    .response_format
                    .take()
                    .map(|f| f.checked())
                    .transpose()
                {
                    Err(reason) => answer(reply, &WireReply::Refused(reason)),
                    Ok(format) => {
                        state.deliver(*delivery, format);
                        answer(reply, &WireReply::Accepted);
                    }
                }
            }
            Ok(WireRequest::Await {
                request_id,
                timeout_ms,
            }) => match state.answers.get(&request_id).cloned() {
                None => answer(reply, &WireReply::UnknownRequest),
                // Waiting happens off the actor: the gateway keeps taking deliveries.
                Some(slot) => {
                    tokio::spawn(await_answer(slot, timeout_ms, reply));
                }
            },
        }
        Ok(())
    }
}

impl GatewayState {
    /// Start handling `delivery` (its answer in `format`, checked) unless it was delivered
    /// before.
    fn deliver(&mut self, delivery: Delivery, format: Option<ResponseFormat>) {
        if self.answers.contains_key(&delivery.request_id) {
            tracing::debug!(request_id = %delivery.request_id, "duplicate delivery acknowledged, not handled again");
            return;
        }
        let (tx, rx) = watch::channel(None);
        self.answers.insert(delivery.request_id.clone(), rx);
        self.order.push_back(delivery.request_id.clone());
        while self.order.len() > ANSWERS_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.answers.remove(&old);
            }
        }
        let directory = self.directory.clone();
        let node = self.node.clone();
        tokio::spawn(async move {
            let result = handle_delivery(&directory, &node, delivery, format).await;
            let _ = tx.send(Some(result));
        });
    }
}

/// Ask the local agent the delivery names, inside a span that continues the asker's trace.
async fn handle_delivery(
    directory: &Directory,
    node: &str,
    delivery: Delivery,
    response_format: Option<ResponseFormat>,
) -> Result<String, AskError> {
    let sender = TraceContext::from_traceparent(&delivery.traceparent);
    let trace = sender.map_or_else(TraceContext::new_root, |t| t.child());
    let span = tracing::info_span!(
        "remote_request",
        { semconv::OPERATION_NAME } = "remote_request",
        { semconv::AGENT_NAME } = %delivery.agent,
        { semconv::TRACE_ID } = %trace.id(),
        { semconv::REMOTE_PARENT_SPAN_ID } = sender.map(|s| format!("{:016x}", s.span_id)),
        { semconv::NODE } = %delivery.from_node,
        error.type = tracing::field::Empty,
    );
    // Only this node's agents: a stale group membership must not bounce a request onward.
    if let Some(elsewhere) = directory.remote_node_of(&delivery.agent) {
        return Err(AskError::Remote {
            node: node.to_string(),
            reason: format!(
                "`{}` is not on this node (it is on `{elsewhere}`)",
                delivery.agent
            ),
        });
    }
    let request = AgentRequest {
        from: delivery.from,
        text: delivery.text,
        trace,
        response_format,
        // The asker's id for the request: the agent answers a request it already handled (a
        // retry to this node after its first home died) from its log.
        request_id: Some(delivery.request_id.clone()),
    };
    let timeout = Duration::from_millis(delivery.timeout_ms);
    async {
        let result = if let Some(kind) = &delivery.job_kind {
            directory
                .run_wire_job(&delivery.agent, kind, &request.text, trace, timeout)
                .await
        } else if delivery.wants_answer {
            directory.ask(&delivery.agent, request, timeout).await
        } else {
            directory
                .send(&delivery.agent, request)
                .await
                .map(|()| String::new())
        };
        if let Err(error) = &result {
            tracing::Span::current().record("error.type", error_type(error));
        }
        result
    }
    .instrument(span)
    .await
}

/// Wait (off the actor) for a delivery's answer, then send it back.
async fn await_answer(mut slot: AnswerSlot, timeout_ms: u64, reply: RpcReplyPort<Vec<u8>>) {
    let waited = tokio::time::timeout(
        Duration::from_millis(timeout_ms),
        slot.wait_for(Option::is_some),
    )
    .await;
    let result = match waited {
        Ok(Ok(answer)) => answer.clone().unwrap_or(Err(AskError::ShutDown)),
        // The sender went away: the gateway is stopping.
        Ok(Err(_)) => Err(AskError::ShutDown),
        Err(_) => Err(AskError::Timeout {
            name: String::new(),
            timeout: Duration::from_millis(timeout_ms),
        }),
    };
    answer(reply, &WireReply::Answer(result));
}

fn answer(reply: RpcReplyPort<Vec<u8>>, body: &WireReply) {
    // The asker may have timed out and gone; that is its business.
    let _ = reply.send(wire::encode(body));
}

fn error_type(error: &AskError) -> &'static str {
    match error {
        AskError::NoSuchAgent { .. } => "no_such_agent",
        AskError::Timeout { .. } => "timeout",
        AskError::Agent { .. } => "agent_error",
        AskError::AgentFailed { .. } => "agent_failed",
        _ => "ask_failed",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use troupe_runtime::{AgentBehavior, AgentContext, AgentError, Checkpoint, Team, TeamConfig};

    use super::*;

    struct Counter(Arc<AtomicUsize>);

    #[async_trait]
    impl AgentBehavior for Counter {
        async fn handle(
            &mut self,
            request: AgentRequest,
            _ctx: &AgentContext,
        ) -> Result<String, AgentError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(format!("{} #{n}", request.text))
        }
        fn checkpoint(&self) -> Checkpoint {
            Checkpoint::default()
        }
    }

    async fn call(gateway: &ActorRef<GatewayMsg>, request: &WireRequest) -> WireReply {
        let frame = wire::encode(request);
        let bytes = gateway
            .call(|reply| GatewayMsg::Call { frame, reply }, None)
            .await
            .unwrap()
            .unwrap();
        wire::decode(&bytes).unwrap()
    }

    fn delivery(id: &str) -> Delivery {
        Delivery {
            request_id: id.into(),
            agent: "counter".into(),
            from: None,
            text: "hi".into(),
            job_kind: None,
            traceparent: TraceContext::new_root().traceparent(),
            from_node: "elsewhere".into(),
            timeout_ms: 10_000,
            wants_answer: true,
            response_format: None,
        }
    }

    #[tokio::test]
    async fn a_delivery_seen_twice_is_handled_once_and_its_answer_collected_again() {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        team.spawn(
            "counter",
            Arc::new(move |_| Ok(Box::new(Counter(seen.clone())) as Box<dyn AgentBehavior>)),
        )
        .await
        .unwrap();
        let (gateway, _task) = Actor::spawn(
            None,
            Gateway,
            GatewayArgs {
                node: "here".into(),
                directory: team.directory().clone(),
            },
        )
        .await
        .unwrap();

        let deliver = WireRequest::Deliver(Box::new(delivery("r-1")));
        assert_eq!(call(&gateway, &deliver).await, WireReply::Accepted);
        // A reconnecting asker delivers again: acknowledged, not run again.
        assert_eq!(call(&gateway, &deliver).await, WireReply::Accepted);
        let wait = WireRequest::Await {
            request_id: "r-1".into(),
            timeout_ms: 10_000,
        };
        let first = call(&gateway, &wait).await;
        assert_eq!(first, WireReply::Answer(Ok("hi #1".into())));
        assert_eq!(call(&gateway, &wait).await, first);
        assert_eq!(count.load(Ordering::SeqCst), 1);

        let unknown = WireRequest::Await {
            request_id: "never".into(),
            timeout_ms: 10,
        };
        assert_eq!(call(&gateway, &unknown).await, WireReply::UnknownRequest);
        let other_version = wire::encode_as(WIRE_PROTOCOL_NEXT, &deliver);
        let bytes = gateway
            .call(
                |reply| GatewayMsg::Call {
                    frame: other_version,
                    reply,
                },
                None,
            )
            .await
            .unwrap()
            .unwrap();
        match wire::decode::<WireReply>(&bytes).unwrap() {
            WireReply::Refused(reason) => assert!(reason.contains("protocol"), "{reason}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(count.load(Ordering::SeqCst), 1);
        gateway.stop(None);
        team.shutdown().await;
    }

    const WIRE_PROTOCOL_NEXT: u32 = crate::wire::WIRE_PROTOCOL + 1;

    /// Answers the name of the response format its request carries (`none` without one).
    struct FormatEcho;

    #[async_trait]
    impl AgentBehavior for FormatEcho {
        async fn handle(
            &mut self,
            request: AgentRequest,
            _ctx: &AgentContext,
        ) -> Result<String, AgentError> {
            Ok(request
                .response_format
                .map_or_else(|| "none".to_string(), |f| f.name))
        }
        fn checkpoint(&self) -> Checkpoint {
            Checkpoint::default()
        }
    }

    #[tokio::test]
    async fn a_checked_response_format_reaches_the_agent_and_a_hostile_one_is_refused_unrun() {
        let team = Team::start(TeamConfig::default()).await.unwrap();
        team.spawn(
            "counter",
            Arc::new(|_| Ok(Box::new(FormatEcho) as Box<dyn AgentBehavior>)),
        )
        .await
        .unwrap();
        let (gateway, _task) = Actor::spawn(
            None,
            Gateway,
            GatewayArgs {
                node: "here".into(),
                directory: team.directory().clone(),
            },
        )
        .await
        .unwrap();
        let typed = |id: &str, schema: serde_json::Value| {
            WireRequest::Deliver(Box::new(Delivery {
                response_format: Some(crate::wire::WireResponseFormat {
                    name: "City".into(),
                    schema,
                    strict: false,
                }),
                ..delivery(id)
            }))
        };
        let wait = |id: &str| WireRequest::Await {
            request_id: id.into(),
            timeout_ms: 10_000,
        };

        let schema = serde_json::json!({"type": "object"});
        assert_eq!(
            call(&gateway, &typed("t-1", schema)).await,
            WireReply::Accepted
        );
        assert_eq!(
            call(&gateway, &wait("t-1")).await,
            WireReply::Answer(Ok("City".into()))
        );
        // A schema no answer type makes is refused before anything runs: nothing to await.
        let huge = serde_json::json!({"description": "x".repeat(crate::wire::MAX_SCHEMA_BYTES)});
        match call(&gateway, &typed("t-2", huge)).await {
            WireReply::Refused(reason) => assert!(reason.contains("schema"), "{reason}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(
            call(&gateway, &wait("t-2")).await,
            WireReply::UnknownRequest
        );
        // An untyped delivery runs untyped.
        assert_eq!(
            call(&gateway, &WireRequest::Deliver(Box::new(delivery("t-3")))).await,
            WireReply::Accepted
        );
        assert_eq!(
            call(&gateway, &wait("t-3")).await,
            WireReply::Answer(Ok("none".into()))
        );
        gateway.stop(None);
        team.shutdown().await;
    }
}
