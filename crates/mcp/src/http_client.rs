//! The streamable HTTP client, watched for answers over rmcp's size limits (16 MiB for a JSON
//! body or an SSE event).
//!
//! rmcp closes the whole connection when an answer is over its limit, so the call would read
//! as a server that stopped answering. This client is reqwest's, passed through, except that
//! it tells the connection when a response or an event was over the limit: the call then
//! answers that the result was too large.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use tokio::sync::watch;

/// reqwest's client, reporting answers over the size limits to `too_large`.
#[derive(Clone)]
pub(crate) struct WatchedClient {
    inner: reqwest::Client,
    too_large: Arc<watch::Sender<u64>>,
}

impl WatchedClient {
    pub(crate) fn new(too_large: watch::Sender<u64>) -> Self {
        troupe_host::tls::install_crypto_provider();
        WatchedClient {
            inner: reqwest::Client::default(),
            too_large: Arc::new(too_large),
        }
    }

    fn report(&self) {
        tracing::warn!("MCP server sent an answer over the HTTP client's size limit");
        self.too_large
            .send_modify(|count| *count = count.wrapping_add(1));
    }

    /// `result`, reported when it is the error of a body over the limit.
    fn check<T>(
        &self,
        result: Result<T, StreamableHttpError<reqwest::Error>>,
    ) -> Result<T, StreamableHttpError<reqwest::Error>> {
        if let Err(StreamableHttpError::ResponseBodyTooLarge { .. }) = &result {
            self.report();
        }
        result
    }

    /// `stream`, reporting an event over the limit.
    fn watch(&self, stream: BoxedSseResponse) -> BoxedSseResponse {
        let client = self.clone();
        stream
            .inspect(move |event| {
                // rmcp's own test for this error is private; its message is the stable part.
                if let Err(e) = event
                    && e.to_string().contains("exceeded the maximum size")
                {
                    client.report();
                }
            })
            .boxed()
    }

    fn watch_post(
        &self,
        result: Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        match self.check(result)? {
            StreamableHttpPostResponse::Sse(stream, session) => {
                Ok(StreamableHttpPostResponse::Sse(self.watch(stream), session))
            }
            other => Ok(other),
        }
    }
}

impl StreamableHttpClient for WatchedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.watch_post(result)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.watch_post(result)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let result = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.watch_post(result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        Ok(self.watch(self.check(stream)?))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        Ok(self.watch(self.check(stream)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_builds_with_the_one_crypto_provider() {
        // reqwest has no provider of its own: building panics unless aws-lc-rs was installed.
        let (too_large, _) = watch::channel(0);
        let client = WatchedClient::new(too_large);
        // A second client, built the plain way, finds the provider installed too.
        drop(client);
        let _plain = reqwest::Client::new();
    }
}
