//! `troupe mcp serve`: troupe's compressor as an MCP server over stdio, with the tools
//! `compact_transcript`, `expand_transcript` and `count_tokens`.
//!
//! stdout carries the protocol, so nothing else is printed there; logs go to stderr.
//! Archives live in the server's memory, by id, for as long as it runs.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use troupe::agents::shared_counter;
use troupe::compaction::{Archive, expand};
use troupe::runtime::ChatMessage;
use troupe::runtime::sync::lock;
use troupe::tools::{ToolContext, ToolError, ToolRegistry};
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{CompactGoal, Compressor, compact_transcript};
use troupe_mcp::RegistryServer;

use crate::cli::McpServeArgs;
use crate::summarizer::compaction_model;

/// How long one tool call may take: a model summary of a long transcript takes minutes.
const CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Arguments of `compact_transcript`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompactArgs {
    /// The transcript's messages in the OpenAI chat format; give these or `path`.
    messages: Option<Vec<Value>>,
    /// A transcript file ({"messages": [...]} or a bare message array); give this or
    /// `messages`.
    path: Option<String>,
    /// The context window in tokens (at least 1024).
    window: usize,
    /// Target share of the window, strictly between 0 and 1 (default 0.4).
    target: Option<f64>,
    /// Recent user/assistant messages never touched (default 5).
    protected: Option<usize>,
    /// Focus for the summaries.
    instructions: Option<String>,
}

/// Arguments of `expand_transcript`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExpandArgs {
    /// The `archive_id` that `compact_transcript` returned.
    archive_id: String,
    /// The compacted messages; default: the ones `compact_transcript` returned.
    messages: Option<Vec<Value>>,
}

/// Arguments of `count_tokens`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CountArgs {
    /// Messages in the OpenAI chat format (counted with per-message overhead); or `text`.
    messages: Option<Vec<Value>>,
    /// Plain text; or `messages`.
    text: Option<String>,
}

/// One compaction's archive and what it produced, kept for `expand_transcript`.
struct Stored {
    ids: Vec<troupe::runtime::MessageId>,
    compacted: Vec<ChatMessage>,
    archive: Archive,
}

/// The archives of this server's compactions, by id.
#[derive(Default)]
struct Archives {
    next: u64,
    by_id: HashMap<String, Stored>,
}

pub async fn serve(args: McpServeArgs) -> anyhow::Result<()> {
    let compressor =
        Arc::new(Compressor::start(compaction_model(args.model).await?, shared_counter()).await?);
    let archives = Arc::new(Mutex::new(Archives::default()));
    let mut tools = ToolRegistry::new();
    {
        let compressor = compressor.clone();
        let archives = archives.clone();
        tools.register_fn(
            "compact_transcript",
            "Compact a conversation to a target share of a context window with troupe's \
             compressor. Returns the compacted messages, the compaction report and an \
             archive_id that expand_transcript turns back into the original messages.",
            move |args: CompactArgs| {
                let compressor = compressor.clone();
                let archives = archives.clone();
                async move { compact(&compressor, &archives, args).await }
            },
        )?;
    }
    {
        let archives = archives.clone();
        tools.register_fn(
            "expand_transcript",
            "Restore the original messages of a compacted transcript from its archive_id.",
            move |args: ExpandArgs| {
                let archives = archives.clone();
                async move { expand_archive(&archives, args) }
            },
        )?;
    }
    tools.register_fn(
        "count_tokens",
        "Count the tokens of messages (OpenAI chat format) or of plain text, as troupe's \
         budget does (o200k_base with per-message overhead).",
        |args: CountArgs| async move { count(args) },
    )?;
    tools.set_default_timeout(CALL_TIMEOUT);
    let root = std::env::current_dir()?;
    let server = RegistryServer::new(
        tools,
        ToolContext::new("mcp", root),
        "troupe",
        env!("CARGO_PKG_VERSION"),
    )
    .with_instructions(
        "troupe's context compressor: compact_transcript shrinks a conversation to a token \
             target and keeps the originals in an archive; expand_transcript restores them; \
             count_tokens measures.",
    );
    let served = server.serve_stdio().await;
    if let Ok(compressor) = Arc::try_unwrap(compressor) {
        compressor.shutdown().await;
    }
    Ok(served?)
}

