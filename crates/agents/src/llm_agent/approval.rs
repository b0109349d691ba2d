//! Tool approval in the turn: the spec's [`ApprovalPolicy`](troupe_tools::approval::ApprovalPolicy)
//! decides per call; a call that must be asked about pauses the turn.
//!
//! A pause is a commit point: the assistant message and a `paused` record go to the session log
//! first, so a process killed while a person thinks resumes the turn (the agent asks again at
//! its next request, `finish_paused`). Before an answered batch runs, a `calls_started` record
//! goes in: a call the log shows started but not answered is answered as interrupted on resume,
//! never run twice. The answer itself arrives on the team's
//! [`Approvals`](troupe_runtime::approval::Approvals) desk, not in the agent's mailbox, which
//! the request being paused occupies.

use std::time::Duration;

use futures::future::join_all;
use troupe_protocol::{ApprovalDecision, ApprovalId};
use troupe_protocol::{ChatMessage, Event, ToolCall, TraceId};
use troupe_runtime::{AgentContext, AgentError, RequestWatch};
use troupe_tools::approval::Permission;
use troupe_tools::{ToolFailure, ToolResult};

use super::LlmAgent;
use super::compact_tool::COMPACT_TOOL;
use super::journal::Step;
use super::turn::until_abandoned;
use troupe_session::PausedCall;

/// What the policy makes of one call; one asked about carries the id it is asked under.
enum Verdict {
    Allow,
    Deny,
    Ask(ApprovalId),
}

/// How a call that was asked about came out.
enum Answer {
    Run(Option<String>),
    Denied(String),
    TimedOut(Duration),
}

impl LlmAgent {
    /// Run one assistant message's tool calls as the approval policy says: allowed ones run,
    /// denied ones are answered without running, and when any must be asked about the turn
    /// pauses until every such call is answered. Results in call order. `open` is every call
    /// of the message still unanswered (the `compact` tool's included), for the log's pause.
    pub(super) async fn run_approved(
        &mut self,
        calls: &[ToolCall],
        open: &[ToolCall],
        ctx: &AgentContext,
        trace_id: TraceId,
        watch: Option<&RequestWatch>,
    ) -> Result<Vec<ToolResult>, AgentError> {
        // Judged, shown and run as the registry reads them: one value for all three.
        let calls: Vec<ToolCall> = calls.iter().map(as_read).collect();
        let calls = calls.as_slice();
        let permissions: Vec<Permission> = calls
            .iter()
            .map(|c| {
                self.spec
                    .approval
                    .permission(&c.function.name, &c.function.arguments)
            })
            .collect();
        let paused = permissions.contains(&Permission::Ask);
        // Each asked call gets its id from the desk now, before the pause is logged with it.
        let verdicts: Vec<Verdict> = calls
            .iter()
            .zip(permissions)
            .map(|(call, permission)| match permission {
                Permission::Allow => Verdict::Allow,
                Permission::Deny => Verdict::Deny,
                Permission::Ask => Verdict::Ask(ctx.approvals.mint(&ctx.name, &call.id)),
            })
            .collect();
        if paused {
            let record = open
                .iter()
                .map(as_read)
                .map(|c| {
                    let approval = calls.iter().zip(&verdicts).find_map(|(k, v)| match v {
                        Verdict::Ask(id) if k.id == c.id => Some(id.clone()),
                        _ => None,
                    });
                    PausedCall {
                        call_id: c.id.clone(),
                        tool: c.function.name.clone(),
                        arguments: c.function.arguments.clone(),
                        ask: approval.is_some(),
                        approval,
                        started: false,
                        result: None,
                    }
                })
                .collect();
            self.commit(Step::Paused(record));
        }
        let work: Vec<(ToolCall, Verdict)> = calls.iter().cloned().zip(verdicts).collect();
        self.settle(work, paused, ctx, trace_id, watch).await
    }

