//! `troupe` as it ships: the replay is `troupe_cli::transcript_ops::replay_transcript` itself
//! (what `troupe replay` and the eval's replay mode run), with a compression agent of its own
//! summarizing mechanically. The observer sees every message fed and every compaction, keeps the
//! live conversation beside the replay's, and bills what the agent would send before each
//! assistant message and what each compaction's summarizer calls cost.

use troupe::compaction::BudgetPolicy;
use troupe::compaction::summary::segment_prompt;
use troupe::compaction::tokens::TokenCounter;
use troupe::runtime::{ChatMessage, Conversation, Role};
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{
    Compressor, ReplayObserver, ReplayedCompaction, replay_transcript,
};

use super::tally::{Outcome, Tally};

/// What troupe's summarizer call shares with the agent's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SummaryCall {
    /// A prompt of its own (the summarizer's instructions and the rendered segment), as the
    /// compression agent sends it today: billed by the size the report gives.
    Separate,
    /// The agent's last prompt with the summarizer's instructions at the end (the compressor
    /// summarizing with the agent's own model): it rides the cached prefix.
    Inline,
}

/// A troupe road: the shipped policy for the window with at most these changes.
#[derive(Debug, Clone, Copy)]
pub(super) struct TroupeVariant {
    /// The compaction target instead of the policy's (a fraction of the window).
    pub(super) target: Option<f64>,
    pub(super) summary_call: SummaryCall,
}

struct Bills<'t> {
    input: &'t [ChatMessage],
    counter: &'t dyn TokenCounter,
    tally: Tally<'t>,
    /// The live conversation, as the replay has it.
    live: Conversation,
    summary_call: SummaryCall,
    /// troupe's summarizer instructions (for the inline shape).
    instruction: String,
}

impl ReplayObserver for Bills<'_> {
    fn on_message(&mut self, fed: usize) {
        let Some(message) = fed.checked_sub(1).and_then(|i| self.input.get(i)) else {
            return;
        };
        // The replay compacted (if due) after the previous message; the model call for this
        // assistant message is sent now, before it joins the conversation.
        if message.role == Role::Assistant && fed > 1 {
            let output = self.counter.count_message(message);
            self.tally
                .agent_call(fed - 1, self.live.to_messages(), output);
        }
        self.live.push(message.clone());
    }

    fn on_compaction(&mut self, event: &ReplayedCompaction<'_>) {
        let usage = &event.compaction.report.summarizer;
        match self.summary_call {
            SummaryCall::Separate => {
                for _ in 0..usage.calls {
                    self.tally.fresh_summarizer_call(
                        usage.input_tokens / usage.calls,
                        usage.output_tokens / usage.calls,
                    );
                }
            }
            SummaryCall::Inline if usage.calls > 0 => {
                let mut messages = event.before.to_messages();
                messages.push(ChatMessage::user(self.instruction.clone()));
                self.tally.summarizer_call(&messages, usage.output_tokens);
            }
            SummaryCall::Inline => {}
        }
        if !event.row.invariants_ok {
            self.tally.invariants_failed();
        }
        let mut after = event.before.clone();
        event.compaction.apply_to(&mut after);
        self.tally
            .compacted(event.row.at_message, &after.to_messages());
        self.live = after;
    }
}

/// Replay `input` at `window` on the troupe road `variant`, billing as it goes.
pub(super) async fn live_troupe(
    input: &TranscriptFile,
    window: usize,
    variant: TroupeVariant,
    counter: &dyn TokenCounter,
) -> anyhow::Result<Outcome> {
    let mut policy = BudgetPolicy::for_window(window);
    if let Some(target) = variant.target {
        policy.target = target;
    }
    policy.validate()?;
    let instruction = segment_prompt("", None, None, policy.summary_max_tokens).system;
    let mut bills = Bills {
        input: &input.messages,
        counter,
        tally: Tally::new(&input.messages, counter),
        live: Conversation::new(),
        summary_call: variant.summary_call,
        instruction,
    };
    let shared = troupe::agents::shared_counter();
    let compressor = Compressor::start(None, shared.clone()).await?;
    let report = replay_transcript(input, &policy, shared.as_ref(), &compressor, &mut bills).await;
    compressor.shutdown().await;
    let report = report?;
    let mut outcome = bills.tally.finish();
    outcome.invariants_ok &= report.invariants_ok;
    Ok(outcome)
}
