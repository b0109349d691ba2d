//! Shared helpers: fake summarizers, conversation builders, corpus access.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use troupe_compaction::artifacts::ArtifactLedger;
use troupe_compaction::summary::{Summarizer, SummarizerError, SummaryPrompt};
use troupe_protocol::{ChatMessage, Conversation, MessageKind, ToolCall};
use troupe_tokens::{CharEstimateCounter, TokenCounter};

/// A structured summary with all six sections, as a well-behaved model would write it.
pub const FIXED_SUMMARY: &str = "## Goal\n- Fix the bug the user reported\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n### Done\n- [x] Investigated the code\n### In Progress\n- [ ] Writing the fix\n### Blocked\n- (none)\n\n## Key Decisions\n- **Keep the API**: callers depend on it\n\n## Next Steps\n1. Run the tests\n\n## Critical Context\n- (none)";

/// Returns a fixed text; checks every request against its window with its own counter and
/// records every prompt.
pub struct FixedSummarizer {
    pub window: usize,
    pub text: String,
    pub counter: Box<dyn TokenCounter>,
    pub calls: AtomicUsize,
    pub largest_request: AtomicUsize,
    pub prompts: Mutex<Vec<SummaryPrompt>>,
}

impl FixedSummarizer {
    pub fn new(window: usize) -> Self {
        Self::with_counter(window, Box::new(CharEstimateCounter))
    }

    pub fn with_counter(window: usize, counter: Box<dyn TokenCounter>) -> Self {
        FixedSummarizer {
            window,
            text: FIXED_SUMMARY.to_string(),
            counter,
            calls: AtomicUsize::new(0),
            largest_request: AtomicUsize::new(0),
            prompts: Mutex::new(Vec::new()),
        }
    }

    pub fn prompts(&self) -> Vec<SummaryPrompt> {
        self.prompts.lock().unwrap().clone()
    }
}

#[async_trait]
impl Summarizer for FixedSummarizer {
    fn context_window(&self) -> usize {
        self.window
    }

    async fn summarize(&self, prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        let size = prompt.request_tokens(self.counter.as_ref());
        assert!(
            size <= self.window,
            "request of {size} tokens sent to a {}-token window",
            self.window
        );
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.largest_request.fetch_max(size, Ordering::SeqCst);
        let short = prompt.max_output_tokens < 100;
        self.prompts.lock().unwrap().push(prompt);
        // Per-message prompts get a short answer, as a model would give.
        Ok(if short {
            "Shortened.".to_string()
        } else {
            self.text.clone()
        })
    }
}

/// Always fails, like a provider that is down.
pub struct FailingSummarizer;

#[async_trait]
impl Summarizer for FailingSummarizer {
    fn context_window(&self) -> usize {
        100_000
    }

    async fn summarize(&self, _prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        Err(SummarizerError::Failed("connection refused".into()))
    }
}

/// Answers with whitespace only.
pub struct EmptySummarizer;

#[async_trait]
impl Summarizer for EmptySummarizer {
    fn context_window(&self) -> usize {
        100_000
    }

    async fn summarize(&self, _prompt: SummaryPrompt) -> Result<String, SummarizerError> {
        Ok("  \n".into())
    }
}

/// Run a future to completion on a fresh current-thread runtime.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

/// `n` lines of filler text.
pub fn lines(tag: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{tag} line {i} with some words in it\n"))
        .collect()
}

