//! What one summarizer call bills — asked by continuing the agent's cached prompt, or with a
//! prompt of its own — and which of the two a compaction takes.
//!
//! Continuing the agent's prompt reads that prompt cached (`c·P`, `P` the agent's last request)
//! and pays only the instruction fresh (`f·I`); a prompt of its own pays every token fresh
//! (`f·Q`, `Q` the summarizer's instructions and the rendered segment). The answer costs the
//! same either way. So the inline call is the cheaper one unless the segment is small beside
//! the agent's prompt: `Q < (c/f)·P + I` — at OpenAI's rates a segment under about a tenth of
//! the prompt. The compression agent asks [`cheaper_summary_call`] for every segment it
//! summarizes when its summarizer is the agent's own model (which can take either road), and
//! the cost-aware target prices a cycle's summary the same way ([`super::SummaryRoad`]).

use super::model::CostModel;

/// The form of one summarizer call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryCall {
    /// The agent's last request, unchanged, then an instruction: it rides the agent's cache.
    Inline,
    /// The summarizer's instructions and the rendered segment: all of it new.
    OwnPrompt,
}

/// What an inline summary call's input bills, in uncached-token units: the agent's prompt of
/// `agent_prompt_tokens` read cached, then `instruction_tokens` fresh.
pub fn inline_call_billed(
    model: &CostModel,
    agent_prompt_tokens: f64,
    instruction_tokens: f64,
) -> f64 {
    model.rates().cached_read * agent_prompt_tokens + model.fresh_prefix_rate() * instruction_tokens
}

/// What a summary call with a prompt of its own bills: `prompt_tokens`, all fresh.
pub fn own_prompt_call_billed(model: &CostModel, prompt_tokens: f64) -> f64 {
    model.fresh_prefix_rate() * prompt_tokens
}

/// The form that bills less under `model` for one summary: inline, continuing the agent's
/// prompt of `agent_prompt_tokens` with an instruction of `instruction_tokens`, or a prompt of
/// its own of `own_prompt_tokens`. A tie goes inline (the form the agent's own model is asked
/// first).
pub fn cheaper_summary_call(
    model: &CostModel,
    agent_prompt_tokens: usize,
    instruction_tokens: usize,
    own_prompt_tokens: usize,
) -> SummaryCall {
    let inline = inline_call_billed(model, agent_prompt_tokens as f64, instruction_tokens as f64);
    let own = own_prompt_call_billed(model, own_prompt_tokens as f64);
    if own < inline {
        SummaryCall::OwnPrompt
    } else {
        SummaryCall::Inline
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::economics::Rates;

    #[test]
    fn a_small_segment_beside_a_large_prompt_goes_on_its_own() {
        let openai = CostModel::openai();
        // 0.1 × 20,000 + 600 = 2,600 inline against 2,000 on its own.
        assert_eq!(
            cheaper_summary_call(&openai, 20_000, 600, 2_000),
            SummaryCall::OwnPrompt
        );
        // 0.1 × 20,000 + 600 = 2,600 against 8,000: inline.
        assert_eq!(
            cheaper_summary_call(&openai, 20_000, 600, 8_000),
            SummaryCall::Inline
        );
        // Anthropic writes a fresh prefix at 1.25: 0.1 × 20,000 + 750 = 2,750 against 2,500.
        assert_eq!(
            cheaper_summary_call(&CostModel::anthropic(), 20_000, 600, 2_000),
            SummaryCall::OwnPrompt
        );
        // Equal bills go inline.
        assert_eq!(
            cheaper_summary_call(&openai, 10_000, 1_000, 2_000),
            SummaryCall::Inline
        );
    }

    proptest! {
        /// The choice is the form with the lower bill, whatever the rates.
        #[test]
        fn the_choice_bills_no_more_than_the_other_form(
            prompt in 0usize..400_000,
            instruction in 0usize..4_000,
            own in 0usize..400_000,
            cached in 0.0f64..1.0,
            write in 1.0f64..2.0,
        ) {
            let model = CostModel::anthropic()
                .with_rates(Rates { cached_read: cached, cache_write: write, input: 1.0 });
            let inline = inline_call_billed(&model, prompt as f64, instruction as f64);
            let alone = own_prompt_call_billed(&model, own as f64);
            let chosen = match cheaper_summary_call(&model, prompt, instruction, own) {
                SummaryCall::Inline => inline,
                SummaryCall::OwnPrompt => alone,
            };
            prop_assert!(chosen <= inline.min(alone) + 1e-9);
        }
    }
}
