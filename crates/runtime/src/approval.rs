//! Tool approval: a tool call whose policy says "ask" waits here for a person's answer.
//!
//! The desk numbers the requests: [`Approvals::mint`] gives each opening an [`ApprovalId`] of its
//! own (`AGENT:CALL_ID#N`), the id the event, the session log and every surface then show and
//! take. The model's call id alone would not do: models reuse call ids across turns, and an
//! answer given late for one call must never decide a later call under the same model id.
//!
//! The agent that wants an answer opens a [`PendingApproval`] on its team's [`Approvals`] (before
//! it publishes [`Event::ApprovalRequested`](troupe_protocol::Event::ApprovalRequested), so an answer can
//! never arrive before there is something to answer) and awaits it; [`Team::approve`],
//! [`Team::approve_with`] and [`Team::deny`](crate::Team::deny) answer through the desk.
//!
//! Why a desk and not a job in the agent's mailbox: the agent is inside its request while it
//! waits, and an actor takes its next message only after the current one — a job would wait
//! behind the very request it should unblock. The answer still travels as a message: a oneshot
//! channel to the waiting turn.
//!
//! [`Team::approve`]: crate::Team::approve
//! [`Team::approve_with`]: crate::Team::approve_with

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use troupe_protocol::sync::lock;
use troupe_protocol::{ApprovalDecision, ApprovalId};

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// No tool call waits under this id (never asked, answered already, or timed out).
    #[error("no tool call waits for approval under `{0}`")]
    Unknown(ApprovalId),
    /// The call waiting under this id is not the one the answer was given for (its arguments
    /// changed, the id names another call now, or it was opened without one); it still waits.
    #[error("the call waiting under `{0}` is not the one that was shown")]
    NotAsShown(ApprovalId),
    /// Edited arguments that are not a JSON object; the call still waits.
    #[error("the edited arguments for `{id}` are not a JSON object: {reason}")]
    InvalidArguments {
        /// The call they were meant for.
        id: ApprovalId,
        /// What is wrong with them.
        reason: String,
    },
}

/// The team's open approval requests (cloning shares them).
#[derive(Debug, Clone, Default)]
pub struct Approvals {
    waiting: Arc<Mutex<HashMap<ApprovalId, Waiter>>>,
    /// Numbers each opened request, so a withdrawn one removes only itself.
    opened: Arc<AtomicU64>,
    /// The last opening number an id was given ([`Approvals::mint`]) or reopened with.
    minted: Arc<AtomicU64>,
}

/// The open end of one request: its number, what it asks and the channel to its waiter.
#[derive(Debug)]
struct Waiter {
    number: u64,
    /// The tool and its arguments, as the person is shown them (`None`: opened without a call).
    call: Option<(String, String)>,
    answer: oneshot::Sender<ApprovalDecision>,
}

impl Approvals {
    /// A new id for asking about `agent`'s tool call `call_id`: no id minted before, nor one
    /// opened on this desk before (a paused call asked again under its logged id), is given
    /// again — so an answer for an earlier request never names this one.
    pub fn mint(&self, agent: &str, call_id: &str) -> ApprovalId {
        let opening = self.minted.fetch_add(1, Ordering::Relaxed) + 1;
        ApprovalId::of_opening(agent, call_id, opening)
    }

    /// Open a request under `id` (a request already open under it is replaced: its waiter sees
    /// the desk closed). Dropping the returned [`PendingApproval`] withdraws it.
    pub fn open(&self, id: ApprovalId) -> PendingApproval {
        self.open_waiter(id, None)
    }

    /// [`Approvals::open`] for a tool call, keeping what it asks — `tool` and its `arguments`
    /// as the person is shown them — so that an answer can name what it was given for
    /// ([`Approvals::decide_shown`]).
    pub fn open_call(&self, id: ApprovalId, tool: &str, arguments: &str) -> PendingApproval {
        self.open_waiter(id, Some((tool.to_string(), arguments.to_string())))
    }

