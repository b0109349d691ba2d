//! The compression agent on the real local model, over a real corpus transcript.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe_agents::compression::CompressorModel;
use troupe_agents::compression::{COMPRESSION_AGENT, CompressionConfig};
use troupe_agents::compression::{CompactionRequest, CompressorJob, InProcess};
use troupe_agents::{shared_counter, spawn_compression_agent};
use troupe_compaction::invariants::validate;
use troupe_compaction::transcript::{ledger_from_transcript, parse_transcript};
use troupe_compaction::{Compaction, CompactionError, ContextPolicy};
use troupe_protocol::CompactTrigger;
use troupe_protocol::{ChatModel, Conversation, TraceContext};
use troupe_runtime::{Team, TeamConfig};

use super::support::local::model;

#[tokio::test]
async fn the_local_model_compacts_a_corpus_transcript_at_16k() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/pi-large-session.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("skipping: {} is absent", path.display());
        return;
    };
    let transcript = parse_transcript(&text).unwrap();
    // The first messages up to about 15.5k tokens: above a 16k window's trigger (12.8k), below
    // the window. A 16k window, not 32k: the same road (the four tools, the model's summaries,
    // the target), half the prefill (36 s of the agents suite on one thread was this test).
    let counter = shared_counter();
    let mut total = 0;
    let messages: Vec<_> = transcript
        .messages
        .into_iter()
        .take_while(|message| {
            total += counter.count_message(message);
            total <= 15_500
        })
        .collect();
    let conversation = Conversation::from_messages(messages);
    let ledger = ledger_from_transcript(conversation.messages());
    let policy = ContextPolicy {
        summary_max_tokens: 300,
        ..ContextPolicy::for_window(16_000)
    };

    let model: Arc<dyn ChatModel> = Arc::new(model().await.clone());
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let mut config = CompressionConfig::new(shared_counter());
    config.model = CompressorModel::Fixed(model);
    config.max_iterations = 3;
    spawn_compression_agent(&team, config).await.unwrap();
    let job = CompactionRequest {
        agent: "pi".into(),
        conversation: conversation.clone(),
        ledger,
        policy: policy.clone(),
        trigger: CompactTrigger::Manual,
        focus: None,
        lead: Default::default(),
        tokens: None,
        in_process: InProcess::default(),
    };
    let compaction: Result<Compaction, CompactionError> = team
        .directory()
        .ask_job(
            COMPRESSION_AGENT,
            |reply| CompressorJob::Compact(Box::new(job), reply),
            TraceContext::new_root(),
            Duration::from_secs(600),
        )
        .await
        .unwrap();
    let compaction = compaction.unwrap();
    assert!(
        compaction.report.tokens_before > policy.trigger_tokens(),
        "{:?}",
        compaction.report
    );
    assert!(compaction.report.reached, "{:?}", compaction.report);
    validate(
        &conversation.to_messages(),
        &compaction.messages,
        &compaction.archive,
        &policy,
        shared_counter().as_ref(),
    )
    .unwrap();
    let restored = troupe_compaction::expand(&compaction.messages, &compaction.archive).unwrap();
    assert_eq!(restored, conversation.to_messages());
    println!(
        "pi-large ({} messages) at 16k with the local model: {} → {} tokens, {} summarizer calls",
        conversation.len(),
        compaction.report.tokens_before,
        compaction.report.tokens_after,
        compaction.report.summarizer.calls
    );
    team.shutdown().await;
}
