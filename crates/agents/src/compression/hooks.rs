//! Compaction hooks: plain async closures on an agent's [`CompactionSettings`] that see what a
//! compaction is about to do and what it did.
//!
//! The **before** hook gets a [`CompactionPreview`] — every message with what the compaction
//! would make of it (kept, protected, truncated, masked, removed, summarized: ids and token
//! counts) and the artifact ledger of what would go — and answers with a [`HookVerdict`]:
//! preserve hints (text the result must keep: added to the summary's focus, and checked
//! afterwards — a hint the result lacks is reported), messages to pin for this compaction, or a
//! veto. A veto holds for the compactions that may wait (automatic, the agent's `compact` tool);
//! an emergency (the provider refused the request as too long) or a person's `/compact` runs
//! anyway, and the report says the veto was ignored. The **after** hook gets the report (with
//! the hooks' notes), the receipt and the summary.
//!
//! Both run on the asker's side of the one compaction road (the compaction client,
//! `compression/client.rs`), whatever compresses — this team's compression agent, one on another
//! node, or the planner here — so they can be closures over the asker's state, and every route runs
//! them once.
//!
//! [`CompactionSettings`]: crate::CompactionSettings

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use troupe_compaction::Compaction;
use troupe_compaction::session::{CompactionPreview, CompactionSession, preview};
use troupe_protocol::{CompactTrigger, CompactionReport};
use troupe_protocol::{CompactionReceipt, HookNote, MessageId, MessageKind};
use troupe_tokens::TokenCounter;

use super::client::CompactionAskError;
use super::job::CompactionRequest;

/// What a before hook is shown.
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeCompaction {
    /// Whose conversation it is.
    pub agent: String,
    /// What the compaction would do (the trigger is in it).
    pub preview: CompactionPreview,
}

/// A before hook's answer: go ahead (with preserve hints and pins), or veto.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookVerdict {
    /// Texts the compacted conversation must still contain: each is put in the summary's
    /// focus, and one the result lacks is reported ([`HookNote::HintMissing`]).
    pub preserve: Vec<String>,
    /// Messages kept byte-identical by this compaction, as the agent's pinned messages are
    /// (for this compaction only: the hook is asked again before the next one).
    pub pin: Vec<MessageId>,
    /// Why the compaction should not run; honoured for automatic and agent-tool compactions,
    /// ignored (and reported) for an emergency or a person's `/compact`.
    pub veto: Option<String>,
}

impl HookVerdict {
    /// Go ahead as planned.
    pub fn proceed() -> Self {
        HookVerdict::default()
    }

    /// Do not compact now, because of `reason`.
    pub fn veto(reason: impl Into<String>) -> Self {
        HookVerdict {
            veto: Some(reason.into()),
            ..HookVerdict::default()
        }
    }

    /// With one more preserve hint.
    pub fn preserve(mut self, text: impl Into<String>) -> Self {
        self.preserve.push(text.into());
        self
    }

    /// With one more message pinned for this compaction.
    pub fn pin(mut self, id: MessageId) -> Self {
        self.pin.push(id);
        self
    }
}

/// What an after hook is shown.
#[derive(Debug, Clone, PartialEq)]
pub struct AfterCompaction {
    /// Whose conversation it is.
    pub agent: String,
    /// What asked for the compaction.
    pub trigger: CompactTrigger,
    /// The report, the hooks' notes in `hook_notes`.
    pub report: CompactionReport,
    /// What it cost and saves against the provider's cache (none when nothing changed).
    pub receipt: Option<CompactionReceipt>,
    /// The summary it wrote, if it wrote one.
    pub summary: Option<String>,
}

type BeforeHook = Arc<dyn Fn(BeforeCompaction) -> BoxFuture<'static, HookVerdict> + Send + Sync>;
type AfterHook = Arc<dyn Fn(AfterCompaction) -> BoxFuture<'static, ()> + Send + Sync>;

/// An agent's compaction hooks (none by default).
///
/// ```
/// use troupe_agents::CompactionSettings;
/// use troupe_agents::compression::hooks::{CompactionHooks, HookVerdict};
///
/// let hooks = CompactionHooks::new()
///     .before(|seen| async move {
///         let summarized = seen.preview.messages.iter().filter(|m| m.fate.is_compressed()).count();
///         println!("{summarized} messages about to be compressed");
///         HookVerdict::proceed().preserve("ticket #4411")
///     })
///     .after(|done| async move { println!("{}", done.report.reason) });
/// let settings = CompactionSettings { hooks, ..CompactionSettings::default() };
/// # let _ = settings;
/// ```
#[derive(Clone, Default)]
pub struct CompactionHooks {
    before: Option<BeforeHook>,
    after: Option<AfterHook>,
}

impl std::fmt::Debug for CompactionHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionHooks")
            .field("before", &self.before.is_some())
            .field("after", &self.after.is_some())
            .finish()
    }
}

impl CompactionHooks {
    /// No hooks.
    pub fn new() -> Self {
        CompactionHooks::default()
    }