    fn open_waiter(&self, id: ApprovalId, call: Option<(String, String)>) -> PendingApproval {
        // An id from an earlier process (a session log's pause) is never minted here again.
        if let Some(opening) = id.opening() {
            self.minted.fetch_max(opening, Ordering::Relaxed);
        }
        let (tx, rx) = oneshot::channel();
        let number = self.opened.fetch_add(1, Ordering::Relaxed);
        let waiter = Waiter {
            number,
            call,
            answer: tx,
        };
        lock(&self.waiting).insert(id.clone(), waiter);
        PendingApproval {
            id,
            number,
            answer: rx,
            desk: self.clone(),
        }
    }

    /// Answer the request `id`.
    ///
    /// # Errors
    /// [`ApprovalError::Unknown`] when nothing waits under `id`;
    /// [`ApprovalError::InvalidArguments`] when edited arguments are not a JSON object (the
    /// request then still waits).
    pub fn decide(&self, id: &ApprovalId, decision: ApprovalDecision) -> Result<(), ApprovalError> {
        self.answer(id, |_| true, decision)
    }

    /// Answer the request `id` only if it asks what the person was shown: `shown` is given the
    /// tool and arguments of the call waiting under `id` ([`Approvals::open_call`]), under the
    /// desk's lock, so the call answered is the one `shown` accepted — an id that names another
    /// call by now, with other arguments, is not answered.
    ///
    /// # Errors
    /// As [`Approvals::decide`], and [`ApprovalError::NotAsShown`] when `shown` refuses the
    /// waiting call (or it was opened without one); it then still waits.
    pub fn decide_shown(
        &self,
        id: &ApprovalId,
        shown: impl FnOnce(&str, &str) -> bool,
        decision: ApprovalDecision,
    ) -> Result<(), ApprovalError> {
        let asks = |waiter: &Waiter| {
            waiter
                .call
                .as_ref()
                .is_some_and(|(tool, arguments)| shown(tool, arguments))
        };
        self.answer(id, asks, decision)
    }

    /// Answer `id` when `matches` accepts its waiter (checked and taken under one lock).
    fn answer(
        &self,
        id: &ApprovalId,
        matches: impl FnOnce(&Waiter) -> bool,
        decision: ApprovalDecision,
    ) -> Result<(), ApprovalError> {
        if let ApprovalDecision::Approve {
            arguments: Some(arguments),
        } = &decision
        {
            check_arguments(id, arguments)?;
        }
        let waiter = {
            let mut waiting = lock(&self.waiting);
            let found = waiting
                .get(id)
                .ok_or_else(|| ApprovalError::Unknown(id.clone()))?;
            if !matches(found) {
                return Err(ApprovalError::NotAsShown(id.clone()));
            }
            waiting
                .remove(id)
                .ok_or_else(|| ApprovalError::Unknown(id.clone()))?
        };
        // The waiter gone between the lookup and the send (its turn was abandoned) is the same
        // as it having been withdrawn a moment earlier.
        waiter
            .answer
            .send(decision)
            .map_err(|_| ApprovalError::Unknown(id.clone()))
    }

    /// The ids waiting now, sorted.
    pub fn waiting(&self) -> Vec<ApprovalId> {
        let mut ids: Vec<ApprovalId> = lock(&self.waiting).keys().cloned().collect();
        ids.sort();
        ids
    }
}

fn check_arguments(id: &ApprovalId, arguments: &str) -> Result<(), ApprovalError> {
    let invalid = |reason: String| ApprovalError::InvalidArguments {
        id: id.clone(),
        reason,
    };
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(invalid("not an object".to_string())),
        Err(e) => Err(invalid(e.to_string())),
    }
}

/// One open approval request; await [`PendingApproval::answer`].
#[derive(Debug)]
pub struct PendingApproval {
    id: ApprovalId,
    number: u64,
    answer: oneshot::Receiver<ApprovalDecision>,
    desk: Approvals,
}