/// A coding session: system, task, then `turns` rounds of read → edit → bash, each with a
/// user follow-up, then a final exchange.
pub fn coding_session(turns: usize, output_lines: usize) -> Conversation {
    let mut c = Conversation::new();
    c.push(ChatMessage::system("You are a careful coding agent."));
    c.push(ChatMessage::user(
        "Fix the off-by-one in the parser. Do not change the public API.",
    ));
    for t in 0..turns {
        let read = format!("r{t}");
        let edit = format!("e{t}");
        let bash = format!("b{t}");
        c.push(ChatMessage::assistant_tool_calls(
            Some(format!("Reading module {t}.")),
            vec![ToolCall::new(
                &read,
                "read",
                format!(r#"{{"path":"src/mod{t}.rs"}}"#),
            )],
        ));
        c.push(ChatMessage::tool_result(
            &read,
            lines(&format!("mod{t}"), output_lines),
        ));
        c.push(ChatMessage::assistant_tool_calls(
            None,
            vec![
                ToolCall::new(
                    &edit,
                    "edit",
                    format!(r#"{{"path":"src/mod{t}.rs","oldText":"a","newText":"b"}}"#),
                ),
                ToolCall::new(&bash, "bash", r#"{"command":"cargo test"}"#),
            ],
        ));
        c.push(ChatMessage::tool_result(&edit, "Edited."));
        c.push(ChatMessage::tool_result(
            &bash,
            lines("test output", output_lines / 2),
        ));
        c.push(ChatMessage::user(format!(
            "Good, now look at module {}.",
            t + 1
        )));
    }
    c.push(ChatMessage::assistant(
        "I will continue with the next module.",
    ));
    c.push(ChatMessage::user("Thanks, go on."));
    c.push(ChatMessage::assistant("On it."));
    c
}

/// The shared corpus directory, if present.
/// The corpus's transcripts (`*.json`), sorted; `None` (and a note) when the corpus is absent.
pub fn corpus_files() -> Option<Vec<PathBuf>> {
    let dir = corpus_dir()?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no transcripts in {}", dir.display());
    Some(files)
}

pub fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!(
            "corpus not found at {}; skipping corpus tests",
            dir.display()
        );
        None
    }
}

/// Every text a model would see in `messages`: contents and tool-call arguments.
pub fn visible_text(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&m.text());
        out.push('\n');
        for call in m.calls() {
            out.push_str(&call.function.arguments);
            out.push('\n');
        }
    }
    out
}

/// The artifacts of the model's context (display-only messages are never sent) that its text
/// names as the ledger writes them.
pub fn artifacts(messages: &[ChatMessage]) -> BTreeSet<String> {
    let context: Vec<ChatMessage> = messages
        .iter()
        .filter(|m| m.kind != MessageKind::DisplayOnly)
        .cloned()
        .collect();
    let names: BTreeSet<String> = ArtifactLedger::from_messages(&context)
        .names()
        .into_iter()
        .collect();
    kept(&names, &context)
}

/// Of `artifacts`, those `messages` still name.
pub fn kept(artifacts: &BTreeSet<String>, messages: &[ChatMessage]) -> BTreeSet<String> {
    named_in(artifacts, &named_text(messages))
}

/// Of `names`, those `text` contains — `text.contains(name)` for each, in one pass over the text
/// (the corpus tests ask it of thousands of names in texts of megabytes).
fn named_in(names: &BTreeSet<String>, text: &str) -> BTreeSet<String> {
    // Every text contains the empty name, as `str::contains` says; the automaton needs none.
    let (empty, names): (Vec<&String>, Vec<&String>) = names.iter().partition(|n| n.is_empty());
    let Ok(search) = aho_corasick::AhoCorasick::new(&names) else {
        panic!("the names build an automaton");
    };
    search
        .find_overlapping_iter(text)
        .map(|found| names[found.pattern().as_usize()].clone())
        .chain(empty.into_iter().cloned())
        .collect()
}

/// Everything `messages` say, as this crate's check of "still named" reads it: contents and
/// the string values of tool-call arguments, whitespace collapsed.
fn named_text(messages: &[ChatMessage]) -> String {
    let mut all = String::new();
    for m in messages {
        all.push_str(&m.text());
        all.push('\n');
        for call in m.calls() {
            let value: serde_json::Value =
                serde_json::from_str(&call.function.arguments).unwrap_or_default();
            strings(&value, &mut all);
        }
    }
    all.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn strings(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}
