//! The raw baselines the runtime benches measure troupe against: a tokio echo task over
//! mpsc + oneshot and a bare ractor echo actor.

use tokio::sync::{mpsc, oneshot};

/// What the raw tokio echo task receives.
pub type EchoMsg = (String, oneshot::Sender<String>);

/// A request to a bare ractor echo actor.
pub struct Ping(pub String, pub ractor::RpcReplyPort<String>);

impl ractor::Message for Ping {}

/// The bare ractor echo actor: answers with the request's text.
pub struct RactorEcho;

impl ractor::Actor for RactorEcho {
    type Msg = Ping;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Ping>,
        _args: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ractor::ActorRef<Ping>,
        Ping(text, reply): Ping,
        _state: &mut (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        let _ = reply.send(text);
        Ok(())
    }
}

/// The raw tokio echo task: answers each request with its text until every sender is gone.
pub async fn tokio_echo(mut rx: mpsc::UnboundedReceiver<EchoMsg>) {
    while let Some((text, reply)) = rx.recv().await {
        let _ = reply.send(text);
    }
}
