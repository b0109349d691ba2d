//! The one way troupe serves HTTP: the A2A server (`troupe_a2a::serve`) and the live view
//! (`troupe_ui`) both listen through [`serve`], so what bounds one client is built once.
//!
//! HTTP/1.1 only (no h2c: neither server needs it, and hyper's header-read timeout is an
//! HTTP/1 one). Per connection:
//! - a request head must arrive whole within [`ServeLimits::head`] — also the longest an idle
//!   keep-alive connection waits for its next request (hyper starts the timer on every read of
//!   a head), so half-sent heads cannot pile up;
//! - a request body must bring its next bytes within [`ServeLimits::body_idle`] (`body.rs`);
//! - a response write the client does not take for [`ServeLimits::write_stall`] ends the
//!   connection (`io.rs`): a client that stops reading a stream holds nothing for long;
//! - at most [`ServeLimits::max_connections`] are open at once; past it the next is accepted
//!   only when one closes.
//!
//! [`Gate`] (with [`guard`]) is what both put in front of their routes: the `Host` must be
//! the server's own and a browser page of another origin gets in only when allowed (CORS).
//!
//! Shutdown is graceful: the listener closes, each connection finishes the request it serves
//! (a stream ends when its server ends it), and [`serve`] returns when every one has.

mod body;
mod gate;
mod io;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use body::IdleBody;
use io::StallingIo;

pub use gate::{Gate, GateError, guard};

/// What one client may hold of a server, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// The longest a request head may take to arrive, and an idle connection may wait for one.
    pub head: Duration,
    /// The longest a request body may go without bringing more bytes.
    pub body_idle: Duration,
    /// The longest a response write may wait for the client to read.
    pub write_stall: Duration,
    /// The most connections open at once.
    pub max_connections: usize,
}

impl Default for ServeLimits {
    /// 10 s for a head, 15 s between a body's bytes, 30 s for a stalled write, 512
    /// connections: far beyond what a client on a working network needs, short enough that a
    /// client holding connections half-open costs little.
    fn default() -> Self {
        ServeLimits {
            head: Duration::from_secs(10),
            body_idle: Duration::from_secs(15),
            write_stall: Duration::from_secs(30),
            max_connections: 512,
        }
    }
}

/// Serve `app` on `listener` within `limits` until `shutdown` completes, then finish the open
/// connections' requests and return.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ServeLimits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let (closing, closed) = watch::channel(false);
    let room = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = room.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or the peer left before the accept: keep
                    // listening, after a pause so a full table is not spun on.
                    tracing::debug!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let mut app = app.clone();
                let request =
                    request.map(|b| axum::body::Body::new(IdleBody::new(b, limits.body_idle)));
                async move {
                    let answered: Result<_, Infallible> =
                        tower_service::Service::call(&mut app, request).await;
                    answered
                }
            });
            let io = TokioIo::new(StallingIo::new(stream, limits.write_stall));
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.head)
                .serve_connection(io, service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "a connection ended");
                    }
                    return;
                }
                _ = closed.wait_for(|closed| *closed) => {}
            }
            connection.as_mut().graceful_shutdown();
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "a connection ended");
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    drop(closed);
    // Every connection holds a receiver: `closed` resolves once the last one ends.
    closing.closed().await;
}

#[cfg(test)]
mod tests;
