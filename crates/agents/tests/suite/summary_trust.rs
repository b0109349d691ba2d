//! Summaries you can trust: a model's degenerate answer is replaced by the mechanical summary,
//! and the report's fallbacks say which check it failed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_agents::compression::CompressorModel;
use troupe_agents::compression::{COMPRESSION_AGENT, CompressionConfig};
use troupe_agents::compression::{CompactionRequest, CompressorJob, InProcess, ModelSummarizer};
use troupe_agents::{shared_counter, spawn_compression_agent};
use troupe_compaction::ContextPolicy;
use troupe_compaction::summary::{
    MechanicalSummarizer, Summarizer, SummaryPrompt, SummaryRejection, vet_summary,
};
use troupe_compaction::summary::{normalize_summary, render_message, segment_prompt};
use troupe_compaction::transcript::parse_transcript;
use troupe_models::ScriptedModel;
use troupe_protocol::CompactTrigger;
use troupe_protocol::FileLedger;
use troupe_protocol::{ChatMessage, ChatModel, Conversation, MessageKind, ToolCall, TraceContext};
use troupe_runtime::{Team, TeamConfig};

use super::support::compression::talkative_conversation;

/// A short bug-fixing session, as the summarizer sees it.
fn conversation() -> Conversation {
    let call = ToolCall::new("c1", "read_file", r#"{"path": "src/lexer.rs"}"#);
    let edit = ToolCall::new("c2", "edit_file", r#"{"path": "src/lexer.rs"}"#);
    Conversation::from_messages(vec![
        ChatMessage::user(
            "The tokenizer in src/lexer.rs panics on unterminated strings. Fix it without \
             allocating; keep the public API of Lexer::next_token.",
        ),
        ChatMessage::assistant_tool_calls(Some("I will read the lexer first.".into()), vec![call]),
        ChatMessage::tool_result(
            "c1",
            "fn next_token(&mut self) -> Token { match self.peek() { '\"' => self.quoted(), _ => self.word() } }",
        ),
        ChatMessage::assistant_tool_calls(
            Some(
                "The root cause is quoted() indexing past the end. I decided to return \
                 Token::Error instead of panicking."
                    .into(),
            ),
            vec![edit],
        ),
        ChatMessage::tool_result("c2", "ok"),
        ChatMessage::user(
            "Good. Now run cargo test and add a regression test for the unterminated string.",
        ),
    ])
}

fn render(conversation: &Conversation) -> String {
    let mut tools = std::collections::HashMap::new();
    let mut out = String::new();
    for m in conversation.messages() {
        for call in m.calls() {
            tools.insert(call.id.clone(), call.function.name.clone());
        }
        let tool = m
            .tool_call_id
            .as_ref()
            .and_then(|id| tools.get(id))
            .map(String::as_str);
        out.push_str(&render_message(m, tool));
    }
    out
}

fn prompt(max_output_tokens: usize) -> SummaryPrompt {
    segment_prompt(
        render(&conversation()).trim_end(),
        None,
        None,
        max_output_tokens,
    )
}

const GOOD: &str = "## Goal\n- Stop the tokenizer in src/lexer.rs from panicking on unterminated strings.\n\n## Constraints & Preferences\n- No allocation; keep the public API of Lexer::next_token.\n\n## Progress\n### Done\n- [x] Found the root cause: quoted() indexes past the end.\n- [x] Edited src/lexer.rs so quoted() returns Token::Error.\n### In Progress\n- [ ] Regression test for the unterminated string.\n### Blocked\n- (none)\n\n## Key Decisions\n- **Return Token::Error instead of panicking**: callers already handle error tokens.\n\n## Next Steps\n1. Add the regression test.\n2. Run cargo test.\n\n## Critical Context\n- Lexer::next_token dispatches to quoted() on a '\"'.";

/// Summarize `prompt` with a model that answers `answer`; the summary and the fallbacks.
async fn summarize_with(answer: &str, prompt: SummaryPrompt) -> (String, Vec<String>) {
    let model = Arc::new(ScriptedModel::new("weak", []).with_fallback(answer));
    let summarizer = ModelSummarizer::new(model);
    let summary = summarizer.summarize(prompt).await.unwrap();
    (summary, summarizer.take_fallbacks())
}

/// The answer was replaced by the mechanical summary, and the one fallback says `why`.
async fn assert_rejected(answer: &str, prompt: SummaryPrompt, why: &str) {
    let mechanical = MechanicalSummarizer::new()
        .summarize(prompt.clone())
        .await
        .unwrap();
    let (summary, fallbacks) = summarize_with(answer, prompt).await;
    assert_eq!(summary, mechanical, "the mechanical summary stands in");
    assert_eq!(fallbacks.len(), 1, "{fallbacks:?}");
    assert!(
        fallbacks[0].contains("`weak`") && fallbacks[0].contains(why),
        "expected `{why}` in {fallbacks:?}"
    );
}

#[tokio::test]
async fn a_good_summary_is_accepted_unchanged() {
    let (summary, fallbacks) = summarize_with(GOOD, prompt(400)).await;
    assert_eq!(summary, GOOD);
    assert!(fallbacks.is_empty(), "{fallbacks:?}");
}

#[tokio::test]
async fn a_looping_json_blob_is_rejected() {
    // What a small local model wrote for a real transcript: a tool call it imagined, until the
    // token limit.
    let blob = "{\n  \"name\": \"execute_bash\",\n  \"arguments\": {\"command\": \"ls -la /workspace\"}\n},\n"
        .repeat(3);
    assert_rejected(&blob, prompt(400), "its answer repeats a 3-line block").await;
    let one_line = "{\"name\": \"execute_bash\", \"arguments\": {\"command\": \"ls\"}}\n".repeat(8);
    assert_rejected(&one_line, prompt(400), "its answer repeats the line").await;
}

#[tokio::test]
async fn the_bare_skeleton_is_rejected() {
    let skeleton = "## Goal\n- (not provided)\n## Constraints & Preferences\n- (none)\n## Progress\n### Done\n- (not provided)\n### In Progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n- (not provided)\n## Next Steps\n- (not provided)\n## Critical Context\n- (not provided)";
    assert_rejected(
        skeleton,
        prompt(400),
        "no content beyond the section headings",
    )
    .await;
}

/// A skeleton whose last two sections have content: read whole, it fills two sections; read as
/// it streams, it is given up at the fifth heading, where no continuation could fill three.
#[tokio::test]
async fn a_skeleton_is_given_up_while_it_streams() {
    let late = "## Goal\n- (not provided)\n## Constraints & Preferences\n- (none)\n## Progress\n### Done\n- (none)\n### In Progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n- (none)\n## Next Steps\n1. Add the regression test for src/lexer.rs.\n## Critical Context\n- quoted() indexes past the end in Lexer::next_token.";
    let whole = vet_summary(late, &prompt(400), shared_counter().as_ref());
    assert!(
        matches!(whole, Err(SummaryRejection::ThinSections { filled: 2, .. })),
        "{whole:?}"
    );
    assert_rejected(late, prompt(400), "no content beyond the section headings").await;
}

/// Once the model could not fill a summary, the compaction's later summaries are mechanical
/// without another call: on the embedded model each would be a long prefill for the same
/// skeleton.
#[tokio::test]
async fn a_model_that_could_not_fill_a_summary_is_not_asked_again_in_the_compaction() {
    let skeleton = "## Goal\n- (none)\n## Constraints & Preferences\n- (none)\n## Progress\n### Done\n- (none)\n## Key Decisions\n- (none)\n## Next Steps\n- (none)\n## Critical Context\n- (none)\n";
    let model = Arc::new(ScriptedModel::new("weak", []).with_fallback(skeleton));
    let summarizer = ModelSummarizer::new(model.clone());
    let mechanical = MechanicalSummarizer::new()
        .summarize(prompt(400))
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(summarizer.summarize(prompt(400)).await.unwrap(), mechanical);
    }
    assert_eq!(model.requests().len(), 1, "asked once");
    let fallbacks = summarizer.take_fallbacks();
    assert_eq!(fallbacks.len(), 3, "{fallbacks:?}");
    assert!(fallbacks[0].contains("no content beyond the section headings"));
    assert!(
        fallbacks[1..]
            .iter()
            .all(|f| f.contains("not asked: earlier in this compaction")),
        "{fallbacks:?}"
    );
    // A model whose answer merely ran over its budget is asked again.
    let long = Arc::new(ScriptedModel::new("verbose", []).with_fallback(GOOD));
    let summarizer = ModelSummarizer::new(long.clone());
    summarizer.summarize(prompt(80)).await.unwrap();
    summarizer.summarize(prompt(80)).await.unwrap();
    assert_eq!(long.requests().len(), 2);
}

/// A small model (a window of at most 16k tokens) is sent the segment cut down to a quarter of
/// its window, the long tool output to its head and tail; the mechanical summary, when it stands
/// in, reads all of it. A model with a large window gets the whole segment.
#[tokio::test]
async fn a_small_models_request_carries_the_segment_cut_to_a_quarter_of_its_window() {
    let log: String = (0..600)
        .map(|i| format!("test lexer::case_{i} ... ok\n"))
        .collect();
    let material = format!(
        "{}[m7 tool bash]\n{log}test lexer::unterminated ... FAILED\n",
        render(&conversation())
    );
    let prompt = segment_prompt(material.trim_end(), None, None, 400);
    let counter = shared_counter();
    assert!(counter.count(&prompt.user) > 4_000);
    let small = Arc::new(
        ScriptedModel::new("small", [])
            .with_context_window(8_192)
            .with_fallback(GOOD),
    );
    assert_eq!(
        ModelSummarizer::new(small.clone())
            .summarize(prompt.clone())
            .await
            .unwrap(),
        GOOD
    );
    let sent = small.requests()[0].messages[1].text();
    assert!(
        counter.count(&sent) <= 8_192 / 4 + 200,
        "{}",
        counter.count(&sent)
    );
    for kept in [
        "The tokenizer in src/lexer.rs panics",
        "test lexer::case_0 ... ok",
        "test lexer::unterminated ... FAILED",
        "Write the note now.",
    ] {
        assert!(sent.contains(kept), "{kept:?} missing");
    }
    assert!(!sent.contains("test lexer::case_300 ... ok"));
    let large = Arc::new(ScriptedModel::new("large", []).with_fallback(GOOD));
    ModelSummarizer::new(large.clone())
        .summarize(prompt.clone())
        .await
        .unwrap();
    assert_eq!(large.requests()[0].messages[1].text(), prompt.user);
}

#[tokio::test]
async fn an_echo_of_the_prompt_is_rejected() {
    let transcript = format!("{GOOD}\n\n<conversation>\n{}", render(&conversation()));
    assert_rejected(&transcript, prompt(400), "echoes the prompt").await;
    let instructions = "## Goal\nWhat the user wants to achieve. Several items if the work covers several tasks.\n\n## Constraints & Preferences\n- Requirements, limits and preferences the user stated, or \"(none)\".\n\n## Progress\n### Done\n- [x] Finished work, with the files and functions involved.\n### In Progress\n- [ ] Work that was under way when the excerpt ends.\n### Blocked\n- Problems that stop progress, or \"(none)\".\n\n## Key Decisions\n- **Decision**: why it was made. Or \"(none)\".\n\n## Next Steps\n1. The next concrete action.\n2. The actions after it, in order.\n\n## Critical Context\n- Exact error messages, commands, values, names and snippets the work depends on, or \"(none)\".";
    assert_rejected(instructions, prompt(400), "echoes the instructions").await;
}

#[tokio::test]
async fn an_over_long_answer_is_rejected() {
    // The model ignored max_tokens: the answer takes far more than the room it was given.
    assert_rejected(GOOD, prompt(80), "over its budget of 80").await;
}

#[tokio::test]
async fn sections_with_content_not_from_the_transcript_are_rejected() {
    let invented = "## Goal\n- Deploy the Kubernetes cluster on AWS with Terraform.\n## Constraints & Preferences\n- Budget approval from finance department.\n## Progress\n### Done\n- [x] Provisioned networking modules and security groups.\n### In Progress\n- [ ] Helm charts for monitoring dashboards.\n### Blocked\n- (none)\n## Key Decisions\n- **Managed Postgres**: cheaper maintenance.\n## Next Steps\n1. Configure autoscaling policies.\n## Critical Context\n- Region eu-west-1.";
    assert_rejected(invented, prompt(400), "not taken from the transcript").await;
}

#[tokio::test]
async fn json_where_prose_belongs_is_rejected() {
    let json = "```json\n{\n  \"goal\": \"stop the tokenizer panic\",\n  \"files\": [\"src/lexer.rs\"],\n  \"done\": [\"quoted() returns Token::Error\"],\n  \"next\": \"run cargo test\"\n}\n```";
    assert_rejected(json, prompt(400), "mostly JSON or code").await;
}

/// The user's report: compaction through the compression agent accepted a looping JSON blob
/// as the summary, and the report said `fallbacks: []`.
#[tokio::test]
async fn the_compression_agent_reports_why_a_looping_answer_was_replaced() {
    let blob = "{\"name\": \"execute_bash\", \"arguments\": {\"command\": \"ls\"}}\n".repeat(40);
    let weak: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new("weak", []).with_fallback(blob));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(weak);
    spawn_compression_agent(&team, config).await.unwrap();
    let job = CompactionRequest {
        agent: "coder".into(),
        conversation: talkative_conversation(),
        ledger: FileLedger::new(),
        policy: ContextPolicy {
            tool_output_limit_tokens: 100_000,
            ..ContextPolicy::for_window(4_000)
        },
        trigger: CompactTrigger::Manual,
        focus: None,
        lead: Default::default(),
        tokens: None,
        in_process: InProcess::default(),
    };
    let compaction = team
        .directory()
        .ask_job(
            COMPRESSION_AGENT,
            |reply| CompressorJob::Compact(Box::new(job), reply),
            TraceContext::new_root(),
            Duration::from_secs(60),
        )
        .await
        .unwrap()
        .unwrap();
    let summary = compaction
        .messages
        .iter()
        .find(|m| m.kind == MessageKind::Summary)
        .expect("tier 3 wrote a summary")
        .text();
    assert!(!summary.contains("execute_bash"), "{summary}");
    assert!(
        compaction
            .report
            .fallbacks
            .iter()
            .any(|f| f.contains("`weak`") && f.contains("its answer repeats the line")),
        "{:?}",
        compaction.report.fallbacks
    );
    team.shutdown().await;
}

