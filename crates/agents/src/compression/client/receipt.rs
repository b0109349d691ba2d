//! Every compaction that changed a conversation leaves with a receipt: what it kept cached,
//! what it makes the next call re-read, and what it saves over the calls until the next one
//! (`troupe_compaction::economics`). Priced here, on the asker's side, so every route — the
//! team's compression agent, one on another node, the planner on this node — gets one.

use std::sync::Arc;

use troupe_compaction::economics::{self, CostModel};
use troupe_compaction::{Compaction, ContextPolicy};
use troupe_protocol::ChatMessage;
use troupe_tokens::{CachedCounter, TokenCache, TokenCounter};

/// The cost model receipts are priced under: the policy's pricing (the agent's provider's
/// cache), else OpenAI's automatic prefix caching at its default rates (cached input at a
/// tenth). A receipt is an estimate for the trace; `troupe replay --cost` prices a whole
/// session under either model.
pub(crate) fn receipt_cost_model(policy: &ContextPolicy) -> CostModel {
    policy.pricing.unwrap_or_else(CostModel::openai)
}

/// Price `compaction` of the conversation `before` (compacted under `policy`) and put the
/// receipt in its report — unless nothing changed, or a receipt is there already (the
/// compressor priced it). Counted with `counter`, from `cache` when the asker has one. `expected_turns` is [`economics::expected_turns`]: the room the
/// compaction left under the trigger over the mean tokens a turn of this conversation added.
pub(crate) fn attach_receipt(
    before: &[Arc<ChatMessage>],
    policy: &ContextPolicy,
    (counter, cache): (&dyn TokenCounter, Option<&TokenCache>),
    compaction: &mut Compaction,
) {
    if !compaction.changed() || compaction.report.receipt.is_some() {
        return;
    }
    // The asker's warm counts: the messages before were counted, and the compaction warmed
    // the cache with what it wrote.
    let cached = CachedCounter::new(counter, cache);
    let counter: &dyn TokenCounter = &cached;
    let model = receipt_cost_model(policy);
    let report = &compaction.report;
    let summarizer_billed = economics::summarizer_billed(&report.summarizer, &model);
    let turns = economics::expected_turns(
        before,
        counter,
        policy.trigger_tokens(),
        report.tokens_after,
    );
    let receipt = economics::receipt(
        before,
        &compaction.messages,
        counter,
        &model,
        summarizer_billed,
        turns,
    );
    compaction.report.receipt = Some(receipt);
}
