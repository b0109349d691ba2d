//! troupe's context compaction: a pure library that shrinks a conversation to its token budget.
//!
//! Given a [`Conversation`](troupe_runtime::Conversation), the agent's [`FileLedger`]
//! (troupe_tools), a [`BudgetPolicy`], a [`TokenCounter`] and optionally a [`Summarizer`],
//! [`compact`] returns a smaller conversation that is still valid for the chat API, still knows
//! its task, and can be [`expand`]ed back to the exact original.
//!
//! The tiers run cheapest first and stop as soon as the target is met:
//! 1. **truncate** oversized tool outputs to head + tail + a marker ([`truncate`]);
//! 2. **mask** old tool results with metadata stubs from the ledger, drop display-only messages
//!    ([`mask`]);
//! 3. **summarize** a segment of old turns into one structured summary ([`summary`]).
//!
//! Every result is checked by [`validate`] (tool pairs intact, protected messages byte-identical,
//! tokens never increase, nothing lost) before it is returned.
//!
//! The compression agent drives the same operations one at a time through a
//! [`CompactionSession`]; [`compact`] is that session run by its deterministic planner.
//!
//! [`FileLedger`]: troupe_tools::FileLedger

pub mod archive;
pub mod artifacts;
pub mod compact;
pub mod counter;
pub mod error;
pub mod guard;
mod id_hash;
pub mod markers;
pub mod mask;
pub mod pairing;
pub mod policy;
pub mod protection;
pub mod report;
pub mod session;
pub mod summary;
mod tagged;
pub mod token_cache;
pub mod transcript;
pub mod truncate;
pub mod validate;

pub use archive::{Archive, ArchiveEntry, ArchiveError, ExpandError, expand};
pub use artifacts::{ArtifactLedger, TestStatus};
pub use compact::{CompactOptions, CompactTrigger, Compaction, Steering, compact, compact_with};
pub use counter::{
    BpeEncoding, CharEstimateCounter, MessageOverhead, TiktokenCounter, TokenCounter,
};
pub use error::{CompactionError, Refusal};
pub use guard::ThrashGuard;
pub use policy::{BudgetPolicy, BudgetState, PolicyError};
pub use protection::{IdRange, ProtectedSet};
pub use report::{CompactionReport, SummarizerUsage, TierCounts};
pub use session::{
    CompactionSession, CompressionMetadata, CompressionStrategy, LedgerSummary, MessageMetadata,
    PlannedStep, PlannerOutcome, StepOutcome, TargetStatus,
};
pub use summary::{
    FileLists, MechanicalSummarizer, Summarizer, SummarizerError, SummaryKind, SummaryPrompt,
    SummaryRejection, summary_has_substance, vet_summary,
};
pub use token_cache::{CacheStats, ConversationTokens, TokenCache};
pub use transcript::{Transcript, TranscriptError, ledger_from_transcript, parse_transcript};
pub use validate::{InvariantViolation, ValidationContext, check_invariants, validate};
