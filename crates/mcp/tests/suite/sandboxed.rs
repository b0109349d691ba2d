//! A stdio server run in the sandbox (`McpServerConfig::sandboxed`): what a hostile model asks
//! it to do outside its working directory is refused by the kernel; unconfined (the default)
//! the same calls get through, so the test can fail.

use serde_json::json;
use troupe_mcp::RegisterMcp;
use troupe_tools::ToolRegistry;
use troupe_tools::sandbox::Sandbox;

use super::support::{file_writer, run};

#[tokio::test]
async fn a_sandboxed_server_writes_in_its_directory_and_nowhere_else_and_reaches_no_port() {
    let Some(config) = file_writer() else { return };
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();

    for (sandbox, confined) in [(None, false), (Some(Sandbox::default()), true)] {
        let mut config = config.clone().cwd(&ws);
        config.sandbox = sandbox;
        let mut registry = ToolRegistry::new();
        let _server = registry.register_mcp("writer", config).await.unwrap();
        let outside_file = outside.join(format!("escape-{confined}.txt"));
        let write = |path: &std::path::Path| json!({"path": path.to_string_lossy(), "text": "x"});
        let escaped = run(&registry, "writer__write", write(&outside_file)).await;
        let inside = run(&registry, "writer__write", write(&ws.join("inside.txt"))).await;
        let connected = run(&registry, "writer__connect", json!({ "port": port })).await;
        assert!(inside.content.contains("wrote"), "{}", inside.content);
        if confined {
            assert!(!outside_file.exists(), "{}", escaped.content);
            assert!(
                escaped.content.contains("Permission denied"),
                "{}",
                escaped.content
            );
            assert!(
                connected.content.contains("refused"),
                "{}",
                connected.content
            );
        } else {
            assert!(outside_file.exists(), "unconfined: {}", escaped.content);
            assert!(
                connected.content.contains("connected"),
                "{}",
                connected.content
            );
        }
    }
}
