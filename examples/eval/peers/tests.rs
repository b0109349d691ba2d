//! The emulations checked without the corpus: what each strategy keeps, where it cuts, what it
//! masks, and a whole synthetic session lived by every peer.

use troupe::compaction::transcript::Envelope;
use troupe::protocol::{ChatMessage, MessageKind, Role, ToolCall};
use troupe::tokens::{TiktokenCounter, TokenCounter};
use troupe_cli::transcript_file::{Layout, TranscriptFile};

use super::bar;
use super::claude_code::ClaudeCode;
use super::codex::{Codex, newest_user_messages};
use super::live::{Env, Peer, live};
use super::openhands::OpenHandsMasking;
use super::pi::{Pi, cut_point};
use super::report::PeerRow;
use super::tally::{COST_MODELS, Outcome, RecallAt, paired};
use super::totals;
use super::troupe_road::{SummaryCall, TroupeVariant, live_troupe};

/// `turns` steps of an agent: a read of `src/mod_N.py` and its result of `lines` lines, a user
/// message every fifth step.
fn session(turns: usize, lines: usize) -> Vec<ChatMessage> {
    let mut out = vec![
        ChatMessage::system("You are a coding agent."),
        ChatMessage::user("Fix the failing test in src/app.py"),
    ];
    for t in 0..turns {
        if t > 0 && t % 5 == 0 {
            out.push(ChatMessage::user(format!(
                "Now look at module {t}, please."
            )));
        }
        let id = format!("call_{t}");
        out.push(ChatMessage::assistant_tool_calls(
            Some(format!("Reading module {t}.")),
            vec![ToolCall::new(
                id.clone(),
                "read",
                format!("{{\"path\": \"src/mod_{t}.py\"}}"),
            )],
        ));
        let body: Vec<String> = (0..lines)
            .map(|l| format!("def f_{t}_{l}(): raise Mod{t}Error({l})"))
            .collect();
        out.push(ChatMessage::tool_result(id, body.join("\n")));
    }
    out.push(ChatMessage::assistant("Done."));
    out
}

#[test]
fn codex_keeps_the_newest_user_messages_up_to_its_budget() {
    let counter = TiktokenCounter::default();
    let mut history = vec![ChatMessage::system("sys")];
    for i in 0..10 {
        history.push(ChatMessage::user(format!(
            "request {i}: {}",
            "word ".repeat(50)
        )));
        history.push(ChatMessage::assistant("ok"));
    }
    history.push(ChatMessage::user("an old summary").with_kind(MessageKind::Summary));
    let one = counter.count(&history[1].text());
    let kept = newest_user_messages(&history, 3 * one + one / 2, &counter);
    // Three whole messages, the newest, and half of the one before them.
    assert_eq!(kept.len(), 4, "{kept:?}");
    assert_eq!(kept[3].text(), history[19].text());
    assert_eq!(kept[1].text(), history[15].text());
    assert!(kept[0].text().len() < history[13].text().len());
    assert!(
        kept.iter()
            .all(|m| m.kind != MessageKind::Summary && m.role == Role::User)
    );
    let total: usize = kept.iter().map(|m| counter.count(&m.text())).sum();
    assert!(total <= 3 * one + one / 2 + 2, "{total}");
}

#[test]
fn pi_never_parts_a_call_from_its_results_and_keeps_at_least_its_budget() {
    let counter = TiktokenCounter::default();
    let messages = session(30, 20);
    let count = |m: &ChatMessage| counter.count_message(m);
    let total: usize = messages.iter().map(count).sum();
    for keep in (100..total).step_by(97) {
        let Some(cut) = cut_point(&messages, keep, count) else {
            continue;
        };
        assert_ne!(
            messages[cut].role,
            Role::Tool,
            "cut at a tool result (keep {keep})"
        );
        let kept: usize = messages[cut..].iter().map(count).sum();
        assert!(kept >= keep, "kept {kept} < {keep}");
        assert!(
            paired(&messages[cut..]),
            "the kept part is not paired (keep {keep})"
        );
    }
    assert_eq!(cut_point(&messages, total + 1, count), None);
}

