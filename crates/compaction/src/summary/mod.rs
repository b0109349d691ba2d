//! Tier 3: structured summaries of old turns, and the [`Summarizer`] that writes them.
//!
//! A segment of old messages becomes one message with the fixed six-section structure (Goal ·
//! Constraints & Preferences · Progress · Key Decisions · Next Steps · Critical Context),
//! followed by `<read-files>` / `<modified-files>` lists computed from the file ledger. A
//! previous summary inside the segment is merged by the update prompt ("anchored iterative"
//! summarization), and its file lists are carried over as a union.
//!
//! A summarizer that is the agent's own model is asked by continuing the agent's conversation
//! instead ([`inline_summary`]): the request is the agent's cached prompt plus an instruction at
//! the end, so the provider reads it from its cache.

pub(crate) mod fold;
mod format;
mod inline;
mod material;
mod mechanical;
mod prompt;
mod render;
mod summarizer;
mod trust;

pub use fold::{FoldOutcome, summarize_folded};
pub(crate) use format::summary_message_text;
pub use format::{
    FileLists, ParsedSummary, missing_sections, normalize_summary, parse_summary_message,
    summary_has_substance,
};
pub use inline::{InlineSegment, InlineSummary, inline_summary};
pub use mechanical::MechanicalSummarizer;
pub(crate) use mechanical::fit::fit_summary;
pub(crate) use prompt::per_message_prompt;
pub use prompt::{SummaryKind, SummaryPrompt, segment_prompt};
pub use render::render_message;
pub use summarizer::{Summarizer, SummarizerError};
pub use trust::{SummaryRejection, vet_summary};
