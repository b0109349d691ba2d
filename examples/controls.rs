//! The controls a team with a `shell` tool and one API key needs, one after another: tool
//! approval, a token budget, a pinned rules message, compaction hooks and a shared rate limit.
//! Each step prints lines that name it (`approval: …`, `budget: …`, `hook: …`, `pin: …`,
//! `rate limit: …`).
//!
//! Run it:
//!
//! ```text
//! cargo run --example controls -- --scripted
//! ```
//!
//! `--scripted` is the only way to run it: every step depends on what the model asks for (an
//! `rm` the policy asks about, a second call the budget stops), and the 135M local model picks
//! its commands at random. The agents' models are scripted ([`ScriptedModel`]); everything else
//! is real — the `shell` tool runs `rm` in a temporary directory, the approval desk, the budget
//! meter, the compression agent (mechanical summaries), the hooks and the rate limiter. `tests/suite/
//! example_controls.rs` runs this file's [`run`] and checks every step's line.
//!
//! 1. **approval**: `ops` may run `shell` freely except `rm …`, which waits for a person. The
//!    code below plays the person: it listens for `Event::ApprovalRequested` and approves the
//!    first `rm` (`team.approve`), denies the second (`team.deny`); the model gets the denial as
//!    the call's result.
//! 2. **budget**: `auditor` may read 20 input tokens per request; its first model call spends
//!    more, so the request ends with `AgentError::BudgetExceeded { spent, limit, scope }` before
//!    the second call, keeping the call and its result.
//! 3. **pin** and **hook**: `coder` has the project's rules pinned after its system prompt and
//!    two hooks: the before hook vetoes automatic compactions (the user is reviewing the log)
//!    and asks a person's `/compact` to preserve a ticket number; the after hook records the
//!    report and receipt. The rules come out of the compaction byte-identical.
//!
//! 4. **rate limit**: the three agents call one endpoint (one scripted model) through one
//!    [`RateLimitedModel`], built once and handed to each, so one limit counts all their calls.
//!    The limit leaves room for every call here: a wait for room lasts up to a minute, so the
//!    waits, a `Retry-After` holding every agent and a 429 storm are shown by
//!    `crates/agents/tests/suite/rate_limit.rs` (on paused time), not by this example.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::sync::broadcast;
use troupe::agents::compression::hooks::{
    AfterCompaction, BeforeCompaction, CompactionHooks, HookVerdict,
};
use troupe::agents::compression::{CompressionConfig, CompressorModel};
use troupe::agents::spend::AgentBudget;
use troupe::agents::{CompactionSettings, LlmAgent, WorkAhead};
use troupe::compaction::ContextPolicy;
use troupe::compaction::session::{CompactionPreview, MessageFate};
use troupe::models::{RateLimit, RateLimitedModel, ScriptedModel, ScriptedReply};
use troupe::prelude::*;
use troupe::protocol::CompactTrigger;
use troupe::protocol::Role;
use troupe::protocol::SpendLimit;
use troupe::runtime::AgentError;
use troupe::session::load;
use troupe::tools::approval::{ApprovalPolicy, ApprovalRule, Permission};
use troupe::tools::builtin::{ShellConfig, shell_tool};
use troupe::{AgentSpec, AskError, ChatMessage, Event, EventRecord, Team, ToolRegistry};

const OPS: &str = "ops";
const AUDITOR: &str = "auditor";
const CODER: &str = "coder";

/// The rules `coder` keeps pinned through every compaction.
const RULES: &str = "Project rules: never force-push; every change gets a test; ask before \
                     deleting anything outside build/.";

/// The endpoint's limit: room for every call here, so nothing waits (a wait for room lasts up
/// to a minute: too slow for an example).
const REQUESTS_PER_MINUTE: u32 = 100;

/// A ticket number `coder`'s before hook asks a compaction to keep.
const TICKET: &str = "ticket #4411";

