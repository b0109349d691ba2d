//! What a tool call knows about its caller: agent, workspace root, cancellation, events, ledger.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use troupe_protocol::{EventSink, FileAccess, LedgerEntry, NoEvents, SharedLedger, TraceId};

/// The context every tool call receives.
///
/// Cheap to clone: the token, the event sink and the ledger are shared handles.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The calling agent's name.
    pub agent: String,
    /// The workspace root every file tool is confined to.
    pub root: PathBuf,
    /// The id of the tool call being served (set by [`crate::ToolRegistry::dispatch`]).
    pub tool_call_id: String,
    /// Cancelled when the call times out or its turn is abandoned (the registry hands each call
    /// a child of the caller's token, cancelled when the call's future is dropped): work a tool
    /// moved to another thread or task must watch it, since dropping the future cannot stop it.
    pub cancel: CancellationToken,
    /// Where tool-call events are published: in a team, the runtime's event bus.
    pub events: Arc<dyn EventSink>,
    /// The agent's file ledger; built-in file tools record into it, custom tools may too.
    pub ledger: SharedLedger,
    /// The trace the current request belongs to, attached to published events.
    pub trace_id: Option<TraceId>,
}

impl ToolContext {
    /// A context with a fresh token and ledger, an empty call id, no trace, and events that
    /// nobody hears ([`NoEvents`]).
    pub fn new(agent: impl Into<String>, root: impl Into<PathBuf>) -> Self {
        Self::new_with_events(agent, root, NoEvents)
    }

    /// [`ToolContext::new`] publishing to `events`: an agent's turn builds its tools' context
    /// this way, with its team's event bus.
    pub fn new_with_events(
        agent: impl Into<String>,
        root: impl Into<PathBuf>,
        events: impl EventSink + 'static,
    ) -> Self {
        ToolContext {
            agent: agent.into(),
            root: root.into(),
            tool_call_id: String::new(),
            cancel: CancellationToken::new(),
            events: Arc::new(events),
            ledger: SharedLedger::new(),
            trace_id: None,
        }
    }

    /// Publishing to `events`.
    pub fn with_events(mut self, events: impl EventSink + 'static) -> Self {
        self.events = Arc::new(events);
        self
    }

    /// With this cancellation token.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// With this ledger.
    pub fn with_ledger(mut self, ledger: SharedLedger) -> Self {
        self.ledger = ledger;
        self
    }

    /// With this tool call id.
    pub fn with_tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = id.into();
        self
    }

    /// With this trace id.
    pub fn with_trace_id(mut self, trace_id: Option<TraceId>) -> Self {
        self.trace_id = trace_id;
        self
    }

    /// A ledger entry for `path` stamped with this call's id (when it has one), ready to extend
    /// with line range, line count and sha256 and pass to [`SharedLedger::record`].
    pub fn ledger_entry(&self, path: impl Into<String>, access: FileAccess) -> LedgerEntry {
        let entry = LedgerEntry::new(path, access);
        if self.tool_call_id.is_empty() {
            entry
        } else {
            entry.with_call(self.tool_call_id.clone())
        }
    }
}