/// The shared corpus directory, if present.
fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("corpus not found at {}; skipping", dir.display());
        None
    }
}

/// How far over its budget (by tiktoken) the mechanical summary may go; see the test below.
const MECHANICAL_OVERSHOOT: f64 = 1.15;

/// The mechanical summary stands in for rejected answers, so it must pass the same checks. On
/// every corpus transcript, cut into segments of two sizes and summarized the way compaction
/// does it (the first segment, then update prompts that carry the previous summary), at the
/// default summary budget and a small one.
#[tokio::test]
async fn the_mechanical_summary_of_real_transcripts_passes_the_checks() {
    let Some(dir) = corpus_dir() else { return };
    let counter = shared_counter();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty());
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in paths {
        let json = std::fs::read_to_string(&path).unwrap();
        let conversation = Conversation::from_messages(parse_transcript(&json).unwrap().messages);
        let rendered = render(&conversation);
        for size in [8_000, 40_000] {
            // Segments of about `size` characters, cut at message headers.
            let mut chunk = String::new();
            let mut chunks = Vec::new();
            for line in rendered.split_inclusive('\n') {
                if line.starts_with("[m") && chunk.len() >= size {
                    chunks.push(std::mem::take(&mut chunk));
                }
                chunk.push_str(line);
            }
            chunks.push(chunk);
            for budget in [2_000, 400] {
                let mut previous: Option<String> = None;
                for (i, chunk) in chunks.iter().enumerate().take(12) {
                    let prompt =
                        segment_prompt(chunk.trim_end(), previous.as_deref(), None, budget);
                    let summary = MechanicalSummarizer::new()
                        .summarize(prompt.clone())
                        .await
                        .unwrap();
                    checked += 1;
                    match vet_summary(&summary, &prompt, counter.as_ref()) {
                        Ok(()) => {}
                        // Known gap: the mechanical summarizer sizes its answer at 4 characters
                        // a token, and tiktoken counts a few percent more on code-heavy text.
                        // Tolerated here up to MECHANICAL_OVERSHOOT, not in the check itself.
                        Err(SummaryRejection::OverBudget { tokens, budget })
                            if tokens as f64 <= budget as f64 * MECHANICAL_OVERSHOOT =>
                        {
                            println!(
                                "{} segment {i}: mechanical summary takes {tokens} tokens for a budget of {budget}",
                                path.display()
                            );
                        }
                        Err(why) => failures.push(format!(
                            "{} segment {i} of ~{size} chars, budget {budget}: {why}\n{summary}",
                            path.file_name().unwrap().to_string_lossy()
                        )),
                    }
                    previous = normalize_summary(&summary);
                }
            }
        }
    }
    assert!(checked > 0);
    assert!(
        failures.is_empty(),
        "{} of {checked} mechanical summaries failed:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
}
