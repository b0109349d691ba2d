//! A typed ask across nodes (#34): `Team::ask_typed` on this process's node reaches a config
//! agent on a `troupe node` process, and the schema reaches that agent's model request as
//! OpenAI's `response_format`, as a local typed ask's does.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use troupe::cluster::{ClusterNode, NodeConfig};
use troupe::protocol::ResponseFormat;
use troupe::{Team, TeamConfig};

use super::support::chat_server::ChatServer;
use super::support::node_process::{COOKIE, one_node_at_a_time, start_node, write_config};

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Harbour {
    name: String,
    berths: u32,
}

#[test]
fn a_typed_ask_to_an_agent_on_troupe_node_constrains_the_model_there() {
    let _one = one_node_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let server = ChatServer::start_with(Arc::new(|_| {
        r#"{"name": "Bergen", "berths": 12}"#.to_string()
    }));
    let config = write_config(dir.path(), &server.url);
    let (mut child, addr) = start_node(&config, &dir.path().join("node.jsonl"));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let harbour = runtime.block_on(async {
        let team = Team::start(TeamConfig {
            ask_timeout: Duration::from_secs(60),
            ..TeamConfig::default()
        })
        .await
        .unwrap();
        let node = ClusterNode::start(&team, NodeConfig::new("local", COOKIE))
            .await
            .unwrap();
        assert_eq!(node.connect(addr).await.unwrap(), "remote");
        let harbour = team
            .ask_typed::<Harbour>("helper", "Describe the harbour of Bergen.")
            .await;
        node.shutdown().await;
        team.shutdown().await;
        harbour
    });
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());

    assert_eq!(
        harbour,
        Ok(Harbour {
            name: "Bergen".into(),
            berths: 12
        })
    );
    // One model call, on the other node, carrying the type's schema.
    assert_eq!(server.count(), 1);
    let sent = &server.request(0)["response_format"];
    assert_eq!(sent["type"], "json_schema", "{}", server.request(0));
    assert_eq!(sent["json_schema"]["name"], "Harbour");
    assert_eq!(
        sent["json_schema"]["schema"],
        ResponseFormat::of::<Harbour>().schema
    );
}
