//! UiServer: the listening view, its address and URL, and its shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use troupe_host::serve::Gate;
use troupe_runtime::approval::Approvals;

use crate::config::UiConfig;
use crate::error::UiError;
use crate::feed::Feed;
use crate::guard::{Guard, check};
use crate::routes::{Routes, router};
use crate::source::Source;
use crate::token::Token;

/// A view being served. Dropping it stops the server (as [`UiServer::shutdown`] does, without
/// waiting).
#[derive(Debug)]
pub struct UiServer {
    addr: SocketAddr,
    url: String,
    feed: Arc<Feed>,
    closing: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl UiServer {
    /// Bind and serve `feed`, reading conversations from `source`; `approvals` `None` serves it
    /// read-only.
    pub(crate) async fn start(
        config: &UiConfig,
        feed: Arc<Feed>,
        approvals: Option<Approvals>,
        source: Source,
    ) -> Result<Self, UiError> {
        if let Some(warning) = config.exposure_warning() {
            tracing::warn!("{warning}");
        }
        let bind_error = |source| UiError::Bind {
            addr: config.bind,
            source,
        };
        let listener = TcpListener::bind(config.bind).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let token = Token::random()?;
        let url = format!("http://{addr}/?token={}", token.as_str());
        let (closing, closed) = watch::channel(false);
        let routes = Routes {
            feed: feed.clone(),
            approvals,
            token: token.as_str().to_string(),
            source: Arc::new(source),
            closing: closed.clone(),
        };
        let guard = Arc::new(Guard { token });
        // The gate outermost: a foreign Host or origin is refused before the token is looked at.
        let app = router(routes)
            .layer(axum::middleware::from_fn_with_state(guard, check))
            .layer(axum::middleware::from_fn_with_state(
                Arc::new(Gate::new(addr)),
                troupe_host::serve::guard,
            ));
        let mut until = closed;
        let limits = config.limits;
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = until.wait_for(|closed| *closed).await;
            };
            troupe_host::serve::serve(listener, app, limits, shutdown).await;
        });
        Ok(UiServer {
            addr,
            url,
            feed,
            closing,
            task: Some(task),
        })
    }

    /// Turns `true` when the server stops: tasks feeding it end then.
    pub(crate) fn closed(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL, with the one-time token: give it to the person who watches, nobody else.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Viewers connected now (one that closed counts until the next event notices).
    pub fn viewers(&self) -> usize {
        self.feed.viewers()
    }

    /// Stop serving: live feeds end, then the server.
    pub async fn shutdown(mut self) {
        let _ = self.closing.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for UiServer {
    fn drop(&mut self) {
        let _ = self.closing.send(true);
    }
}