#[tokio::main]
#[cfg_attr(test, allow(dead_code, reason = "the test calls `run`, not `main`"))]
async fn main() -> anyhow::Result<()> {
    if !std::env::args().any(|a| a == "--scripted") {
        eprintln!(
            "controls runs scripted models only (see its header): \
             cargo run --example controls -- --scripted"
        );
        std::process::exit(2);
    }
    run(&mut std::io::stdout()).await
}

/// Every step, printed to `out`.
pub(crate) async fn run(out: &mut dyn Write) -> anyhow::Result<()> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("build.log"), "old build output\n")?;
    std::fs::create_dir(workspace.path().join("src"))?;
    std::fs::write(workspace.path().join("src/main.rs"), "fn main() {}\n")?;
    let log = workspace.path().join("coder.jsonl");
    let hooks_saw = HooksSaw::default();

    // One endpoint for the three agents, as one API key is: the script is what `ops` and then
    // `auditor` ask (the steps run one after another); `coder` gets the fallback.
    let endpoint = Arc::new(
        ScriptedModel::new(
            "scripted-endpoint",
            [
                ScriptedReply::call("shell", r#"{"command": "rm build.log"}"#),
                ScriptedReply::text("Removed build.log."),
                ScriptedReply::call("shell", r#"{"command": "rm -r src"}"#),
                ScriptedReply::text("I left src alone."),
                ScriptedReply::call("shell", r#"{"command": "ls"}"#),
            ],
        )
        .with_fallback("Noted; next I look at `parse_config` in src/config.rs."),
    );
    // Built once and handed to every agent, so one limit counts all their calls.
    let limited = RateLimitedModel::new(
        endpoint.clone(),
        RateLimit::per_minute(Some(REQUESTS_PER_MINUTE), None)?,
    );
    let shared: Arc<dyn ChatModel> = Arc::new(limited.clone());

    let team = Team::builder()
        .compression(CompressionConfig {
            model: CompressorModel::None,
            ..CompressionConfig::default()
        })
        .agent(ops_spec(shared.clone(), workspace.path()))
        .agent(auditor_spec(shared.clone(), workspace.path()))
        .agent(coder_spec(shared, &log, &hooks_saw))
        .start()
        .await?;
    let outcome = async {
        approval(out, &team, &endpoint, workspace.path()).await?;
        budget(out, &team, &endpoint).await?;
        pin_and_hooks(out, &team, &log, &hooks_saw).await?;
        rate_limit(out, &limited)
    }
    .await;
    team.shutdown().await;
    outcome
}

/// `ops`: `shell`, where `rm …` waits for a person and everything else runs.
fn ops_spec(model: Arc<dyn ChatModel>, workspace: &Path) -> AgentSpec {
    AgentSpec::new(OPS, model)
        .instructions("You keep the workspace tidy with the shell tool.")
        .tools(shell_tools())
        .workspace_root(workspace)
        .approval(ApprovalPolicy::new([
            ApprovalRule::argument_prefix("shell", "command", "rm ", Permission::Ask),
            ApprovalRule::tool("shell", Permission::Allow),
        ]))
}

/// `auditor`: `shell`, and a per-request budget of 20 input tokens.
fn auditor_spec(model: Arc<dyn ChatModel>, workspace: &Path) -> AgentSpec {
    AgentSpec::new(AUDITOR, model)
        .instructions(
            "You audit the workspace: list what is there with the shell tool and report what \
             you find, one line per entry, with nothing left out.",
        )
        .tools(shell_tools())
        .workspace_root(workspace)
        .budget(AgentBudget {
            request: SpendLimit {
                input_tokens: Some(20),
                ..SpendLimit::default()
            },
            ..AgentBudget::default()
        })
}

/// `coder`: the rules pinned, a small window (compaction comes early), automatic compaction
/// at the trigger (no work ahead, so each one is a single, visible event) and the hooks.
fn coder_spec(model: Arc<dyn ChatModel>, log: &Path, saw: &HooksSaw) -> AgentSpec {
    AgentSpec::new(CODER, model)
        .instructions("You are a coding agent.")
        .pin(ChatMessage::user(RULES))
        .session(log)
        .max_tokens(64)
        .compaction(CompactionSettings {
            policy: Some(ContextPolicy {
                protected_recent: 2,
                ..ContextPolicy::for_window(6_000)
            }),
            work_ahead: WorkAhead::Off,
            hooks: saw.hooks(),
            ..CompactionSettings::default()
        })
}

fn shell_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    // Only a name already taken fails registration, and the registry is empty.
    let _ = tools.register(shell_tool(ShellConfig::default()));
    tools
}

/// Step 1: an `rm` approved, then one denied.
async fn approval(
    out: &mut dyn Write,
    team: &Team,
    endpoint: &ScriptedModel,
    workspace: &Path,
) -> anyhow::Result<()> {
    let mut events = team.subscribe();
    let (answer, asked) = tokio::join!(
        team.ask(OPS, "Remove the stale build log."),
        answer_next(team, &mut events, None),
    );
    let (id, tool, arguments) = asked?;
    writeln!(
        out,
        "approval: {OPS} asks to run {tool} {arguments} ({id}): approved with team.approve"
    )?;
    writeln!(
        out,
        "approval: the command ran (build.log gone: {}); {OPS} answered: {}",
        !workspace.join("build.log").exists(),
        answer?
    )?;

    let reason = "src holds the sources; delete nothing there";
    let (answer, asked) = tokio::join!(
        team.ask(OPS, "Free some disk space."),
        answer_next(team, &mut events, Some(reason)),
    );
    let (id, tool, arguments) = asked?;
    writeln!(
        out,
        "approval: {OPS} asks to run {tool} {arguments} ({id}): denied with team.deny"
    )?;
    let seen = endpoint
        .requests()
        .last()
        .and_then(|r| r.messages.iter().rev().find(|m| m.role == Role::Tool))
        .map(|m| m.text())
        .context("the model was sent the denied call's result")?;
    writeln!(
        out,
        "approval: the model saw as the call's result: {seen:?}; src still there: {}; \
         {OPS} answered: {}",
        workspace.join("src/main.rs").exists(),
        answer?
    )?;
    Ok(())
}

/// Wait for the next approval request and answer it: approve, or deny with `deny`'s reason.
/// Returns the request's id, tool and arguments.
async fn answer_next(
    team: &Team,
    events: &mut broadcast::Receiver<EventRecord>,
    deny: Option<&str>,
) -> anyhow::Result<(String, String, String)> {
    loop {
        let record = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .context("no approval request within 30 s")??;
        if let Event::ApprovalRequested {
            id,
            tool,
            arguments,
            ..
        } = record.event
        {
            match deny {
                None => team.approve(&id)?,
                Some(reason) => team.deny(&id, reason)?,
            }
            return Ok((id.to_string(), tool, arguments));
        }
    }
}

/// Step 2: a request that runs out of its token budget mid-turn.
async fn budget(out: &mut dyn Write, team: &Team, endpoint: &ScriptedModel) -> anyhow::Result<()> {
    let calls_before = endpoint.requests().len();
    let hit = match team.ask(AUDITOR, "What is in the workspace?").await {
        Err(AskError::Agent {
            error: AgentError::BudgetExceeded(hit),
            ..
        }) => hit,
        other => bail!("expected the auditor's budget to stop it, got {other:?}"),
    };
    writeln!(
        out,
        "budget: {AUDITOR}'s request ended with BudgetExceeded: spent {}; limit {}; scope {}",
        hit.spent, hit.limit, hit.scope
    )?;
    let stats = team.agent::<LlmAgent>(AUDITOR).context_stats().await?;
    let kept: usize = stats.by_role.iter().map(|share| share.messages).sum();
    writeln!(
        out,
        "budget: model calls made: {} (the one after the tool result never started); \
         messages kept: {kept}; /context says this request spent {}",
        endpoint.requests().len() - calls_before,
        stats.spend.request
    )?;
    Ok(())
}

/// Step 3: automatic compactions vetoed by the before hook, then a `/compact` that goes
/// ahead; the pinned rules come out byte-identical.
async fn pin_and_hooks(
    out: &mut dyn Write,
    team: &Team,
    log: &Path,
    saw: &HooksSaw,
) -> anyhow::Result<()> {
    // Grow the conversation until an automatic compaction is asked for (and vetoed).
    for part in 0..12 {
        team.ask(CODER, part_text(part)).await?;
        if !saw.before_views().is_empty() {
            break;
        }
    }
    let vetoed = saw.before_views();
    let Some(first) = vetoed.first() else {
        bail!("no automatic compaction was asked for");
    };
    writeln!(out, "hook: before {}", describe(&first.preview))?;

    writeln!(
        out,
        "hook: vetoed the automatic compaction at {} tokens: the conversation stays as it is",
        first.preview.tokens_before
    )?;
    let before = load(log)?.conversation;
    let rules = before
        .messages()
        .iter()
        .find(|m| m.pinned)
        .context("the rules are pinned")?
        .clone();
    let applied = team.agent::<LlmAgent>(CODER).compact(None).await?;
    let views = saw.before_views();
    let manual = views.last().context("the before hook saw the /compact")?;
    writeln!(
        out,
        "hook: before {}; preserve hint {TICKET:?}",
        describe(&manual.preview)
    )?;
    // Every compaction ends at the after hook, a vetoed one too: show the first vetoed one
    // and the `/compact`.
    let afters = saw.after_views();
    let shown = afters
        .iter()
        .find(|a| a.trigger == CompactTrigger::Automatic)
        .into_iter()
        .chain(afters.iter().rfind(|a| a.trigger == CompactTrigger::Manual));
    for after in shown {
        let receipt = after.receipt.as_ref().map_or("none".to_string(), |r| {
            format!(
                "{} cached tokens kept, {} re-billed, net saving {:.0}",
                r.cached_prefix_kept, r.rebilled_tokens, r.net_saving
            )
        });
        let notes: Vec<String> = after
            .report
            .hook_notes
            .iter()
            .map(|n| n.to_string())
            .collect();
        writeln!(
            out,
            "hook: after ({}): {} -> {} tokens, {} archived; receipt: {receipt}; notes: {}; {}",
            after.trigger,
            after.report.tokens_before,
            after.report.tokens_after,
            after.report.archived,
            if notes.is_empty() {
                // A preserve hint the result lacked would be a note.
                "none (every preserve hint is in the result)".to_string()
            } else {
                notes.join("; ")
            },
            after
                .summary
                .as_deref()
                .and_then(first_point)
                .map_or("no summary".to_string(), |point| format!(
                    "summary begins {point:?}"
                )),
        )?;
    }

    let fate = match manual.preview.messages.iter().find(|m| m.id == rules.id) {
        Some(planned) => match planned.fate {
            MessageFate::Protected(reason) => format!("protected ({reason})"),
            other => format!("{other:?}"),
        },
        None => "missing".to_string(),
    };
    writeln!(
        out,
        "pin: the before hook's preview shows the rules message ({}) as {fate}",
        rules.id
    )?;
    let after = load(log)?.conversation;
    let kept = after
        .get(rules.id)
        .context("the rules message is still in the conversation")?;
    let identical = kept.text().as_bytes() == rules.text().as_bytes() && kept.pinned;
    writeln!(
        out,
        "pin: the rules message ({}) after a compaction that archived {} messages: {} ({} bytes)",
        rules.id,
        applied.report.archived,
        if identical {
            "pinned and byte-identical"
        } else {
            "CHANGED"
        },
        kept.text().len()
    )?;
    Ok(())
}

/// Step 4: what the one limit over the three agents' calls did.
fn rate_limit(out: &mut dyn Write, limited: &RateLimitedModel) -> anyhow::Result<()> {
    let stats = limited.stats();
    writeln!(
        out,
        "rate limit: {OPS}, {AUDITOR} and {CODER} called one endpoint under one limit \
         ({REQUESTS_PER_MINUTE} requests a minute): {} requests counted together, the longest \
         wait for room {} ms, {} Retry-After holds",
        stats.requests,
        stats.longest_wait.as_millis(),
        stats.holds
    )?;
    Ok(())
}

/// What a before hook saw, in one line: the trigger, the tokens, how many messages each fate
/// would take, and the artifacts that would leave the conversation.
fn describe(preview: &CompactionPreview) -> String {
    let count = |wanted: fn(MessageFate) -> bool| {
        preview.messages.iter().filter(|m| wanted(m.fate)).count()
    };
    let artifacts = preview.artifacts.names();
    format!(
        "({}): {} messages, {} -> {} tokens (target {}); protected {}, summarized {}, masked {}, \
         truncated {}, kept {}; {} artifacts would go{}",
        preview.trigger,
        preview.messages.len(),
        preview.tokens_before,
        preview.tokens_after,
        preview.target_tokens,
        count(|f| matches!(f, MessageFate::Protected(_))),
        count(|f| f == MessageFate::Summarized),
        count(|f| f == MessageFate::Masked),
        count(|f| f == MessageFate::Truncated),
        count(|f| f == MessageFate::Kept),
        artifacts.len(),
        artifacts
            .first()
            .map_or(String::new(), |a| format!(" (first: {a})")),
    )
}

/// The first line of a summary's own text (past its `<summary>` tag and section headings),
/// cut at 60 characters.
fn first_point(summary: &str) -> Option<String> {
    let line = summary
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('<') && !l.starts_with('#'))?;
    Some(if line.chars().count() > 60 {
        format!("{}…", line.chars().take(60).collect::<String>())
    } else {
        line.to_string()
    })
}

