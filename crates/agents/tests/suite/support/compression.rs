//! Teams with a compression agent, and the conversations and policy the compression suites
//! compact.

use std::sync::Arc;

use troupe_agents::compression::{CompressionConfig, CompressorModel};
use troupe_agents::{shared_counter, spawn_compression_agent};
use troupe_compaction::ContextPolicy;
use troupe_protocol::{ChatMessage, ChatModel, Conversation};
use troupe_runtime::{Team, TeamConfig};

pub(crate) const SUMMARY: &str = "## Goal\nRead the files.\n## Constraints & Preferences\n- none\n## Progress\n### Done\n- read files\n### In Progress\n- none\n### Blocked\n- none\n## Key Decisions\n- none\n## Next Steps\n1. continue\n## Critical Context\n- none";

pub(crate) fn big(n: usize) -> String {
    (0..n)
        .map(|i| format!("line {i}: some file content with several words in it\n"))
        .collect()
}

pub(crate) fn policy() -> ContextPolicy {
    ContextPolicy {
        tool_output_limit_tokens: 100_000,
        ..ContextPolicy::for_window(4_000)
    }
}

pub(crate) async fn team_with_compressor(model: Option<Arc<dyn ChatModel>>) -> Team {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = model.map_or(CompressorModel::None, CompressorModel::Fixed);
    spawn_compression_agent(&team, config).await.unwrap();
    team
}

/// Long user/assistant exchanges and no tool output: only summaries (tier 3) can shrink it.
pub(crate) fn talkative_conversation() -> Conversation {
    let mut messages = vec![
        ChatMessage::system("You are a coder."),
        ChatMessage::user("Port the tokenizer to Rust; it must stay allocation-free."),
    ];
    for i in 0..12 {
        messages.push(ChatMessage::user(format!(
            "step {i}: {}",
            "please look at the tokenizer state machine again. ".repeat(12)
        )));
        messages.push(ChatMessage::assistant(format!(
            "step {i} done: {}",
            "I rewrote the branch for quoted strings and checked the tests. ".repeat(12)
        )));
    }
    Conversation::from_messages(messages)
}

/// A team whose compression agent uses the mechanical summary: no summarizer model, so tier 3
/// writes it and the scripts stay the agent's own.
pub(crate) async fn team() -> Team {
    team_with_compressor(None).await
}