impl PendingApproval {
    /// The request's id.
    pub fn id(&self) -> &ApprovalId {
        &self.id
    }

    /// The answer, or `None` when the request was replaced by another under the same id.
    pub async fn answer(mut self) -> Option<ApprovalDecision> {
        (&mut self.answer).await.ok()
    }
}

impl Drop for PendingApproval {
    fn drop(&mut self) {
        let mut waiting = lock(&self.desk.waiting);
        // Only our own entry: a newer request under the same id stays.
        if waiting
            .get(&self.id)
            .is_some_and(|w| w.number == self.number)
        {
            waiting.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> ApprovalId {
        ApprovalId::of_opening("coder", "call_1", 1)
    }

    #[tokio::test]
    async fn an_answer_reaches_the_waiter_once() {
        let desk = Approvals::default();
        let pending = desk.open(id());
        assert_eq!(desk.waiting(), vec![id()]);
        let deny = ApprovalDecision::Deny {
            reason: "no".into(),
        };
        desk.decide(&id(), deny.clone()).unwrap();
        assert_eq!(
            desk.decide(&id(), deny.clone()),
            Err(ApprovalError::Unknown(id()))
        );
        assert_eq!(pending.answer().await, Some(deny));
        assert!(desk.waiting().is_empty());
    }

    #[tokio::test]
    async fn an_answer_naming_another_call_is_refused_and_the_call_still_waits() {
        let desk = Approvals::default();
        let pending = desk.open_call(id(), "run", r#"{"command":"ls"}"#);
        let approve = ApprovalDecision::Approve { arguments: None };
        let other = |tool: &str, arguments: &str| tool == "run" && arguments.contains("rm");
        assert_eq!(
            desk.decide_shown(&id(), other, approve.clone()),
            Err(ApprovalError::NotAsShown(id()))
        );
        assert_eq!(desk.waiting(), vec![id()]);
        let same = |tool: &str, arguments: &str| tool == "run" && arguments.contains("ls");
        desk.decide_shown(&id(), same, approve.clone()).unwrap();
        assert_eq!(pending.answer().await, Some(approve.clone()));
        // A request opened without a call cannot be answered as shown.
        let _bare = desk.open(id());
        assert_eq!(
            desk.decide_shown(&id(), |_, _| true, approve),
            Err(ApprovalError::NotAsShown(id()))
        );
    }

    #[test]
    fn an_unknown_id_is_a_typed_error() {
        let desk = Approvals::default();
        let approve = ApprovalDecision::Approve { arguments: None };
        assert_eq!(
            desk.decide(&id(), approve),
            Err(ApprovalError::Unknown(id()))
        );
    }

    #[test]
    fn edited_arguments_must_be_an_object_and_the_request_keeps_waiting() {
        let desk = Approvals::default();
        let _pending = desk.open(id());
        for bad in ["[1]", "{not json"] {
            let edit = ApprovalDecision::Approve {
                arguments: Some(bad.to_string()),
            };
            assert!(matches!(
                desk.decide(&id(), edit),
                Err(ApprovalError::InvalidArguments { .. })
            ));
        }
        assert_eq!(desk.waiting(), vec![id()]);
    }

    /// Every sequence of up to five opens, answers and withdrawals over two ids: an answer is
    /// taken exactly when its request is open, `waiting` lists exactly the open ones, and each
    /// waiter gets the answer given to it — or none, when a newer request replaced it.
    #[tokio::test]
    async fn the_desk_matches_its_model_for_every_short_sequence() {
        #[derive(Clone, Copy, Debug)]
        enum Op {
            Open(usize),
            Decide(usize),
            Withdraw(usize),
        }
        let ops = [0, 1]
            .into_iter()
            .flat_map(|i| [Op::Open(i), Op::Decide(i), Op::Withdraw(i)]);
        let ops: Vec<Op> = ops.collect();
        let mut sequences: Vec<Vec<Op>> = vec![Vec::new()];
        for _ in 0..5 {
            let longer: Vec<Vec<Op>> = sequences
                .iter()
                .filter(|s| s.len() == sequences.last().map_or(0, Vec::len))
                .flat_map(|s| ops.iter().map(move |op| [s.clone(), vec![*op]].concat()))
                .collect();
            sequences.extend(longer);
        }
        let ids = [
            ApprovalId::of_opening("a", "1", 1),
            ApprovalId::of_opening("a", "2", 1),
        ];
        for sequence in &sequences {
            let desk = Approvals::default();
            // Per id: the waiters opened so far (None once withdrawn), which one the desk
            // holds, and what each should get.
            let mut waiters: Vec<Vec<Option<PendingApproval>>> = vec![Vec::new(), Vec::new()];
            let mut current: [Option<usize>; 2] = [None, None];
            let mut expected: Vec<Vec<Option<ApprovalDecision>>> = vec![Vec::new(), Vec::new()];
            for (step, op) in sequence.iter().enumerate() {
                match *op {
                    Op::Open(i) => {
                        waiters[i].push(Some(desk.open(ids[i].clone())));
                        expected[i].push(None);
                        current[i] = Some(waiters[i].len() - 1);
                    }
                    Op::Decide(i) => {
                        let decision = ApprovalDecision::Deny {
                            reason: format!("step {step}"),
                        };
                        let taken = desk.decide(&ids[i], decision.clone());
                        match current[i].take() {
                            Some(w) => {
                                assert_eq!(taken, Ok(()), "{sequence:?}");
                                expected[i][w] = Some(decision);
                            }
                            None => assert_eq!(
                                taken,
                                Err(ApprovalError::Unknown(ids[i].clone())),
                                "{sequence:?}"
                            ),
                        }
                    }
                    Op::Withdraw(i) => {
                        // The oldest waiter still held goes away (a replaced one, when there is
                        // one: its going must not withdraw the newer request).
                        if let Some(w) = waiters[i].iter().position(Option::is_some) {
                            waiters[i][w] = None;
                            if current[i] == Some(w) {
                                current[i] = None;
                            }
                        }
                    }
                }
                let open: Vec<ApprovalId> = (0..2)
                    .filter(|i| current[*i].is_some())
                    .map(|i| ids[i].clone())
                    .collect();
                assert_eq!(desk.waiting(), open, "{sequence:?} at step {step}");
            }
            for i in 0..2 {
                for (w, waiter) in waiters[i].drain(..).enumerate() {
                    // One still waiting would wait forever: the desk lists it instead (above).
                    if let Some(waiter) = waiter
                        && current[i] != Some(w)
                    {
                        assert_eq!(waiter.answer().await, expected[i][w], "{sequence:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn every_opening_gets_an_id_of_its_own_even_for_a_reused_model_call_id() {
        let desk = Approvals::default();
        let first = desk.mint("coder", "call_0");
        let second = desk.mint("coder", "call_0");
        assert_ne!(first, second);
        assert!(first.is_of_call("coder", "call_0") && second.is_of_call("coder", "call_0"));
        // A logged id asked again in a new process: the desk never mints it afterwards.
        let fresh = Approvals::default();
        let logged = ApprovalId::of_opening("coder", "call_0", 5);
        let _resumed = fresh.open_call(logged.clone(), "run", "{}");
        let later = fresh.mint("coder", "call_0");
        assert_eq!(later.opening(), Some(6));
        // A withdrawn request's id names nothing afterwards, even with the same call waiting
        // again.
        let withdrawn = desk.open_call(first.clone(), "run", "{}");
        drop(withdrawn);
        let _next = desk.open_call(desk.mint("coder", "call_0"), "run", "{}");
        let approve = ApprovalDecision::Approve { arguments: None };
        assert_eq!(
            desk.decide(&first, approve),
            Err(ApprovalError::Unknown(first.clone()))
        );
    }

    #[test]
    fn a_dropped_request_is_withdrawn() {
        let desk = Approvals::default();
        drop(desk.open(id()));
        assert!(desk.waiting().is_empty());
    }
}
