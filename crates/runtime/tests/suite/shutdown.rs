//! Shutdown: every agent ends the work it runs outside its requests (`AgentBehavior::stop`)
//! before `Team::shutdown` returns, the last spawned first; a failing agent is restarted, not
//! stopped; a stop that hangs is cut off by the grace period.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::JoinHandle;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint, Team,
    TeamConfig,
};

/// Set when dropped: tells whether a background task has ended.
struct Ended(Arc<Mutex<Vec<String>>>, String);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(self.1.clone());
    }
}

/// A behaviour that starts a task of its own on `work` (one that never ends by itself), panics
/// on `panic`, and records in `stops` when it is stopped; a `hang` one never finishes stopping.
struct Worker {
    name: String,
    stops: Arc<Mutex<Vec<String>>>,
    ended: Arc<Mutex<Vec<String>>>,
    task: Option<JoinHandle<()>>,
    hang: bool,
}

#[async_trait]
impl AgentBehavior for Worker {
    async fn handle(
        &mut self,
        request: AgentRequest,
        _ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        match request.text.as_str() {
            "work" => {
                let ended = Ended(self.ended.clone(), self.name.clone());
                self.task = Some(tokio::spawn(async move {
                    let _ended = ended;
                    std::future::pending::<()>().await;
                }));
                Ok("working".into())
            }
            "panic" => panic!("boom"),
            other => Ok(other.to_string()),
        }
    }

    async fn stop(&mut self, ctx: &AgentContext) {
        self.stops.lock().unwrap().push(ctx.name.clone());
        if self.hang {
            std::future::pending::<()>().await;
        }
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }
}

struct Log {
    stops: Arc<Mutex<Vec<String>>>,
    ended: Arc<Mutex<Vec<String>>>,
}

impl Log {
    fn new() -> Self {
        Log {
            stops: Arc::default(),
            ended: Arc::default(),
        }
    }

    fn factory(&self, name: &str, hang: bool) -> BehaviorFactory {
        let (stops, ended, name) = (self.stops.clone(), self.ended.clone(), name.to_string());
        Arc::new(move |_| {
            Ok(Box::new(Worker {
                name: name.clone(),
                stops: stops.clone(),
                ended: ended.clone(),
                task: None,
                hang,
            }) as Box<dyn AgentBehavior>)
        })
    }

    fn stops(&self) -> Vec<String> {
        self.stops.lock().unwrap().clone()
    }

    fn ended(&self) -> Vec<String> {
        self.ended.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn shutdown_returns_after_every_agent_ended_its_own_tasks_last_spawned_first() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let log = Log::new();
    for name in ["service", "first", "second"] {
        team.spawn(name, log.factory(name, false)).await.unwrap();
    }
    for name in ["service", "second"] {
        assert_eq!(team.ask(name, "work").await.unwrap(), "working");
    }
    assert!(
        log.ended().is_empty(),
        "the tasks run on after their requests"
    );

    team.shutdown().await;
    assert_eq!(log.stops(), ["second", "first", "service"]);
    assert_eq!(log.ended(), ["second", "service"]);
}

#[tokio::test]
async fn a_failing_agent_is_restarted_not_stopped() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let log = Log::new();
    team.spawn("worker", log.factory("worker", false))
        .await
        .unwrap();
    assert!(team.ask("worker", "panic").await.is_err());
    assert_eq!(
        team.ask("worker", "still here").await.unwrap(),
        "still here"
    );
    assert!(log.stops().is_empty(), "a failure is no stop");

    team.shutdown().await;
    assert_eq!(log.stops(), ["worker"], "the restarted agent stops once");
}

#[tokio::test]
async fn a_stop_that_hangs_is_cut_off_by_the_grace_period() {
    let config = TeamConfig {
        shutdown_grace: Duration::from_millis(50),
        ..TeamConfig::default()
    };
    let team = Team::start(config).await.unwrap();
    let log = Log::new();
    team.spawn("stuck", log.factory("stuck", true))
        .await
        .unwrap();
    team.spawn("fine", log.factory("fine", false))
        .await
        .unwrap();
    // Bounds a hang of the test only: the grace period is what ends the stuck stop.
    tokio::time::timeout(Duration::from_secs(60), team.shutdown())
        .await
        .expect("shutdown returned");
    assert_eq!(log.stops(), ["fine", "stuck"]);
}