/// One request of `coder`'s long session (about 500 tokens); the second names the ticket
/// (the first is the task, which no compaction touches anyway).
fn part_text(part: usize) -> String {
    let head = if part == 1 {
        format!("Also {TICKET}: make `parse_config` reject unknown keys.\n")
    } else {
        format!("Part {part} of the review.\n")
    };
    let body: String = (0..40)
        .map(|n| format!("part {part} line {n}: text the agent was given to read\n"))
        .collect();
    head + &body
}

/// What `coder`'s hooks saw, for printing once each compaction is over (a hook runs inside
/// the compaction, on the agent's side, so it records and the steps print).
#[derive(Clone, Default)]
struct HooksSaw {
    before: Arc<Mutex<Vec<BeforeCompaction>>>,
    after: Arc<Mutex<Vec<AfterCompaction>>>,
}

impl HooksSaw {
    /// The before hook vetoes automatic compactions and asks the others to keep the ticket;
    /// the after hook records.
    fn hooks(&self) -> CompactionHooks {
        let before = self.before.clone();
        let after = self.after.clone();
        CompactionHooks::new()
            .before(move |seen: BeforeCompaction| {
                let before = before.clone();
                async move {
                    let automatic = seen.preview.trigger == CompactTrigger::Automatic;
                    lock(&before).push(seen);
                    if automatic {
                        HookVerdict::veto("the user is reviewing the log")
                    } else {
                        HookVerdict::proceed().preserve(TICKET)
                    }
                }
            })
            .after(move |done: AfterCompaction| {
                let after = after.clone();
                async move { lock(&after).push(done) }
            })
    }

    fn before_views(&self) -> Vec<BeforeCompaction> {
        lock(&self.before).clone()
    }

    fn after_views(&self) -> Vec<AfterCompaction> {
        lock(&self.after).clone()
    }
}

/// A poisoned lock still holds whole records (a push cannot be half done).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
