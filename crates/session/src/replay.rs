//! Replaying committed records into a [`Session`], checking that they form a valid conversation.
//!
//! A resumed conversation goes straight back to a provider, which rejects a tool result without
//! its call, a call without its result, or (for troupe) two messages with one id. Such a log is
//! refused with the line at fault instead of being resumed into a conversation that fails every
//! request — or, worse, quietly loses turns.

use std::collections::{HashMap, HashSet};

use troupe_protocol::{ChatMessage, Conversation, MessageId, MessageKind, Role, StoredMessage};

use super::records::{HandledRequest, PausedCall, RequestOutcome, Session, SessionRecord};

/// Adds `items` not yet in `into`, keeping order.
fn union_into(into: &mut Vec<String>, items: &[String]) {
    for item in items {
        if !into.contains(item) {
            into.push(item.clone());
        }
    }
}

/// A record that does not fit the conversation so far: the 1-based line to blame, and why.
pub(super) type Invalid = (usize, String);

/// The tool-call pairing state after the messages so far: which calls of the nearest assistant
/// message still wait for their result. Display-only messages are never sent, so they are
/// transparent here (as in compaction's pairing rules).
#[derive(Default)]
struct Pairing {
    /// Calls of the latest assistant message not yet answered, in call order.
    open: Vec<String>,
    /// The line of that assistant message.
    assistant_line: usize,
    /// Whether the previous sent message is that assistant message or one of its results.
    in_batch: bool,
}

impl Pairing {
    fn unanswered(&self) -> Option<Invalid> {
        self.unanswered_except(&[])
    }

    /// The first open call that is not one of `paused` (a turn paused for approval may commit
    /// with those open).
    fn unanswered_except(&self, paused: &[PausedCall]) -> Option<Invalid> {
        let is_paused = |call: &String| paused.iter().any(|p| &p.call_id == call);
        self.open.iter().find(|c| !is_paused(c)).map(|call| {
            (
                self.assistant_line,
                format!("tool call `{call}` of this assistant message never gets a result"),
            )
        })
    }

    /// Account for `message` (recorded at `line`).
    fn push(&mut self, message: &ChatMessage, line: usize) -> Result<(), Invalid> {
        if message.kind == MessageKind::DisplayOnly {
            return Ok(());
        }
        match message.role {
            Role::Tool => {
                let Some(call) = message.tool_call_id.as_deref() else {
                    return Err((
                        line,
                        format!("tool result {} has no tool_call_id", message.id),
                    ));
                };
                let position = self.open.iter().position(|c| c == call);
                match position {
                    Some(i) if self.in_batch => {
                        self.open.remove(i);
                        Ok(())
                    }
                    _ => Err((
                        line,
                        format!(
                            "tool result {} answers call `{call}`, which is not an open call of \
                             the assistant message before it",
                            message.id
                        ),
                    )),
                }
            }
            role => {
                if let Some(unanswered) = self.unanswered() {
                    return Err(unanswered);
                }
                self.open = message.calls().iter().map(|c| c.id.clone()).collect();
                self.assistant_line = line;
                self.in_batch = role == Role::Assistant;
                Ok(())
            }
        }
    }
}

/// Replays committed records into a [`Session`].
#[derive(Default)]
pub(super) struct Replayer {
    session: Session,
    messages: Vec<ChatMessage>,
    pairing: Pairing,
    /// Every id recorded so far and the line that first recorded it: a new message never reuses
    /// one, even one cleared or archived since.
    seen: HashMap<u64, usize>,
    /// The highest id ever seen, so ids stay unique after a clear or compaction.
    max_id: u64,
    /// The open calls of a turn paused for approval, answered ones removed.
    paused: Vec<PausedCall>,
}

