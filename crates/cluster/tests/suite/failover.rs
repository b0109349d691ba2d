//! An ask whose agent's node died follows the agent to its new home — here, on the asker's own
//! node — under one request id, within the ask's timeout (`NodeConfig::failover`). Without a
//! wait the same loss is `NodeDown` at once (`across_nodes.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use troupe_cluster::NodeConfig;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint,
};

use super::support::child::{ChildNode, ChildSpec};
use super::support::{COOKIE, ask_in_background, node};

/// The requests an agent was given, as (text, request id).
type Given = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// Notes each request and answers `taken over`: the agent as its new home starts it.
struct NewHome(Given);

#[async_trait]
impl AgentBehavior for NewHome {
    async fn handle(
        &mut self,
        request: AgentRequest,
        _: &AgentContext,
    ) -> Result<String, AgentError> {
        self.0
            .lock()
            .unwrap()
            .push((request.text, request.request_id));
        Ok("taken over".into())
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }
}

#[tokio::test]
async fn an_ask_whose_node_died_is_answered_by_the_agent_started_on_the_askers_own_node() {
    let mut child = ChildNode::start(&ChildSpec::new("b40", &["worker40"]));
    let config = NodeConfig {
        failover: Duration::from_secs(30),
        ..NodeConfig::new("a40", COOKIE)
    };
    let (team, node) = node("a40", &[], config).await;
    node.connect(child.addr).await.unwrap();
    let asking = ask_in_background(&team, "worker40", "sleep 60000");
    // The request is in the worker's hands once its node has acknowledged it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.kill();
    // The agent's log taken over here, as a standby does: the same name on this team.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let given = Given::default();
    let factory: BehaviorFactory = {
        let given = given.clone();
        Arc::new(move |_| Ok(Box::new(NewHome(given.clone())) as Box<dyn AgentBehavior>))
    };
    team.spawn("worker40", factory).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(30), asking)
        .await
        .expect("the ask never found the agent's new home")
        .unwrap();
    assert_eq!(answer.as_deref(), Ok("taken over"));
    let given = given.lock().unwrap().clone();
    assert_eq!(given.len(), 1, "{given:?}");
    assert_eq!(given[0].0, "sleep 60000");
    // Delivered under an id, so a new home whose log handled it answers from the log.
    assert!(given[0].1.is_some(), "{given:?}");
    node.shutdown().await;
    team.shutdown().await;
}