    /// A turn the log shows paused (the process or the agent stopped while it waited): answer
    /// its open calls — ask again about those that need it, run the allowed ones, answer those
    /// that had started as interrupted — and commit the results, before the next request.
    pub(super) async fn finish_paused(
        &mut self,
        ctx: &AgentContext,
        trace_id: TraceId,
    ) -> Result<(), AgentError> {
        if self.journal.paused.is_empty() {
            return Ok(());
        }
        let watch = ctx.events.watch_of(trace_id);
        let paused = self.journal.paused.clone();
        let mut interrupted = Vec::new();
        let mut work = Vec::new();
        let mut logged = Vec::new();
        for p in &paused {
            // Finished before the process stopped (durable steps): its result is in the log.
            if let Some(result) = &p.result {
                logged.push((p.call_id.clone(), result.clone()));
                continue;
            }
            let compact = self.spec.compaction.agent_tool && p.tool == COMPACT_TOOL;
            if p.started || compact {
                interrupted.push(p.call_id.clone());
                continue;
            }
            // What runs is the call of the logged assistant message, so that is what this
            // process's rules judge (not the pause record's copy of it).
            let call = self.logged_call(&p.call_id).map_or_else(
                || ToolCall::new(&p.call_id, &p.tool, &p.arguments),
                |c| as_read(&c),
            );
            // Asked before stays asked; a rule that denies it now still denies it.
            let now = self
                .spec
                .approval
                .permission(&call.function.name, &call.function.arguments);
            // Asked again under the id it was shown with; a log from before pauses recorded
            // their ids gets a new one.
            let ask = || {
                let id = p.approval.clone();
                Verdict::Ask(id.unwrap_or_else(|| ctx.approvals.mint(&ctx.name, &p.call_id)))
            };
            let verdict = match now {
                Permission::Deny => Verdict::Deny,
                Permission::Allow if !p.ask => Verdict::Allow,
                _ => ask(),
            };
            work.push((call, verdict));
        }
        let ids: Vec<String> = work.iter().map(|(c, _)| c.id.clone()).collect();
        let results = self
            .settle(work, true, ctx, trace_id, watch.as_ref())
            .await?;
        let mut by_id: std::collections::HashMap<String, String> = ids
            .into_iter()
            .zip(results.into_iter().map(|r| r.content))
            .collect();
        by_id.extend(logged);
        for id in &interrupted {
            by_id.insert(
                id.clone(),
                "the process stopped while this call ran; its outcome is unknown and it was \
                 not run again"
                    .to_string(),
            );
        }
        for p in &paused {
            let content = by_id.remove(&p.call_id).unwrap_or_default();
            self.context
                .conversation
                .push(ChatMessage::tool_result(p.call_id.clone(), content));
        }
        self.journal.paused.clear();
        self.commit(Step::Changes);
        Ok(())
    }

    /// The call `id` of the conversation's last assistant message.
    fn logged_call(&self, id: &str) -> Option<ToolCall> {
        self.context
            .conversation
            .messages()
            .iter()
            .rev()
            .find(|m| !m.calls().is_empty())
            .and_then(|m| m.calls().iter().find(|c| c.id == id).cloned())
    }

