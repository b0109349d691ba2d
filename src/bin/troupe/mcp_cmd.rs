//! `troupe mcp serve`: troupe's compressor as an MCP server over stdio, with the tools
//! `compact_transcript`, `expand_transcript` and `count_tokens`.
//!
//! stdout carries the protocol, so nothing else is printed there; logs go to stderr.
//! Archives live in the server's memory, by id, within a bound ([`archives`]). `path` reads only
//! regular files beneath the root ([`transcript_path`]). A result is never cut: one over
//! [`MAX_RESULT_BYTES`] is an error saying so.

mod archives;
mod transcript_path;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use troupe::agents::shared_counter;
use troupe::mcp::RegistryServer;
use troupe::protocol::ChatMessage;
use troupe::protocol::sync::lock;
use troupe::tools::{ToolContext, ToolError, ToolRegistry};
use troupe_cli::transcript_file::TranscriptFile;
use troupe_cli::transcript_ops::{
    ArchiveHeader, Compressor, TranscriptOpError, compact_transcript, messages_sha256,
    restore_messages, transcript_policy,
};

use crate::cli::McpServeArgs;
use crate::summarizer::compaction_model;
use archives::{Archives, Stored};
use transcript_path::TranscriptRoot;

/// How long one tool call may take: a model summary of a long transcript takes minutes.
const CALL_TIMEOUT: Duration = Duration::from_secs(600);
/// The largest result a tool returns. A result is JSON, so cutting it (the registry's usual
/// 64 KiB cap) would hand the client invalid JSON as a success; past this it is an error
/// instead. Well under the 16 MiB a client's transport takes in one message, with room for
/// the escaping of the result's text inside that message.
const MAX_RESULT_BYTES: usize = 8 * 1024 * 1024;

/// Arguments of `compact_transcript`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompactArgs {
    /// The transcript's messages in the OpenAI chat format; give these or `path`.
    messages: Option<Vec<Value>>,
    /// A transcript file ({"messages": [...]} or a bare message array) beneath the server's
    /// root (its working directory, or --root); give this or `messages`.
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

pub async fn serve(args: McpServeArgs) -> anyhow::Result<()> {
    let root = match &args.root {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let root = TranscriptRoot::open(&root)?;
    let compressor =
        Arc::new(Compressor::start(compaction_model(args.model).await?, shared_counter()).await?);
    let archives = Arc::new(Mutex::new(Archives::default()));
    let mut tools = ToolRegistry::new();
    {
        let compressor = compressor.clone();
        let archives = archives.clone();
        let root = root.clone();
        tools.register_fn(
            "compact_transcript",
            "Compact a conversation to a target share of a context window with troupe's \
             compressor. Returns the compacted messages, the compaction report and an \
             archive_id that expand_transcript turns back into the original messages.",
            move |args: CompactArgs| {
                let compressor = compressor.clone();
                let archives = archives.clone();
                let root = root.clone();
                async move { compact(&compressor, &archives, &root, args).await }
            },
        )?;
    }
    {
        let archives = archives.clone();
        tools.register_fn(
            "expand_transcript",
            "Restore the original messages of a compacted transcript from its archive_id. The \
             messages must be the compacted ones exactly as compact_transcript returned them \
             (checked by sha256), or omitted.",
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
    // Each tool refuses a result over this itself, so the registry never cuts one.
    tools.set_output_cap(MAX_RESULT_BYTES);
    let server = RegistryServer::new(
        tools,
        ToolContext::new("mcp", root.path()),
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

/// `result`, unless it is larger than a tool may return (see [`MAX_RESULT_BYTES`]).
fn within_result_cap(result: Value, instead: &str) -> Result<Value, ToolError> {
    let bytes = result.to_string().len();
    if bytes > MAX_RESULT_BYTES {
        return Err(ToolError::respond(format!(
            "the result is too large: {bytes} bytes, more than the {MAX_RESULT_BYTES} bytes \
             troupe mcp serve returns in one result; {instead}"
        )));
    }
    Ok(result)
}

async fn compact(
    compressor: &Compressor,
    archives: &Mutex<Archives>,
    root: &Arc<TranscriptRoot>,
    args: CompactArgs,
) -> Result<Value, ToolError> {
    let (input, text) = match (args.messages, args.path) {
        (Some(messages), None) => parse_messages(messages)?,
        (None, Some(path)) => root.read(path).await?,
        _ => {
            return Err(ToolError::respond(
                "give either `messages` or `path`, not both or neither",
            ));
        }
    };
    let respond = |e: TranscriptOpError| ToolError::respond(e.to_string());
    let policy = transcript_policy(
        args.window,
        args.target.unwrap_or(0.4),
        args.protected.unwrap_or(5),
    )
    .map_err(respond)?;
    let compacted = compact_transcript(&input, &text, &policy, args.instructions, compressor)
        .await
        .map_err(respond)?;
    let messages = messages_json(&compacted.file.messages)?;
    let report = serde_json::to_value(&compacted.report)
        .map_err(|e| ToolError::respond(format!("cannot serialize the report: {e}")))?;
    // Measured with the longest id there can be, before the archive is kept for nothing.
    let longest_id = format!("archive-{}", u64::MAX);
    let result = within_result_cap(
        json!({ "archive_id": longest_id, "messages": messages, "report": report }),
        "compact to a smaller target, or use `troupe compact` on the file",
    )?;
    // The compacted messages as the client got them (JSON objects' keys in serde_json's order)
    // and as it will send them back: the checksum expand_transcript checks is of these.
    let returned = parse_messages(result["messages"].as_array().cloned().unwrap_or_default())?
        .0
        .messages;
    let header = ArchiveHeader {
        compacted_messages_sha256: Some(messages_sha256(&returned).map_err(op_error)?),
        ..compacted.header
    };
    let id = lock(archives).insert(Stored {
        header,
        bytes: text.len() + result["messages"].to_string().len(),
        compacted: returned,
        archive: compacted.archive,
    });
    let mut result = result;
    result["archive_id"] = Value::String(id);
    Ok(result)
}

fn op_error(e: TranscriptOpError) -> ToolError {
    match e {
        TranscriptOpError::Expand(what) => ToolError::respond(what),
        other => ToolError::respond(other.to_string()),
    }
}

fn expand_archive(archives: &Mutex<Archives>, args: ExpandArgs) -> Result<Value, ToolError> {
    let stored = lock(archives)
        .get(&args.archive_id)
        .map_err(ToolError::respond)?;
    let given;
    let messages = match args.messages {
        None => &stored.compacted,
        Some(messages) => {
            given = parse_messages(messages)?.0.messages;
            &given
        }
    };
    let restored = restore_messages(&stored.header, &stored.archive, messages).map_err(|e| {
        ToolError::respond(format!(
            "cannot expand archive `{}`: {}; pass the compacted messages exactly as \
             compact_transcript returned them, or none",
            args.archive_id,
            op_error(e)
        ))
    })?;
    within_result_cap(
        json!({ "messages": messages_json(&restored)? }),
        "use `troupe compact` and `troupe expand` on files for a transcript this large",
    )
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
