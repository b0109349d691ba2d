//! Compaction on the asker's own node, with the planner and no compression agent: making
//! room at an agent's limit without a model ([`make_room`]), and the fallback when no
//! compression agent can be reached ([`compact_here`] with a reason).

use troupe_compaction::Compaction;
use troupe_compaction::summary::{MechanicalSummarizer, Summarizer};
use troupe_tokens::TokenCounter;

use super::CompactionAskError;
use crate::compression::job::CompactionRequest;

/// Make room in `request`'s conversation on this node, without a model. Masking and truncating
/// old tool results frees most of a working conversation in a millisecond or two; summarizing
/// its turns, even mechanically, takes tens (a pass over every message's text), so it runs
/// only when masking leaves the conversation at or past the trigger — a conversation of
/// talk rather than tool output. The model summarizes in the background once the agent goes
/// on past the work-ahead threshold.
pub(super) async fn make_room(
    request: &CompactionRequest,
    counter: &dyn TokenCounter,
) -> Result<Compaction, CompactionAskError> {
    let masked = plan(request, counter, None).await?;
    if masked.report.tokens_after < request.policy.trigger_tokens() {
        return Ok(masked);
    }
    plan(request, counter, Some(&MechanicalSummarizer::new())).await
}

/// Compact `request` on this node with the planner and the mechanical summarizer because no
/// compression agent could be reached (`why`, recorded in the report's fallbacks).
pub(super) async fn compact_here(
    request: &CompactionRequest,
    counter: &dyn TokenCounter,
    why: &str,
) -> Result<Compaction, CompactionAskError> {
    tracing::warn!(agent = %request.agent, %why, "compacting on this node");
    let mut compaction = plan(request, counter, Some(&MechanicalSummarizer::new())).await?;
    compaction
        .report
        .fallbacks
        .push(format!("compacted by the agent's own node: {why}"));
    Ok(compaction)
}

/// Compact `request` on this node with the planner — `compact`, the one road with no model
/// steering, which the compression agent also finishes every compaction with — and
/// `summarizer` (the mechanical one, or none: masking and truncating only).
async fn plan(
    request: &CompactionRequest,
    counter: &dyn TokenCounter,
    summarizer: Option<&dyn Summarizer>,
) -> Result<Compaction, CompactionAskError> {
    troupe_compaction::compact(
        &request.conversation,
        &request.ledger,
        &request.policy,
        counter,
        summarizer,
        request.compact_options(),
    )
    .await
    .map_err(CompactionAskError::Failed)
}