    /// With this before hook (replacing any set before). Asking it costs a dry run of the
    /// compaction's planner, which only agents with a before hook pay.
    pub fn before<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(BeforeCompaction) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookVerdict> + Send + 'static,
    {
        self.before = Some(Arc::new(move |seen| Box::pin(hook(seen))));
        self
    }

    /// With this after hook (replacing any set before).
    pub fn after<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(AfterCompaction) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.after = Some(Arc::new(move |done| Box::pin(hook(done))));
        self
    }

    /// Whether no hook is set.
    pub fn is_empty(&self) -> bool {
        self.before.is_none() && self.after.is_none()
    }
}

/// What the before hook asked of a compaction that goes ahead, to settle once it is back.
#[derive(Debug, Default)]
pub(crate) struct Asked {
    /// Messages the hook pinned that were not pinned already: unpinned in the result.
    pinned: Vec<MessageId>,
    /// The preserve hints, checked in the result.
    hints: Vec<String>,
    /// What to say in the report.
    notes: Vec<HookNote>,
}

/// The before hook's outcome.
pub(crate) enum Before {
    /// Go ahead with the (possibly changed) request; settle `Asked` on the result.
    Proceed(Asked),
    /// Vetoed: this unchanged conversation, reported skipped, is the answer.
    Vetoed(Box<Compaction>),
}

/// Ask `hooks`' before hook about `request` and apply its verdict to the request: pins on
/// the conversation, hints in the focus; a veto of a compaction that may wait ends it here.
///
/// # Errors
/// [`CompactionAskError::Failed`] when the compaction could not even be previewed (an invalid
/// policy or conversation: the compaction itself would fail the same way).
pub(crate) async fn before(
    hooks: &CompactionHooks,
    request: &mut CompactionRequest,
    counter: &dyn TokenCounter,
) -> Result<Before, CompactionAskError> {
    let Some(hook) = &hooks.before else {
        return Ok(Before::Proceed(Asked::default()));
    };
    let compact_options = request.compact_options();
    let preview = preview(
        &request.conversation,
        &request.ledger,
        &request.policy,
        counter,
        compact_options.clone(),
    )
    .await
    .map_err(CompactionAskError::Failed)?;
    let verdict = hook(BeforeCompaction {
        agent: request.agent.clone(),
        preview,
    })
    .await;
    let mut asked = Asked::default();
    if let Some(reason) = verdict.veto {
        if request.trigger.is_rate_limited() {
            let note = HookNote::Vetoed { reason };
            let mut compaction = CompactionSession::new(
                &request.conversation,
                &request.ledger,
                &request.policy,
                counter,
                compact_options,
            )
            .and_then(|session| session.finish_skipped(note.to_string()))
            .map_err(CompactionAskError::Failed)?;
            compaction.report.hook_notes.push(note);
            return Ok(Before::Vetoed(Box::new(compaction)));
        }
        asked.notes.push(HookNote::VetoIgnored {
            trigger: request.trigger,
            reason,
        });
    }
    for id in verdict.pin {
        match request.conversation.get_mut(id) {
            Some(message) if !message.pinned => {
                message.pinned = true;
                asked.pinned.push(id);
            }
            Some(_) => {}
            None => asked.notes.push(HookNote::UnknownPin { id }),
        }
    }
    let hints: Vec<String> = verdict
        .preserve
        .into_iter()
        .filter(|h| !h.trim().is_empty())
        .collect();
    if !hints.is_empty() {
        // The summarizer is told; the check afterwards says whether it listened.
        let quoted: Vec<String> = hints.iter().map(|h| format!("\"{h}\"")).collect();
        let keep = format!("keep these verbatim: {}", quoted.join(", "));
        request.focus = Some(match request.focus.take() {
            Some(focus) => format!("{focus}; {keep}"),
            None => keep,
        });
    }
    asked.hints = hints;
    Ok(Before::Proceed(asked))
}

impl Asked {
    /// Settle what the hook asked on the result: its pins lifted (they held for this
    /// compaction only), its hints checked, its notes in the report.
    pub(crate) fn settle(self, compaction: &mut Compaction) {
        for message in compaction
            .messages
            .iter_mut()
            .filter(|m| self.pinned.contains(&m.id))
        {
            message.pinned = false;
        }
        let mut notes = self.notes;
        for hint in self.hints {
            if !compaction.messages.iter().any(|m| m.text().contains(&hint)) {
                notes.push(HookNote::HintMissing { hint });
            }
        }
        compaction.report.hook_notes.extend(notes);
    }
}

/// Show `hooks`' after hook what `compaction` did.
pub(crate) async fn after(
    hooks: &CompactionHooks,
    agent: &str,
    trigger: CompactTrigger,
    before: &[Arc<troupe_protocol::ChatMessage>],
    compaction: &Compaction,
) {
    let Some(hook) = &hooks.after else {
        return;
    };
    // The summary this compaction wrote: a summary message the conversation did not hold.
    let summary = compaction
        .messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Summary && !before.iter().any(|b| b.id == m.id))
        .map(|m| m.text());
    hook(AfterCompaction {
        agent: agent.to_string(),
        trigger,
        report: compaction.report.clone(),
        receipt: compaction.report.receipt.clone(),
        summary,
    })
    .await;
}
