//! Who may join: cookies, TLS, unique names.

use troupe_cluster::{ClusterError, NodeConfig, TlsConfig};
use troupe_runtime::{AskError, SpawnError, TeamError};

use super::support::child::{ChildNode, ChildSpec};
use super::support::{node, plain_node};

#[tokio::test]
async fn a_node_with_another_cookie_is_refused_and_reaches_nothing() {
    let mut spec = ChildSpec::new("b4", &["worker4"]);
    spec.cookie = "not-the-test-cookie".into();
    let child = ChildNode::start(&spec);
    let (team, node) = plain_node("a4", &[]).await;
    match node.connect(child.addr).await {
        Err(ClusterError::Refused { addr, .. }) => assert_eq!(addr, child.addr),
        other => panic!("expected Refused, got {other:?}"),
    }
    assert!(node.peers().is_empty());
    assert!(matches!(
        team.ask("worker4", "hi").await,
        Err(AskError::NoSuchAgent { .. })
    ));
    node.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn a_name_another_node_holds_is_refused_at_spawn_naming_that_node() {
    let child = ChildNode::start(&ChildSpec::new("b5", &["worker5"]));
    let (team, node) = plain_node("a5", &[]).await;
    node.connect(child.addr).await.unwrap();
    let refused = team
        .spawn("worker5", super::support::agents::factory("worker5", "a5"))
        .await;
    assert_eq!(
        refused,
        Err(TeamError::Spawn(SpawnError::NameTakenOnNode {
            name: "worker5".into(),
            node: "b5".into()
        }))
    );
    // The remote one is still the one asked.
    assert_eq!(team.ask("worker5", "hi").await.unwrap(), "hi@b5");
    node.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn nodes_speak_tls_with_the_given_files_and_a_plain_node_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["troupe-node".to_string()]).unwrap();
    let cert = dir.path().join("node.pem");
    let key = dir.path().join("node.key");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let tls = TlsConfig {
        cert: cert.clone(),
        key: key.clone(),
        ca: cert.clone(),
        server_name: "troupe-node".into(),
    };
    let mut spec = ChildSpec::new("b6", &["worker6"]);
    spec.tls = Some((cert, key, tls.ca.clone(), tls.server_name.clone()));
    let child = ChildNode::start(&spec);

    // Without TLS, the handshake fails.
    let (plain_team, plain) = plain_node("a6plain", &[]).await;
    assert!(matches!(
        plain.connect(child.addr).await,
        Err(ClusterError::Refused { .. })
    ));
    plain.shutdown().await;
    plain_team.shutdown().await;

    let mut config = NodeConfig::new("a6", super::support::COOKIE);
    config.tls = Some(tls);
    let (team, node) = node("a6", &[], config).await;
    assert_eq!(node.connect(child.addr).await.unwrap(), "b6");
    assert_eq!(
        team.ask("worker6", "over tls").await.unwrap(),
        "over tls@b6"
    );
    node.shutdown().await;
    team.shutdown().await;
}

#[tokio::test]
async fn unusable_settings_are_clear_errors() {
    let team = troupe_runtime::Team::start(Default::default())
        .await
        .unwrap();
    let bad_name = troupe_cluster::ClusterNode::start(&team, NodeConfig::new("a b", "c")).await;
    assert!(
        matches!(&bad_name, Err(ClusterError::Config(m)) if m.contains("a b")),
        "{bad_name:?}"
    );
    let no_cookie = troupe_cluster::ClusterNode::start(&team, NodeConfig::new("a7", "")).await;
    assert!(matches!(no_cookie, Err(ClusterError::Config(_))));
    let mut config = NodeConfig::new("a7", "c");
    config.tls = Some(TlsConfig {
        cert: "/nonexistent/cert.pem".into(),
        key: "/nonexistent/key.pem".into(),
        ca: "/nonexistent/ca.pem".into(),
        server_name: "x".into(),
    });
    let missing = troupe_cluster::ClusterNode::start(&team, config).await;
    assert!(
        matches!(&missing, Err(ClusterError::Tls(m)) if m.contains("/nonexistent/cert.pem")),
        "{missing:?}"
    );
    team.shutdown().await;
}
