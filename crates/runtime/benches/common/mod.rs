//! What the runtime benches share: a trivial agent behaviour, one that keeps a conversation
//! (`history`), the raw baselines (`raw`), heap accounting (`heap`), and a tokio runtime.

// A global allocator wrapper is `unsafe` by nature; only this module may be.
#[allow(dead_code, unsafe_code)]
pub mod heap;
#[allow(dead_code)]
pub mod history;
#[allow(dead_code)]
pub mod raw;

use std::sync::Arc;

use async_trait::async_trait;
use troupe_runtime::{
    AgentBehavior, AgentContext, AgentError, AgentRequest, BehaviorFactory, Checkpoint,
};

/// Answers every request with its own text and keeps no state: the cheapest possible agent, so a
/// benchmark of it measures the runtime (mailbox, reply port, directory, checkpoint) alone.
pub struct Echo;

#[async_trait]
impl AgentBehavior for Echo {
    async fn handle(
        &mut self,
        request: AgentRequest,
        _ctx: &AgentContext,
    ) -> Result<String, AgentError> {
        Ok(request.text)
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::default()
    }

    /// Nothing to keep: the first checkpoint stays right.
    fn update_checkpoint(&self, _checkpoint: &mut Checkpoint) {}
}

/// A factory for [`Echo`].
pub fn echo_factory() -> BehaviorFactory {
    Arc::new(|_checkpoint: Option<Checkpoint>| Ok(Box::new(Echo) as Box<dyn AgentBehavior>))
}

/// The multi-threaded tokio runtime a program using troupe would run (all cores).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The number in environment variable `name`, or `default` when it is unset or not a number.
#[allow(dead_code)]
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of `samples` (NaN when empty).
#[allow(dead_code)]
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => samples[n / 2],
        _ => (samples[n / 2 - 1] + samples[n / 2]) / 2.0,
    }
}
