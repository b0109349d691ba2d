//! troupe's context compaction: a pure library that shrinks a conversation to its token budget.
//!
//! Given a [`Conversation`](troupe_runtime::Conversation), the agent's [`FileLedger`]
//! (troupe_tools), a [`BudgetPolicy`], a [`TokenCounter`] and optionally a [`Summarizer`],
//! [`compact`] returns a smaller conversation that is still valid for the chat API, still knows
//! its task, and can be [`expand`]ed back to the exact original.
//!
//! The tiers run cheapest first and stop as soon as the target is met:
//! 1. **truncate** oversized tool outputs to head + tail + a marker;
//! 2. **mask** old tool results with metadata stubs from the ledger, drop display-only messages;
//! 3. **summarize** a segment of old turns into one structured summary.
//!
//! Every result is checked by [`validate`] (tool pairs intact, protected messages byte-identical,
//! tokens never increase, nothing lost) before it is returned.
//!
//! Every item is exported once, at the crate root; the modules are private. The entry points:
//!
//! - **Compacting:** [`compact`] and [`compact_with`] (with [`CompactOptions`]) return a
//!   [`Compaction`]: the new messages, the [`Archive`] of what they replaced and a
//!   [`CompactionReport`]. The compression agent drives the same
//!   operations one at a time through a [`CompactionSession`]; [`compact`] is that session run by
//!   its deterministic planner ([`PlannedStep`]).
//! - **Budget:** [`BudgetPolicy`] says when to compact and to what target; [`ThrashGuard`] holds
//!   automatic compaction back until it can free enough new tokens.
//! - **Summaries:** implement [`Summarizer`] for a model-backed summarizer, or use the offline
//!   [`MechanicalSummarizer`]; [`vet_summary`] rejects summaries too thin or ungrounded to trust.
//! - **Nothing lost:** every replaced message goes into the [`Archive`]; [`expand`] restores the
//!   exact original. [`ArtifactLedger`] keeps the files, commands and test results a summary must
//!   not forget.
//! - **Counting tokens:** [`TokenCounter`] with [`TiktokenCounter`] or [`CharEstimateCounter`],
//!   cached per message by [`TokenCache`].
//! - **Transcripts:** [`parse_transcript`] and [`ledger_from_transcript`] read a saved session.
//!
//! [`FileLedger`]: troupe_tools::FileLedger

#![deny(unreachable_pub)]

mod archive;
mod artifacts;
mod compact;
mod counter;
mod error;
mod guard;
mod id_hash;
mod markers;
mod mask;
mod pairing;
mod policy;
mod protection;
mod report;
mod session;
mod summary;
mod tagged;
mod token_cache;
mod transcript;
mod truncate;
mod validate;

pub use archive::{Archive, ArchiveEntry, ArchiveError, ExpandError, expand};
pub use artifacts::{ArtifactLedger, TestStatus};
pub use compact::{CompactOptions, CompactTrigger, Compaction, Steering, compact, compact_with};
pub use counter::{
    BpeEncoding, CharEstimateCounter, MessageOverhead, TiktokenCounter, TokenCounter,
};
pub use error::{CompactionError, Refusal};
pub use guard::ThrashGuard;
pub use pairing::{owners as tool_call_owners, tool_name};
pub use policy::{BudgetPolicy, BudgetState, PolicyError};
pub use protection::{IdRange, ProtectedSet};
pub use report::{CompactionReport, SummarizerUsage, TierCounts};
pub use session::{
    CompactionSession, CompressionMetadata, CompressionStrategy, LedgerSummary, MessageMetadata,
    PlannedStep, PlannerOutcome, StepOutcome, TargetStatus,
};
pub use summary::{
    FileLists, FoldOutcome, MechanicalSummarizer, ParsedSummary, Summarizer, SummarizerError,
    SummaryKind, SummaryPrompt, SummaryRejection, missing_sections, normalize_summary,
    parse_summary_message, render_message, segment_prompt, summarize_folded, summary_has_substance,
    vet_summary,
};
pub use token_cache::{CacheStats, ConversationTokens, TokenCache};
pub use transcript::{
    BYTE_ORDER_MARK, Transcript, TranscriptError, ledger_from_transcript, parse_transcript,
};
pub use validate::{InvariantViolation, ValidationContext, check_invariants, validate};
