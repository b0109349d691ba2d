//! Who may join: cookies, TLS, unique names.

use troupe_cluster::{ClusterError, NodeConfig, TlsConfig};
use troupe_runtime::{AskError, SpawnError, TeamError};

use super::support::child::{ChildNode, ChildSpec};
use super::support::{node, plain_node};

#[tokio::test]
async fn a_node_with_another_cookie_is_refused_and_reaches_nothing() {
    let mut spec = ChildSpec::new("b4", &["worker4"]);
    spec.cookie = "0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0".into();
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
    assert!(matches!(no_cookie, Err(ClusterError::WeakCookie(_))));
    let mut config = NodeConfig::new("a7", super::support::COOKIE);
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

/// A certificate authority and the node certificates it signs, as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "troupe test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca }
    }

    fn ca_path(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A node certificate for `troupe-node` signed by this authority (`signed`) or by itself.
    fn node(&self, file: &str, signed: bool) -> TlsConfig {
        let params = rcgen::CertificateParams::new(vec!["troupe-node".to_string()]).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = if signed {
            params.signed_by(&key, &*self.ca).unwrap()
        } else {
            params.self_signed(&key).unwrap()
        };
        let cert_path = self.dir.path().join(format!("{file}.pem"));
        let key_path = self.dir.path().join(format!("{file}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        TlsConfig {
            cert: cert_path,
            key: key_path,
            ca: self.ca_path(),
            server_name: "troupe-node".into(),
        }
    }
}

fn tls_child(name: &str, agents: &[&str], tls: &TlsConfig) -> ChildNode {
    let mut spec = ChildSpec::new(name, agents);
    spec.tls = Some((
        tls.cert.clone(),
        tls.key.clone(),
        tls.ca.clone(),
        tls.server_name.clone(),
    ));
    ChildNode::start(&spec)
}

#[tokio::test]
async fn tls_is_mutual_a_certificate_of_the_authority_gets_in_another_does_not() {
    let pki = Pki::new();
    let child = tls_child("b8", &["worker8"], &pki.node("b8", true));

    // Signed by another key than the authority's: the child refuses this node's certificate.
    let mut config = NodeConfig::new("a8rogue", super::support::COOKIE);
    config.tls = Some(pki.node("a8rogue", false));
    let (rogue_team, rogue) = node("a8rogue", &[], config).await;
    assert!(
        matches!(
            rogue.connect(child.addr).await,
            Err(ClusterError::Refused { .. })
        ),
        "a node with a certificate the authority did not sign got in"
    );
    rogue.shutdown().await;
    rogue_team.shutdown().await;

    let mut config = NodeConfig::new("a8", super::support::COOKIE);
    config.tls = Some(pki.node("a8", true));
    let (team, node) = node("a8", &[], config).await;
    assert_eq!(node.connect(child.addr).await.unwrap(), "b8");
    assert_eq!(team.ask("worker8", "mutual").await.unwrap(), "mutual@b8");
    node.shutdown().await;
    team.shutdown().await;
}

/// The session events of a bare ractor_cluster node, as they come.
struct Events(tokio::sync::mpsc::UnboundedSender<&'static str>);

impl ractor_cluster::NodeEventSubscription for Events {
    fn node_session_opened(&self, _: ractor_cluster::node::NodeServerSessionInformation) {}
    fn node_session_disconnected(&self, _: ractor_cluster::node::NodeServerSessionInformation) {
        let _ = self.0.send("disconnected");
    }
    fn node_session_authenticated(&self, _: ractor_cluster::node::NodeServerSessionInformation) {
        let _ = self.0.send("authenticated");
    }
}

/// The attack: a bare ractor_cluster node that knows the cookie and the authority, and speaks
/// TLS without a certificate of its own.
#[tokio::test]
async fn a_peer_without_a_certificate_is_refused_although_it_has_the_cookie() {
    use ractor::Actor;
    use ractor_cluster::{NodeServer, NodeServerMessage};

    let pki = Pki::new();
    let child = tls_child("b9", &["worker9"], &pki.node("b9", true));
    let server = NodeServer::new(
        0,
        super::support::COOKIE.into(),
        "rogue9".into(),
        "127.0.0.1".into(),
        None,
        Some(ractor_cluster::node::NodeConnectionMode::Isolated),
    )
    .with_listen_addr([127, 0, 0, 1].into());
    let (server, _task) = Actor::spawn(None, server, ()).await.unwrap();
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    server
        .cast(NodeServerMessage::SubscribeToEvents {
            id: "test".into(),
            subscription: Box::new(Events(tx)),
        })
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for ca in rustls::pki_types::pem::PemObject::pem_file_iter(pki.ca_path()).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connected = ractor_cluster::client_connect_enc(
        &server,
        child.addr,
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)),
        rustls::pki_types::ServerName::try_from("troupe-node").unwrap(),
    )
    .await;
    // With TLS 1.3 the client's half of the handshake may finish before the server has
    // checked anything; the session must then close without authenticating.
    if connected.is_ok() {
        let event = tokio::time::timeout(std::time::Duration::from_secs(15), events.recv())
            .await
            .expect("the session neither authenticated nor closed");
        assert_eq!(event, Some("disconnected"));
    }
    server.stop(None);
}

