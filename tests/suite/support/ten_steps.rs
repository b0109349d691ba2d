//! A ten-step request for the durable-step tests (`chat_durable.rs`, `node_failover.rs`): its
//! opening, five model calls of a scripted model on the OpenAI wire — the first four each run
//! the `shell` tool once, the fifth answers — counting each call answered, one of them held
//! unanswered while its process is killed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::chat::completions_server;

/// Model calls in the request: the first four each call one tool, the fifth answers.
pub(crate) const CALLS: usize = 5;
pub(crate) const ANSWER: &str = "all done";

/// The model name of an agent that delegates the request: its first call asks `worker` (the
/// `ask_agent` tool), its second answers with what `worker` said. Not counted in [`Calls`].
pub(crate) const DELEGATING_MODEL: &str = "delegating-model";

/// Tool `j`'s command: it notes its run, and holds (as a long tool would) while `hold-j` exists.
pub(crate) fn command(j: usize) -> String {
    format!("echo t{j} >> runs.txt; if [ -f hold-{j} ]; then sleep 300; fi")
}

/// Which of the request's model calls `request` is (from 1): one more than its tool results.
pub(crate) fn call_number(request: &Value) -> usize {
    let tools = request["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    tools + 1
}

/// The fault server's state, shared with the test.
#[derive(Default)]
pub(crate) struct Calls {
    /// Answers delivered, per model call (index 0: call 1).
    pub(crate) answered: Mutex<[usize; CALLS]>,
    /// The model call to hold unanswered (the process is killed while it is in flight), once.
    pub(crate) hold: AtomicUsize,
    /// Set once the held call arrived.
    pub(crate) holding: AtomicBool,
    /// Set once the held call may be let go (its process is dead: the answer reaches no one
    /// and is not counted).
    pub(crate) release: AtomicBool,
}

/// What the delegating agent's model says: ask `worker` to `go`, then pass its answer on.
fn delegate(request: &Value) -> (Value, &'static str) {
    let said = request["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .map(|m| m["content"].clone());
    match said {
        Some(answer) => (json!({"role": "assistant", "content": answer}), "stop"),
        None => {
            let call = json!([{
                "id": "delegate", "type": "function",
                "function": {"name": "ask_agent", "arguments": json!({"agent": "worker", "message": "go"}).to_string()}
            }]);
            (
                json!({"role": "assistant", "content": null, "tool_calls": call}),
                "tool_calls",
            )
        }
    }
}

/// The scripted model over the OpenAI wire: call `j` < 5 asks for tool `j`, call 5 answers
/// (and a request for [`DELEGATING_MODEL`] is answered by [`delegate`]).
pub(crate) fn server(calls: Arc<Calls>) -> (String, Arc<Mutex<Vec<Value>>>) {
    completions_server(move |request, _| {
        if request["model"] == DELEGATING_MODEL {
            return delegate(request);
        }
        let j = call_number(request);
        let held = calls.hold.load(Ordering::SeqCst) == j && !calls.holding.load(Ordering::SeqCst);
        if held {
            calls.holding.store(true, Ordering::SeqCst);
            while !calls.release.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
        } else if let Some(n) = calls.answered.lock().unwrap().get_mut(j - 1) {
            *n += 1;
        }
        if j < CALLS {
            let call = json!([{
                "id": format!("k{j}"), "type": "function",
                "function": {"name": "shell", "arguments": json!({"command": command(j)}).to_string()}
            }]);
            (
                json!({"role": "assistant", "content": null, "tool_calls": call}),
                "tool_calls",
            )
        } else {
            (json!({"role": "assistant", "content": ANSWER}), "stop")
        }
    })
}

pub(crate) fn wait_until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
