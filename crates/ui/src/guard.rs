//! What every request must pass: the token, and no other origin.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::token::Token;

/// The header the page sends the token in (`EventSource` cannot: it uses `?token=`).
pub(crate) const TOKEN_HEADER: &str = "x-troupe-token";

/// What a request is checked against.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) token: Token,
    /// The origins the page itself has (`http://127.0.0.1:PORT`, and `localhost` on loopback).
    pub(crate) origins: Vec<String>,
}

/// Refuse a request from another origin (403) or without the token (401); mark every answer
/// not to be sniffed, cached or referred.
pub(crate) async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ours = origin
            .to_str()
            .is_ok_and(|o| guard.origins.iter().any(|ok| ok == o));
        if !ours {
            return refuse(
                StatusCode::FORBIDDEN,
                "requests from another origin are refused",
            );
        }
    }
    if cross_site(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "requests from another origin are refused",
        );
    }
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

/// A browser that says the request comes from anywhere but the page itself or the person
/// (`same-origin`, `none`): a GET in `no-cors` mode carries no `Origin`, and another port of
/// the same host is `same-site`, not `cross-site`.
fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|v| !matches!(v.as_bytes(), b"same-origin" | b"none"))
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