#[tokio::test]
async fn a_weak_cookie_is_refused_at_start_saying_why_and_how_to_make_one() {
    let team = troupe_runtime::Team::start(Default::default())
        .await
        .unwrap();
    for weak in ["test-cookie", "correct-horse", &"x".repeat(64)] {
        match troupe_cluster::ClusterNode::start(&team, NodeConfig::new("a10", weak)).await {
            Err(ClusterError::WeakCookie(why)) => {
                assert!(why.contains("openssl rand -hex 32"), "{why}");
                assert!(why.contains("offline"), "{why}");
            }
            other => panic!("{weak:?}: expected WeakCookie, got {other:?}"),
        }
    }
    team.shutdown().await;
}

#[tokio::test]
async fn a_busy_port_is_named_once_as_in_use() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let team = troupe_runtime::Team::start(Default::default())
        .await
        .unwrap();
    let mut config = NodeConfig::new("a11", super::support::COOKIE);
    config.listen = addr;
    let error = troupe_cluster::ClusterNode::start(&team, config)
        .await
        .unwrap_err();
    assert_eq!(error, ClusterError::AddrInUse(addr));
    assert_eq!(
        error.to_string(),
        format!("address {addr} is already in use")
    );
    team.shutdown().await;
}

#[test]
fn listening_beyond_loopback_without_tls_is_warned_about() {
    let mut config = NodeConfig::new("a12", super::support::COOKIE);
    assert_eq!(config.exposure_warning(), None);
    config.listen = "0.0.0.0:7000".parse().unwrap();
    let warning = config.exposure_warning().expect("no warning");
    assert!(warning.contains("0.0.0.0:7000"), "{warning}");
    assert!(warning.contains("without TLS"), "{warning}");
    config.tls = Some(TlsConfig {
        cert: "c".into(),
        key: "k".into(),
        ca: "ca".into(),
        server_name: "n".into(),
    });
    assert_eq!(config.exposure_warning(), None);
}

#[tokio::test]
async fn a_second_node_of_a_connected_name_is_refused_as_such_and_the_first_stays() {
    let first = ChildNode::start(&ChildSpec::new("dup13", &["worker13a"]));
    let second = ChildNode::start(&ChildSpec::new("dup13", &["worker13b"]));
    let (team, node) = plain_node("a13", &[]).await;
    assert_eq!(node.connect(first.addr).await.unwrap(), "dup13");
    match node.connect(second.addr).await {
        Err(ClusterError::Refused { reason, .. }) => assert!(
            reason.contains("a node named `dup13` is already connected"),
            "{reason}"
        ),
        other => panic!("expected Refused, got {other:?}"),
    }
    assert_eq!(node.peers(), vec!["dup13".to_string()]);
    assert_eq!(team.ask("worker13a", "hi").await.unwrap(), "hi@dup13");
    node.shutdown().await;
    team.shutdown().await;
}