/// Messages given inline, read as a transcript file would be (ids assigned in order).
fn parse_messages(messages: Vec<Value>) -> Result<(TranscriptFile, String), ToolError> {
    let text = json!({ "messages": messages }).to_string();
    let file = TranscriptFile::parse(Path::new("messages"), &text)
        .map_err(|e| ToolError::respond(e.to_string()))?;
    Ok((file, text))
}

fn messages_json(messages: &[ChatMessage]) -> Result<Value, ToolError> {
    serde_json::to_value(messages)
        .map_err(|e| ToolError::respond(format!("cannot serialize the messages: {e}")))
}

async fn compact(
    compressor: &Compressor,
    archives: &Mutex<Archives>,
    args: CompactArgs,
) -> Result<Value, ToolError> {
    let (input, text) = match (args.messages, args.path) {
        (Some(messages), None) => parse_messages(messages)?,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ToolError::respond(format!("cannot read {path}: {e}")))?;
            let file = TranscriptFile::parse(Path::new(&path), &text)
                .map_err(|e| ToolError::respond(e.to_string()))?;
            (file, text)
        }
        _ => {
            return Err(ToolError::respond(
                "give either `messages` or `path`, not both or neither",
            ));
        }
    };
    let goal = CompactGoal {
        window: args.window,
        target: args.target.unwrap_or(0.4),
        protected: args.protected.unwrap_or(5),
        instructions: args.instructions,
    };
    let compacted = compact_transcript(&input, &text, &goal, compressor)
        .await
        .map_err(|e| ToolError::respond(e.to_string()))?;
    let messages = messages_json(&compacted.file.messages)?;
    let report = serde_json::to_value(&compacted.report)
        .map_err(|e| ToolError::respond(format!("cannot serialize the report: {e}")))?;
    let mut archives = lock(archives);
    archives.next += 1;
    let id = format!("archive-{}", archives.next);
    archives.by_id.insert(
        id.clone(),
        Stored {
            ids: compacted.header.ids.clone(),
            compacted: compacted.file.messages,
            archive: compacted.archive,
        },
    );
    Ok(json!({ "archive_id": id, "messages": messages, "report": report }))
}

fn expand_archive(archives: &Mutex<Archives>, args: ExpandArgs) -> Result<Value, ToolError> {
    let archives = lock(archives);
    let Some(stored) = archives.by_id.get(&args.archive_id) else {
        let known: Vec<&str> = archives.by_id.keys().map(String::as_str).collect();
        return Err(ToolError::respond(format!(
            "no archive `{}` (this server holds: {})",
            args.archive_id,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    let messages = match args.messages {
        None => stored.compacted.clone(),
        Some(messages) => {
            let (file, _) = parse_messages(messages)?;
            if file.messages.len() != stored.ids.len() {
                return Err(ToolError::respond(format!(
                    "{} messages given, but archive `{}` was written for {}; pass the compacted \
                     messages unchanged, or none",
                    file.messages.len(),
                    args.archive_id,
                    stored.ids.len()
                )));
            }
            file.messages
                .into_iter()
                .zip(&stored.ids)
                .map(|(m, id)| ChatMessage { id: *id, ..m })
                .collect()
        }
    };
    let restored = expand(&messages, &stored.archive).map_err(|e| {
        ToolError::respond(format!(
            "{e}: the messages do not belong to archive `{}`",
            args.archive_id
        ))
    })?;
    Ok(json!({ "messages": messages_json(&restored)? }))
}

fn count(args: CountArgs) -> Result<Value, ToolError> {
    let counter = shared_counter();
    let tokens = match (args.messages, args.text) {
        (Some(messages), None) => counter.count_messages(&parse_messages(messages)?.0.messages),
        (None, Some(text)) => counter.count(&text),
        _ => {
            return Err(ToolError::respond(
                "give either `messages` or `text`, not both or neither",
            ));
        }
    };
    Ok(json!({ "tokens": tokens, "tokenizer": counter.name() }))
}
