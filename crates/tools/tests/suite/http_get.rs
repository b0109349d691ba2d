//! The opt-in http_get tool with its host allowlist.

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use troupe_tools::builtin::{HttpGetConfig, http_get_tool};
use troupe_tools::{ToolFailure, ToolOutcome, ToolRegistry};

use super::support::{assert_refused, run, workspace};

fn registry(config: HttpGetConfig) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(http_get_tool(config).unwrap()).unwrap();
    registry
}

#[tokio::test]
async fn a_host_off_the_allowlist_is_refused() {
    let (_dir, ctx) = workspace();
    let registry = registry(HttpGetConfig::allowing(["docs.rs", "*.example.com"]));
    let result = run(
        &registry,
        &ctx,
        "http_get",
        json!({"url": "https://evil.test/x"}),
    )
    .await;
    assert_eq!(result.failure(), Some(&ToolFailure::Refused));
    assert_eq!(
        result.content,
        "http_get refused https://evil.test/x: host \"evil.test\" is not on the allowlist \
         (allowed hosts: docs.rs, *.example.com)"
    );
    let result = run(
        &registry,
        &ctx,
        "http_get",
        json!({"url": "file:///etc/passwd"}),
    )
    .await;
    assert!(
        result
            .content
            .contains("scheme \"file\" is not http or https"),
        "{}",
        result.content
    );
}

#[test]
fn allowlist_patterns_match_exact_hosts_and_subdomains() {
    let config = HttpGetConfig::allowing(["docs.rs", "*.example.com"]);
    let allows = |url: &str| config.allows(&reqwest::Url::parse(url).unwrap());
    assert!(allows("https://docs.rs/serde"));
    assert!(allows("https://api.example.com/v1"));
    assert!(!allows("https://example.com.evil.test/"));
    assert!(!allows("https://notdocs.rs/"));
    assert!(!allows("ftp://docs.rs/"));
    assert!(!allows("https://docs.rs:8443/"));
}

#[test]
fn a_malformed_allowlist_entry_is_refused_when_the_tool_is_built() {
    for entry in ["*", "", "https://docs.rs", "docs.rs/api", "docs.rs:99999"] {
        let err = http_get_tool(HttpGetConfig::allowing(["docs.rs", entry])).unwrap_err();
        assert_eq!(err.entry, entry);
        assert!(
            err.to_string().starts_with(&format!(
                "http_get allow-list entry \"{entry}\" is invalid: "
            )),
            "{err}"
        );
    }
}

#[tokio::test]
async fn an_allowed_host_is_fetched() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = vec![0u8; 4096];
        let n = socket.read(&mut request).await.unwrap();
        let body = "hello from the test server";
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(response.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&request[..n]).into_owned()
    });
    let (_dir, ctx) = workspace();
    let registry = registry(HttpGetConfig::allowing([format!("127.0.0.1:{port}")]));
    let url = format!("http://127.0.0.1:{port}/page");
    let result = run(&registry, &ctx, "http_get", json!({ "url": url })).await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    assert_eq!(
        result.content,
        "HTTP 200 OK\ncontent-type: text/plain\n\nhello from the test server"
    );
    assert!(server.await.unwrap().starts_with("GET /page HTTP/1.1"));
}

/// A server on 127.0.0.1 answering every connection with `body`; returns its port.
async fn serve(body: &'static str) -> u16 {
    serve_response("200 OK", String::new(), body).await
}

/// A server on 127.0.0.1 answering every connection with `status`, extra `headers` and `body`.
async fn serve_response(status: &'static str, headers: String, body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = vec![0u8; 4096];
            let _ = socket.read(&mut request).await;
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
                 {headers}connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    port
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_unless_private_addresses_are_allowed() {
    let port = serve("internal data").await;
    let (_dir, ctx) = workspace();
    let url = format!("http://localhost:{port}/");
    let result = run(
        &registry(HttpGetConfig::allowing([format!("localhost:{port}")])),
        &ctx,
        "http_get",
        json!({ "url": url }),
    )
    .await;
    assert_refused(&result, "not a public address");
    assert!(
        !result.content.contains("internal data"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn a_port_not_on_the_allowlist_is_refused() {
    let port = serve("internal data").await;
    let (_dir, ctx) = workspace();
    // `127.0.0.1` without a port allows only port 80 for http.
    let result = run(
        &registry(HttpGetConfig::allowing(["127.0.0.1"])),
        &ctx,
        "http_get",
        json!({ "url": format!("http://127.0.0.1:{port}/") }),
    )
    .await;
    assert_eq!(
        result.failure(),
        Some(&ToolFailure::Refused),
        "{}",
        result.content
    );
    assert!(
        result
            .content
            .contains(&format!("port {port} is not allowed")),
        "{}",
        result.content
    );
    let other = port.wrapping_add(1).max(1);
    let result = run(
        &registry(HttpGetConfig::allowing([format!("127.0.0.1:{other}")])),
        &ctx,
        "http_get",
        json!({ "url": format!("http://127.0.0.1:{port}/") }),
    )
    .await;
    assert_eq!(
        result.failure(),
        Some(&ToolFailure::Refused),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn an_explicit_ip_literal_with_its_port_is_fetched() {
    let port = serve("hello").await;
    let (_dir, ctx) = workspace();
    let result = run(
        &registry(HttpGetConfig::allowing([format!("127.0.0.1:{port}")])),
        &ctx,
        "http_get",
        json!({ "url": format!("http://127.0.0.1:{port}/") }),
    )
    .await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    assert!(result.content.ends_with("\n\nhello"), "{}", result.content);
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_fetched_when_private_addresses_are_allowed() {
    let port = serve("internal data").await;
    let (_dir, ctx) = workspace();
    let config = HttpGetConfig {
        allow_private: true,
        ..HttpGetConfig::allowing([format!("localhost:{port}")])
    };
    let result = run(
        &registry(config),
        &ctx,
        "http_get",
        json!({ "url": format!("http://localhost:{port}/") }),
    )
    .await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    assert!(
        result.content.ends_with("\n\ninternal data"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn a_redirect_to_a_name_resolving_to_loopback_is_refused() {
    let inner = serve("internal data").await;
    let outer = serve_response(
        "302 Found",
        format!("location: http://localhost:{inner}/\r\n"),
        "",
    )
    .await;
    let (_dir, ctx) = workspace();
    let config =
        HttpGetConfig::allowing([format!("127.0.0.1:{outer}"), format!("localhost:{inner}")]);
    let result = run(
        &registry(config),
        &ctx,
        "http_get",
        json!({ "url": format!("http://127.0.0.1:{outer}/") }),
    )
    .await;
    assert_refused(&result, "not a public address");
    assert!(
        !result.content.contains("internal data"),
        "{}",
        result.content
    );
}
