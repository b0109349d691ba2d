//! Every transcript of the shared corpus survives parse → serialize unchanged.

use std::path::PathBuf;

use serde_json::Value;
use troupe_protocol::{ChatMessage, Conversation};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
}

#[test]
fn every_corpus_transcript_round_trips_without_change() {
    let dir = corpus_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("skipping: corpus folder {} is absent", dir.display());
        return;
    };
    let mut checked = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let original: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let raw = original["messages"].clone();
        let messages: Vec<ChatMessage> = serde_json::from_value(raw.clone()).unwrap();
        assert!(!messages.is_empty(), "{}", path.display());
        // Through a Conversation (ids assigned) and back out.
        let conversation = Conversation::from_messages(messages);
        let back = serde_json::to_value(conversation.messages()).unwrap();
        assert_eq!(back, raw, "{} changed in a round trip", path.display());
        // And through the stored form with ids and kinds.
        let stored = serde_json::to_string(&conversation).unwrap();
        let restored: Conversation = serde_json::from_str(&stored).unwrap();
        assert_eq!(restored, conversation);
        checked += 1;
    }
    assert!(checked > 0, "no transcripts found in {}", dir.display());
}