impl Replayer {
    /// Apply one committed record, read at `line`.
    pub(super) fn apply(&mut self, record: SessionRecord, line: usize) -> Result<(), Invalid> {
        self.session.records += 1;
        match record {
            SessionRecord::Session { agent, .. } => self.session.agent = agent,
            SessionRecord::Message(stored) => {
                let message = ChatMessage::from(stored);
                if let Some(first) = self.seen.get(&message.id.0) {
                    return Err((
                        line,
                        format!(
                            "message id {} is used again (first at line {first})",
                            message.id
                        ),
                    ));
                }
                self.pairing.push(&message, line)?;
                if let Some(call) = message.tool_call_id.as_deref() {
                    self.paused.retain(|p| p.call_id != call);
                }
                self.seen.insert(message.id.0, line);
                self.max_id = self.max_id.max(message.id.0);
                self.messages.push(message);
            }
            SessionRecord::Compaction(c) => {
                let c = *c;
                self.replace_messages(c.messages, &c.archived, line)?;
                if c.summary.is_some() {
                    self.session.previous_summary = c.summary;
                }
                union_into(&mut self.session.read_files, &c.read_files);
                union_into(&mut self.session.modified_files, &c.modified_files);
                self.session.archived.extend(c.archived);
                self.session.archive_entries.extend(c.archive_entries);
                if c.ledger.is_some() {
                    self.session.ledger = c.ledger;
                }
                if c.report.is_some() {
                    self.session.last_report = c.report;
                }
                self.session.compactions += 1;
            }
            // A rewind, not a compaction: the summary state stays as it was; the archive and
            // the last report are what the agent keeps.
            SessionRecord::RolledBack {
                messages,
                archive_entries,
                report,
            } => {
                let archived: Vec<MessageId> =
                    archive_entries.iter().map(|e| e.original.id).collect();
                self.replace_messages(messages, &archived, line)?;
                self.session.archived.extend(archived);
                self.session.archive_entries.extend(archive_entries);
                self.session.last_report = report.map(|r| *r);
            }
            SessionRecord::ModelChange { model } => self.session.model = Some(model),
            SessionRecord::Ledger { ledger } => self.session.ledger = Some(ledger),
            SessionRecord::Clear => {
                // A fresh start: the old summary and files no longer describe the context.
                self.messages.clear();
                self.pairing = Pairing::default();
                self.paused.clear();
                self.session.previous_summary = None;
                self.session.read_files.clear();
                self.session.modified_files.clear();
                self.session.ledger = None;
                self.session.last_report = None;
                self.session.in_flight = false;
                self.session.in_flight_format = None;
                self.session.in_flight_resumed = false;
                self.session.in_flight_request = None;
            }
            SessionRecord::Paused { calls } => {
                if let Some(stray) = calls
                    .iter()
                    .find(|c| !self.pairing.open.contains(&c.call_id))
                {
                    return Err((
                        line,
                        format!(
                            "paused call `{}` is not an open call of the last assistant message",
                            stray.call_id
                        ),
                    ));
                }
                self.paused = calls;
            }
            SessionRecord::CallsStarted { call_ids } => {
                for id in call_ids {
                    let Some(call) = self.paused.iter_mut().find(|p| p.call_id == id) else {
                        return Err((line, format!("started call `{id}` is not a paused call")));
                    };
                    call.started = true;
                }
            }
            SessionRecord::RequestOpened {
                response_format,
                request_id,
            } => {
                self.session.in_flight = true;
                self.session.in_flight_format = response_format.map(Into::into);
                self.session.in_flight_resumed = false;
                self.session.in_flight_request = request_id;
            }
            SessionRecord::RequestClosed { outcome } => {
                if let Some(id) = self.session.in_flight_request.take() {
                    let handled = match outcome {
                        RequestOutcome::Answered => {
                            Some(HandledRequest::Answered(self.last_answer()))
                        }
                        RequestOutcome::Failed => Some(HandledRequest::Failed),
                        RequestOutcome::RolledBack => None,
                    };
                    if let Some(handled) = handled {
                        self.session.handled.insert(id, handled);
                    }
                }
                self.session.in_flight = false;
                self.session.in_flight_format = None;
                self.session.in_flight_resumed = false;
            }
            SessionRecord::RequestResuming => {
                if !self.session.in_flight {
                    return Err((line, "a resume of no request in flight".to_string()));
                }
                self.session.in_flight_resumed = true;
            }
            // The answer is the message before it; its usage is for `session show`.
            SessionRecord::ModelAnswer { .. } => {}
            SessionRecord::CallResult { call_id, content } => {
                let Some(call) = self.paused.iter_mut().find(|p| p.call_id == call_id) else {
                    return Err((
                        line,
                        format!("result of call `{call_id}`, which is not an open call"),
                    ));
                };
                call.result = Some(content);
            }
            SessionRecord::Commit => {}
        }
        Ok(())
    }

    /// The text of the last message when it is a model's final answer (an assistant message
    /// with no tool calls), else empty.
    fn last_answer(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| m.kind != MessageKind::DisplayOnly)
            .filter(|m| m.role == Role::Assistant && m.calls().is_empty())
            .map(ChatMessage::text)
            .unwrap_or_default()
    }

    /// `stored` replace the conversation (a compaction, with the ids it `archived`, or a
    /// rollback): checked as a conversation of its own, its ids and the archived ones never
    /// handed out again.
    fn replace_messages(
        &mut self,
        stored: Vec<StoredMessage>,
        archived: &[MessageId],
        line: usize,
    ) -> Result<(), Invalid> {
        let messages: Vec<ChatMessage> = stored.into_iter().map(ChatMessage::from).collect();
        let mut ids = HashSet::new();
        let mut pairing = Pairing::default();
        for m in &messages {
            if !ids.insert(m.id.0) {
                return Err((
                    line,
                    format!("the compacted conversation holds message id {} twice", m.id),
                ));
            }
            pairing.push(m, line)?;
        }
        for id in messages
            .iter()
            .map(|m| m.id.0)
            .chain(archived.iter().map(|id| id.0))
        {
            self.seen.entry(id).or_insert(line);
            self.max_id = self.max_id.max(id);
        }
        self.messages = messages;
        self.paused.retain(|p| pairing.open.contains(&p.call_id));
        self.pairing = pairing;
        Ok(())
    }

    /// At a commit line: a commit ends with every tool call answered.
    pub(super) fn check_turn_complete(&self) -> Result<(), Invalid> {
        match self.pairing.unanswered_except(&self.paused) {
            Some(unanswered) => Err(unanswered),
            None => Ok(()),
        }
    }

    pub(super) fn finish(mut self) -> Session {
        let stored: Vec<StoredMessage> = self.messages.iter().map(StoredMessage::from).collect();
        let next_id = self.max_id + 1;
        self.session.paused = std::mem::take(&mut self.paused);
        // Conversation's serde form is the one way to restore an id counter past cleared ids.
        let restored =
            serde_json::from_value(serde_json::json!({ "next_id": next_id, "messages": stored }));
        self.session.conversation =
            restored.unwrap_or_else(|_| Conversation::from_stored(self.messages));
        self.session
    }
}
