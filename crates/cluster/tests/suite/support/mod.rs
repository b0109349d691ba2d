//! Shared by the cluster tests: the agents a node hosts, and the child node process.

pub(crate) mod agents;
pub(crate) mod child;

use std::net::SocketAddr;
use std::time::Duration;

use troupe_cluster::{ClusterNode, NodeConfig};
use troupe_runtime::{AgentRequest, AskError, Team, TeamConfig};

/// A cookie as `openssl rand -hex 32` makes them (a weak one is refused).
pub(crate) const COOKIE: &str = "5d41402abc4b2a76b9719d911017c59228b46ed2c5fd8f4b7a6c1e0d3f9e8a71";

/// A team with `agents` (see [`agents::factory`]) and its node called `name`.
pub(crate) async fn node(name: &str, agents: &[&str], config: NodeConfig) -> (Team, ClusterNode) {
    let team = Team::start(TeamConfig {
        ask_timeout: Duration::from_secs(60),
        ..TeamConfig::default()
    })
    .await
    .unwrap();
    for agent in agents {
        team.spawn(*agent, agents::factory(agent, name))
            .await
            .unwrap();
    }
    let node = ClusterNode::start(
        &team,
        NodeConfig {
            name: name.into(),
            ..config
        },
    )
    .await
    .unwrap();
    (team, node)
}

/// A node named `name` with `agents`, on a free loopback port, with the test cookie.
pub(crate) async fn plain_node(name: &str, agents: &[&str]) -> (Team, ClusterNode) {
    node(name, agents, NodeConfig::new(name, COOKIE)).await
}

/// The address of a child node, parsed from its `READY` line.
pub(crate) fn parse_ready(line: &str) -> Option<SocketAddr> {
    line.strip_prefix("READY ")?.trim().parse().ok()
}

/// Ask `agent` `text` through `team`'s directory in a task of its own, with a 120 s timeout (far
/// past what the tests wait): the test goes on while the request is in flight.
pub(crate) fn ask_in_background(
    team: &Team,
    agent: &'static str,
    text: &'static str,
) -> tokio::task::JoinHandle<Result<String, AskError>> {
    let directory = team.directory().clone();
    tokio::spawn(async move {
        directory
            .ask(
                agent,
                AgentRequest::from_user(text),
                Duration::from_secs(120),
            )
            .await
    })
}