#[test]
fn masking_replaces_only_results_older_than_ten_turns() {
    let history = session(15, 3);
    let masking = OpenHandsMasking::for_transcript(&history);
    let sent = masking.present(&history);
    assert_eq!(sent.len(), history.len());
    let results: Vec<(usize, bool)> = history
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Tool)
        .map(|(i, m)| (i, sent[i].text() != m.text()))
        .collect();
    // 15 turns plus the final answer: the results of the 6 oldest turns are masked.
    let masked: Vec<bool> = results.iter().map(|(_, masked)| *masked).collect();
    assert_eq!(masked, [vec![true; 6], vec![false; 9]].concat());
    for (i, m) in history.iter().enumerate() {
        if m.role != Role::Tool {
            assert_eq!(sent[i].text(), m.text(), "message {i} changed");
        }
    }
    assert!(
        sent[3]
            .text()
            .starts_with("Old environment output: (3 lines omitted)")
    );
    assert!(paired(&sent));
}

#[test]
fn pairing_check_finds_orphans_both_ways() {
    let history = session(3, 2);
    assert!(paired(&history));
    let mut orphan_result = history.clone();
    orphan_result.remove(2);
    assert!(!paired(&orphan_result));
    let mut unanswered = history.clone();
    unanswered.remove(3);
    assert!(!paired(&unanswered));
}

#[test]
fn claude_code_triggers_where_its_documentation_says_scaled_to_the_window() {
    assert_eq!(ClaudeCode::trigger_tokens(200_000), 167_000);
    assert_eq!(ClaudeCode::trigger_tokens(32_000), 26_720);
    assert_eq!(Codex::trigger_tokens(32_000), 28_800);
    assert_eq!(Pi::trigger_tokens(200_000), 183_616);
}

#[test]
fn every_peer_lives_a_long_session_within_the_window() {
    let counter = TiktokenCounter::default();
    let transcript = session(80, 30);
    let window = 8_000;
    let env = Env {
        window,
        counter: &counter,
        summary_tokens: 500,
    };
    let peers: Vec<(&str, Box<dyn Peer>)> = vec![
        ("claude-code", Box::<ClaudeCode>::default()),
        ("codex", Box::<Codex>::default()),
        ("pi", Box::<Pi>::default()),
        (
            "openhands-masking",
            Box::new(OpenHandsMasking::for_transcript(&transcript)),
        ),
    ];
    let raw = counter.count_messages(&transcript);
    assert!(raw > 4 * window, "the session must need compaction ({raw})");
    for (name, mut peer) in peers {
        let outcome = live(&transcript, peer.as_mut(), &env);
        assert!(outcome.compactions > 0, "{name} never compacted");
        assert!(outcome.invariants_ok, "{name} broke a tool pair");
        assert!(
            outcome.max_prompt_tokens <= window,
            "{name} sent {} tokens",
            outcome.max_prompt_tokens
        );
        // Every compaction here drops paths and error names the session saw.
        let recall = outcome.artifact_recall;
        assert!(recall.is_some_and(|r| r < 1.0), "{name}: recall {recall:?}");
        assert!(outcome.billed.iter().all(|b| *b > 0.0), "{name}");
        assert!(
            outcome.compaction_billed[0] > 0.0,
            "{name}: its summarizer calls cost nothing"
        );
    }
}

/// Claude Code's and Codex's summarizer call is the agent's last prompt plus an instruction, so
/// it is mostly read from the cache; pi's is a prompt of its own, so it is not.
#[test]
fn inline_summary_calls_ride_the_cache_and_separate_ones_do_not() {
    let counter = TiktokenCounter::default();
    let transcript = session(80, 30);
    let env = Env {
        window: 8_000,
        counter: &counter,
        summary_tokens: 500,
    };
    let per_compaction = |peer: &mut dyn Peer| {
        let o = live(&transcript, peer, &env);
        o.compaction_billed[0] / o.compactions as f64
    };
    let claude = per_compaction(&mut ClaudeCode::default());
    let pi = per_compaction(&mut Pi::default());
    // Both summarize most of a full window per call; Claude Code reads it at the cached rate.
    assert!(claude * 2.0 < pi, "claude-code {claude:.0} vs pi {pi:.0}");
}

fn row(strategy: &'static str, billed: [f64; 2], recall: Option<f64>) -> PeerRow {
    PeerRow {
        transcript: "t".into(),
        split: "dev",
        window: 32_000,
        strategy,
        outcome: Outcome {
            billed,
            compaction_billed: [0.0; 2],
            cache_hit: [0.9; 2],
            compactions: 1,
            agent_calls: 10,
            artifact_recall: recall,
            recall_at: RecallAt::Compactions,
            max_prompt_tokens: 1000,
            invariants_ok: true,
        },
    }
}

