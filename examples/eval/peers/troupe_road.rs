//! `troupe` as it ships: the replay is `troupe_cli::transcript_ops::replay_transcript` itself
//! (what `troupe replay` and the eval's replay mode run), with a compression agent of its own
//! summarizing mechanically. The observer sees every message fed and every compaction, keeps the
//! live conversation beside the replay's, and measures what the agent would send before each
//! assistant message (recall, pairing, largest prompt).
//!
//! Billing: with a summarizer of its own ([`SummaryCall::Separate`]) the bill is exactly
//! `troupe replay --cost`'s — two `troupe_cli::transcript_ops::CostMeter`s, one per cost model,
//! watch the replay. As troupe ships (the compression agent summarizes with the agent's own
//! model, `CompressorModel::AgentsOwn`, the default) each summary call takes the form that
//! bills less ([`SummaryCall::Inline`]; `cheaper_summary_call`, as the compression agent
//! chooses): the agent's last request plus an instruction, or the segment's own prompt. The
//! replay has no agent request to extend, so the call is billed here: inline as `CostMeter`
//! bills an inline call (the live conversation before the compaction, then troupe's summarizer
//! instructions, through the emulated caches), on its own as `CostMeter` bills a separate one.

use troupe::compaction::ContextPolicy;
use troupe::compaction::economics::{
    CostModel, SummaryCall as TroupeSummaryCall, cheaper_summary_call,
};
use troupe::compaction::summary::segment_prompt;
use troupe::protocol::{ChatMessage, Conversation, Role};
use troupe::tokens::TokenCounter;
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{
    Compressor, CostMeter, ReplayObserver, ReplayReport, ReplayedCompaction, replay_transcript,
};

use super::tally::{Outcome, Tally};

/// What troupe's summarizer call shares with the agent's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SummaryCall {
    /// A prompt of its own (the summarizer's instructions and the rendered segment), as a
    /// dedicated summarizer model is sent it: billed by `troupe replay --cost`'s meter.
    Separate,
    /// The compressor summarizing with the agent's own model (the default): per summary, the
    /// agent's last request with the summarizer's instructions at the end (it rides the cached
    /// prefix) or, when that bills less, the segment's own prompt.
    Inline,
}

/// A troupe road: the shipped policy for the window with at most these changes.
#[derive(Debug, Clone, Copy)]
pub(super) struct TroupeVariant {
    /// The compaction target instead of the policy's (a fraction of the window).
    pub(super) target: Option<f64>,
    /// The automatic trigger instead of the policy's (a fraction of the window; the warning
    /// follows it down).
    pub(super) trigger: Option<f64>,
    /// Whether automatic compactions use the cost-aware target, instead of the policy's.
    pub(super) cost_aware: Option<bool>,
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
        // The separate shape is billed by the cost meters around this observer. The agent's
        // own model takes, per summary, the form that bills less (`cheaper_summary_call`,
        // priced as the shipped policy prices it: OpenAI's rates); the replay's mechanical
        // summarizer answered the segment's own prompt, whose tokens the usage holds.
        if self.summary_call == SummaryCall::Inline && usage.calls > 0 {
            let mut messages = event.before.to_messages();
            messages.push(ChatMessage::user(self.instruction.clone()));
            let counts: Vec<usize> = messages
                .iter()
                .map(|m| self.counter.count_message(m))
                .collect();
            let instruction = counts.last().copied().unwrap_or(0);
            let agent_prompt = counts.iter().sum::<usize>() - instruction;
            let own = usage.input_tokens / usage.calls;
            for _ in 0..usage.calls {
                match cheaper_summary_call(&CostModel::openai(), agent_prompt, instruction, own) {
                    TroupeSummaryCall::Inline => self
                        .tally
                        .summarizer_call(&messages, usage.output_tokens / usage.calls),
                    TroupeSummaryCall::OwnPrompt => self.tally.own_prompt_summarizer_call(own),
                }
            }
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
    let mut policy = ContextPolicy::for_window(window);
    if let Some(target) = variant.target {
        policy.target = target;
    }
    if let Some(trigger) = variant.trigger {
        policy.trigger = trigger;
        policy.warning = policy.warning.min(trigger);
    }
    if let Some(cost_aware) = variant.cost_aware {
        policy.cost_aware = cost_aware;
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
    let (report, costs) = match variant.summary_call {
        SummaryCall::Inline => {
            let report =
                replay_transcript(input, &policy, shared.as_ref(), &compressor, &mut bills).await;
            (report, None)
        }
        SummaryCall::Separate => {
            let messages = &input.messages;
            let mut anthropic = CostMeter::new(
                messages,
                &policy,
                shared.as_ref(),
                CostModel::anthropic(),
                &mut bills,
            );
            let mut openai = CostMeter::new(
                messages,
                &policy,
                shared.as_ref(),
                CostModel::openai(),
                &mut anthropic,
            );
            let report =
                replay_transcript(input, &policy, shared.as_ref(), &compressor, &mut openai).await;
            let mut costs = match &report {
                Ok(report) => [report.clone(), report.clone()],
                Err(_) => Default::default(),
            };
            openai.finish(&mut costs[0]);
            anthropic.finish(&mut costs[1]);
            (report, Some(costs))
        }
    };
    compressor.shutdown().await;
    let report = report?;
    let mut outcome = bills.tally.finish();
    outcome.invariants_ok &= report.invariants_ok;
    if let Some(reports) = costs {
        metered(&mut outcome, &reports);
    }
    Ok(outcome)
}

/// The bill `troupe replay --cost` gives, in place of the observer's. The observer billed the
/// agent's calls alone (the summarizer's are the meters'); under OpenAI (no TTL, so no clock
/// in it) both must agree on those to the token, a check of the two billings against each other.
fn metered(outcome: &mut Outcome, reports: &[ReplayReport; 2]) {
    for (i, report) in reports.iter().enumerate() {
        if let Some(cost) = &report.cost {
            let agent = cost.billed - cost.compaction_billed;
            if i == 0 && (agent - outcome.billed[0]).abs() > 1e-6 * agent.max(1.0) {
                eprintln!(
                    "  warning: the agent's calls billed {:.1} here but {agent:.1} by replay --cost",
                    outcome.billed[0]
                );
            }
            outcome.billed[i] = cost.billed;
            outcome.compaction_billed[i] = cost.compaction_billed;
            outcome.cache_hit[i] = cost.cache_hit;
        }
    }
}