    /// Ask about the calls that need it (all at once), then run what may run and answer the
    /// rest. `logged`: whether a pause is in the session log (then the calls about to run are
    /// recorded as started first).
    async fn settle(
        &mut self,
        work: Vec<(ToolCall, Verdict)>,
        logged: bool,
        ctx: &AgentContext,
        trace_id: TraceId,
        watch: Option<&RequestWatch>,
    ) -> Result<Vec<ToolResult>, AgentError> {
        let asked = work.iter().filter_map(|(call, verdict)| match verdict {
            Verdict::Ask(id) => Some(self.ask(call, id.clone(), ctx, trace_id)),
            _ => None,
        });
        let answers = until_abandoned(
            watch,
            async { Ok(join_all(asked).await) },
            AgentError::Cancelled,
        )
        .await?;
        let mut answers = answers.into_iter();
        let work_ids: Vec<String> = work.iter().map(|(c, _)| c.id.clone()).collect();
        let mut to_run = Vec::new();
        let mut outcome: Vec<Result<(usize, Option<String>), ToolResult>> =
            Vec::with_capacity(work.len());
        for (call, verdict) in work {
            let answer = match verdict {
                Verdict::Allow => Answer::Run(None),
                Verdict::Deny => {
                    outcome.push(Err(refused(format!(
                        "the approval policy denies `{}` with these arguments; the call was not \
                         run",
                        call.function.name
                    ))));
                    continue;
                }
                Verdict::Ask(_) => answers
                    .next()
                    .unwrap_or(Answer::Denied("no answer".to_string())),
            };
            match answer {
                // A person's edit is judged too: what a rule denies never runs.
                Answer::Run(Some(edited))
                    if self.spec.approval.permission(&call.function.name, &edited)
                        == Permission::Deny =>
                {
                    outcome.push(Err(refused(format!(
                        "the approval policy denies `{}` with the arguments the person approving \
                         gave ({edited}); the call was not run",
                        call.function.name
                    ))));
                }
                Answer::Run(edited) => {
                    let mut call = call;
                    if let Some(arguments) = &edited {
                        call.function.arguments =
                            as_read(&ToolCall::new(&call.id, &call.function.name, arguments))
                                .function
                                .arguments;
                    }
                    outcome.push(Ok((to_run.len(), edited)));
                    to_run.push(call);
                }
                Answer::Denied(reason) => outcome.push(Err(refused(format!(
                    "the person approving tool calls denied this call: {reason}; it was not run"
                )))),
                Answer::TimedOut(after) => outcome.push(Err(refused(format!(
                    "no approval came within {} s; the call was not run",
                    after.as_secs()
                )))),
            }
        }
        // With durable steps every run is recorded as started, so a restart never runs it twice;
        // and every call refused (denied, by a person or a rule, or unanswered in time) is
        // recorded answered in the same commit, so a restart never asks about it again — a
        // denial stands across a crash.
        let answered: Vec<(String, String)> = work_ids
            .iter()
            .zip(&outcome)
            .filter_map(|(call_id, o)| match o {
                Err(refusal) => Some((call_id.clone(), refusal.content.clone())),
                Ok(_) => None,
            })
            .collect();
        let started: Vec<String> = to_run.iter().map(|c| c.id.clone()).collect();
        if !started.is_empty() || !answered.is_empty() {
            self.commit_before_acting(Step::Settled {
                started,
                refused: answered,
                pause_logged: logged,
            })?;
        }
        // The assistant message keeps the model's arguments: an edited call's result says what
        // really ran (in the log's `call_result` too, so a resumed turn tells the model the same).
        let mut edits: Vec<Option<String>> = vec![None; to_run.len()];
        for (i, edited) in outcome.iter().filter_map(|o| o.as_ref().ok()) {
            if let (Some(slot), Some(arguments)) = (edits.get_mut(*i), edited) {
                *slot = Some(format!(
                    "(run with arguments edited by the person approving: {arguments})\n"
                ));
            }
        }
        let ran = until_abandoned(
            watch,
            async { Ok(self.run_tools(&to_run, &edits, ctx, trace_id).await) },
            AgentError::Cancelled,
        )
        .await?;
        let mut ran: Vec<Option<ToolResult>> = ran.into_iter().map(Some).collect();
        Ok(outcome
            .into_iter()
            .map(|o| match o {
                Ok((i, _)) => ran
                    .get_mut(i)
                    .and_then(Option::take)
                    .unwrap_or_else(|| refused("the call produced no result".to_string())),
                Err(result) => result,
            })
            .collect())
    }

    /// Ask the team about `call` under `id` (the desk's) and wait for the answer or the
    /// policy's timeout.
    async fn ask(
        &self,
        call: &ToolCall,
        id: ApprovalId,
        ctx: &AgentContext,
        trace_id: TraceId,
    ) -> Answer {
        // Opened before the event goes out: an answer can never come before its question. The
        // desk keeps what is shown, so an answer given for another call under this id is refused.
        let pending =
            ctx.approvals
                .open_call(id.clone(), &call.function.name, &call.function.arguments);
        ctx.events.publish(
            Some(trace_id),
            Event::ApprovalRequested {
                id,
                agent: ctx.name.clone(),
                tool: call.function.name.clone(),
                arguments: call.function.arguments.clone(),
            },
        );
        let timeout = self.spec.approval.timeout;
        match tokio::time::timeout(timeout, pending.answer()).await {
            Ok(Some(ApprovalDecision::Approve { arguments })) => Answer::Run(arguments),
            Ok(Some(ApprovalDecision::Deny { reason })) => Answer::Denied(reason),
            Ok(Some(_)) => Answer::Denied("an answer this agent does not know".to_string()),
            Ok(None) => Answer::Denied("the request was replaced by a newer one".to_string()),
            Err(_) => Answer::TimedOut(timeout),
        }
    }
}

/// `call` with its arguments as the registry will read them ([`troupe_tools::read_arguments`]),
/// written out again: the approval policy judges them, a person is shown them and the tool runs
/// on them. Arguments that cannot be read stay as the model wrote them (the registry answers
/// them with its error, and runs nothing).
fn as_read(call: &ToolCall) -> ToolCall {
    let mut call = call.clone();
    if let Ok(object) = troupe_tools::read_arguments(&call.function.arguments) {
        call.function.arguments = serde_json::Value::Object(object).to_string();
    }
    call
}

fn refused(content: String) -> ToolResult {
    ToolResult::error(ToolFailure::Refused, content)
}
