//! What every request must pass: the token. Before it, `troupe_host::serve::Gate` (the A2A
//! server's too) has refused a foreign `Host` (DNS rebinding) and another origin's page
//! (`Origin`, `Sec-Fetch-Site`); the view allows no other origin.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::token::Token;

/// The header the page sends the token in (`EventSource` cannot: it uses `?token=`).
pub(crate) const TOKEN_HEADER: &str = "x-troupe-token";

/// What a request is checked against.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) token: Token,
}

/// Refuse a request without the token (401); mark every answer not to be sniffed, cached or
/// referred.
pub(crate) async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let given = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| query_token(request.uri().query()));
    if !given.is_some_and(|t| guard.token.matches(&t)) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "the view's token is missing or wrong",
        );
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // The token is in the page's URL: never send it on.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .map(str::to_string)
}

fn refuse(status: StatusCode, why: &'static str) -> Response {
    let mut response = (status, why).into_response();
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
