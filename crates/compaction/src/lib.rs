//! troupe's context compaction: a pure library that shrinks a conversation to its target.
//!
//! Given a [`Conversation`](troupe_protocol::Conversation), the agent's [`FileLedger`], a
//! [`ContextPolicy`], a [`TokenCounter`](troupe_tokens::TokenCounter) and optionally a
//! [`Summarizer`](summary::Summarizer), [`compact`] returns a smaller conversation that is still valid for the chat API, still knows
//! its task, and can be [`expand`]ed back to the exact original.
//!
//! The tiers run cheapest first and stop as soon as the target is met:
//! 1. **truncate** oversized tool outputs to head + tail + a marker;
//! 2. **mask** old tool results with metadata stubs from the ledger, drop display-only messages;
//! 3. **summarize** a segment of old turns into one structured summary.
//!
//! Every result is checked by [`validate`](invariants::validate) (tool pairs intact, protected messages byte-identical,
//! tokens never increase, nothing lost) before it is returned.
//!
//! Every item has one path. The root holds what a caller of [`compact`] and [`expand`] needs;
//! the rest lives in topic modules:
//!
//! - **Compacting:** [`compact`] (or [`compact_with`], which lets a [`Steering`] work the
//!   session first) with [`CompactOptions`] and a
//!   [`CompactTrigger`](troupe_protocol::CompactTrigger) returns a [`Compaction`]: the new
//!   messages, the [`Archive`] of what they replaced and a
//!   [`CompactionReport`](troupe_protocol::CompactionReport); or a
//!   [`CompactionError`].
//! - **Context:** [`ContextPolicy`] says when to compact and to what target ([`PolicyError`]);
//!   [`ThrashGuard`] holds automatic compaction back until it can free enough new tokens.
//! - [`context_check`]: what an agent does about its context before a model call and after a
//!   turn — one pure decision, [`ContextCheck::decide`](context_check::ContextCheck::decide):
//!   a [`ContextMeasure`](context_check::ContextMeasure) in, a
//!   [`ContextAction`](context_check::ContextAction) out (go on, warn, work ahead, join,
//!   compact, make room).
//! - **Nothing lost:** every replaced message goes into the [`Archive`]; [`expand`] restores the
//!   exact original. An answer too large for the window even alone is cut as it arrives
//!   ([`Archive::push_cut_answer`]), the whole of it archived the same way.
//! - Counting is troupe-tokens' ([`TokenCounter`](troupe_tokens::TokenCounter), the
//!   per-message [`TokenCache`](troupe_tokens::TokenCache)), shared with the providers.
//! - [`summary`]: the [`Summarizer`](summary::Summarizer) trait, the offline
//!   [`MechanicalSummarizer`](summary::MechanicalSummarizer), and
//!   [`vet_summary`](summary::vet_summary), which rejects summaries too thin or ungrounded to
//!   trust.
//! - [`session`]: the [`CompactionSession`](session::CompactionSession) the compression agent
//!   drives one operation at a time; [`compact`] is that session run by its deterministic
//!   planner.
//! - [`artifacts`]: the [`ArtifactLedger`](artifacts::ArtifactLedger) of files, commands and
//!   test results a summary must not forget.
//! - [`invariants`]: what every result is checked against ([`validate`](invariants::validate)).
//! - [`economics`]: what a compaction costs against a provider's prompt cache: the emulated
//!   [`PromptCache`](economics::PromptCache) and a compaction's
//!   [`receipt`](economics::receipt).
//! - [`transcript`]: read a saved session ([`parse_transcript`](transcript::parse_transcript),
//!   [`ledger_from_transcript`](transcript::ledger_from_transcript)).
//!
//! [`FileLedger`]: troupe_protocol::FileLedger

#![deny(unreachable_pub)]

mod archive;
pub mod artifacts;
mod compact;
pub mod context_check;
pub mod economics;
mod error;
mod guard;
pub mod invariants;
mod markers;
mod mask;
mod oversized;
mod pairing;
mod policy;
mod protection;
pub mod session;
mod splice;
pub mod summary;
mod tagged;
pub mod transcript;
mod truncate;
mod validate;

pub use archive::{Archive, ArchiveEntry, ArchiveError, ExpandError, expand};
pub use compact::{CompactOptions, Compaction, Steering, compact, compact_with};
pub use error::CompactionError;
pub use guard::ThrashGuard;
pub use policy::{ContextPolicy, PolicyError};
pub use splice::{Splice, SpliceError};
