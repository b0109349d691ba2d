//! The opt-in http_get tool with its host allowlist.

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use troupe_tools::builtin::{HttpGetConfig, http_get_tool};
use troupe_tools::{ToolFailure, ToolOutcome, ToolRegistry};

use super::support::{run, workspace};

fn registry(config: HttpGetConfig) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(http_get_tool(config)).unwrap();
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
    let registry = registry(HttpGetConfig::allowing(["127.0.0.1"]));
    let url = format!("http://127.0.0.1:{port}/page");
    let result = run(&registry, &ctx, "http_get", json!({ "url": url })).await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    assert_eq!(
        result.content,
        "HTTP 200 OK\ncontent-type: text/plain\n\nhello from the test server"
    );
    assert!(server.await.unwrap().starts_with("GET /page HTTP/1.1"));
}