#[test]
fn the_bar_names_each_peer_cheaper_than_troupe_and_as_good_per_cost_model() {
    let rows = vec![
        row("troupe", [100.0, 100.0], Some(0.9)),
        // Cheaper under OpenAI only, as good.
        row("a", [90.0, 110.0], Some(0.9)),
        // Far cheaper, worse recall: no beat.
        row("b", [50.0, 50.0], Some(0.5)),
        // Nothing at risk counts as recalling everything.
        row("c", [99.0, 99.0], None),
        // troupe's own variants are not peers.
        row("troupe-x", [10.0, 10.0], Some(1.0)),
    ];
    let beats: Vec<(&str, &str)> = bar::beats(&rows, "troupe")
        .iter()
        .map(|b| (b.row.strategy, COST_MODELS[b.model]))
        .collect();
    assert_eq!(
        beats,
        [("a", "openai"), ("c", "openai"), ("c", "anthropic")]
    );
    let verdict = bar::verdict(&rows, "troupe");
    assert_eq!(verdict["ok"], false);
    assert_eq!(verdict["axes"]["b"]["cheaper"], 2);
    assert_eq!(verdict["axes"]["b"]["both"], 0);
    assert!(
        bar::verdict(&rows[..1], "troupe")["ok"]
            .as_bool()
            .unwrap_or(false)
    );
}

#[test]
fn a_peer_cheaper_in_total_fails_the_bar_whatever_its_rows() {
    let mut rows = vec![
        row("troupe", [100.0, 100.0], Some(0.9)),
        // Dearer on this transcript, worse recall: no beat here.
        row("a", [120.0, 90.0], Some(0.5)),
        row("troupe-x", [10.0, 10.0], Some(1.0)),
    ];
    let mut other = row("troupe", [100.0, 100.0], Some(0.9));
    other.transcript = "u".into();
    rows.push(other);
    // Cheaper under Anthropic on the second transcript, worse recall there too.
    let mut cheap = row("a", [90.0, 60.0], Some(0.5));
    cheap.transcript = "u".into();
    rows.push(cheap);
    assert!(bar::beats(&rows, "troupe").is_empty());
    let totals = totals::totals(&rows);
    let cheaper: Vec<(&str, &str)> = totals::cheaper_in_total(&totals, "troupe")
        .iter()
        .map(|(t, m)| (t.strategy, COST_MODELS[*m]))
        .collect();
    // a: 210 / 150 against troupe's 200 / 200; troupe's own variant is no peer.
    assert_eq!(cheaper, [("a", "anthropic")]);
    assert!(totals::table(&totals, "troupe").contains("| a | 210 (1.050) | 150 (0.750) |"));
}

/// troupe's road: the replay compacts the same way whatever the summary call is billed as, and
/// under OpenAI (no clock in it) the agent's calls cost the same in the observer's bill (the
/// inline road) as in `troupe replay --cost`'s meters (the separate one).
#[tokio::test]
async fn troupe_road_compacts_alike_under_both_billings_and_the_bills_agree() {
    let counter = TiktokenCounter::default();
    let input = TranscriptFile {
        envelope: Envelope::default(),
        messages: session(80, 30),
        layout: Layout::default(),
    };
    let road = |summary_call| TroupeVariant {
        target: None,
        trigger: None,
        cost_aware: None,
        summary_call,
    };
    let inline = live_troupe(&input, 8_000, road(SummaryCall::Inline), &counter)
        .await
        .expect("inline road");
    let separate = live_troupe(&input, 8_000, road(SummaryCall::Separate), &counter)
        .await
        .expect("separate road");
    assert!(inline.compactions > 0);
    assert!(inline.invariants_ok && separate.invariants_ok);
    assert!(
        inline.max_prompt_tokens <= 8_000,
        "{}",
        inline.max_prompt_tokens
    );
    assert_eq!(inline.compactions, separate.compactions);
    assert_eq!(inline.max_prompt_tokens, separate.max_prompt_tokens);
    assert_eq!(inline.artifact_recall, separate.artifact_recall);
    let agent = |o: &Outcome| o.billed[0] - o.compaction_billed[0];
    assert!(
        (agent(&inline) - agent(&separate)).abs() < 1e-6,
        "{} vs {}",
        agent(&inline),
        agent(&separate)
    );
}
