//! Transcripts keep what troupe does not understand, through the file layer and through
//! `troupe compact` + `troupe expand`: unknown keys on messages, tool calls and their `function`,
//! `tool_calls: null`, numbers `serde_json::Value` cannot hold, the `developer` role, a BOM.

use std::path::Path;

use troupe_cli::transcript_file::TranscriptFile;

use super::support::binary::ok;

const BOM: &str = "\u{feff}";

/// One round: an assistant tool call carrying every kind of unknown field, and its result.
fn round(i: usize, result: &str) -> String {
    format!(
        r#"    {{
      "role": "assistant",
      "content": null,
      "tool_calls": [
        {{
          "id": "c{i}",
          "type": "function",
          "function": {{
            "name": "read",
            "arguments": "{{\"path\":\"src/file{i}.rs\"}}",
            "strict": true
          }},
          "extra_content": {{
            "google": {{
              "thought_signature": "sig-{i}"
            }}
          }}
        }}
      ],
      "reasoning_content": "I should read file {i}.",
      "model": "gemini-2.5-pro",
      "usage": {{
        "huge": 123456789012345678901234567890,
        "past_u64": 18446744073709551616,
        "below_i64": -9223372036854775809,
        "one": 1.0,
        "trailing_zero": 1.50,
        "too_big": 1e400,
        "empty": {{}},
        "list": []
      }}
    }},
    {{
      "role": "tool",
      "tool_call_id": "c{i}",
      "content": "{result}",
      "tool_calls": null
    }},
"#
    )
}

/// A pretty-printed transcript (two-space indent, serde_json's layout) with `rounds` tool
/// rounds whose results are `result_words` words long.
fn transcript(rounds: usize, result_words: usize) -> String {
    let result = (0..result_words)
        .map(|w| format!("word{w}"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut text = String::from(
        r#"{
  "source": "hand-written: fields troupe does not interpret",
  "messages": [
    {
      "role": "developer",
      "content": "You are terse.",
      "tool_calls": null
    },
    {
      "role": "user",
      "content": "Read the files and summarise them.",
      "tool_calls": null
    },
"#,
    );
    for i in 1..=rounds {
        text.push_str(&round(i, &result));
    }
    text.push_str(
        r#"    {
      "role": "assistant",
      "content": "Done.",
      "tool_calls": null,
      "model": "gemini-2.5-pro"
    }
  ]
}
"#,
    );
    text
}

#[track_caller]
fn assert_file_round_trips(text: &str) {
    let file = TranscriptFile::parse(Path::new("t.json"), text)
        .unwrap_or_else(|e| panic!("cannot read the transcript: {e}"));
    assert_eq!(file.to_text().unwrap(), text);
}

#[test]
fn a_transcript_file_with_unknown_fields_is_written_back_byte_for_byte() {
    assert_file_round_trips(&transcript(2, 5));
}

#[test]
fn a_single_line_transcript_with_unknown_fields_is_written_back_byte_for_byte() {
    assert_file_round_trips(concat!(
        r#"[{"role":"developer","content":"Be brief.","tool_calls":null},"#,
        r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"extra_content":{"google":{"thought_signature":"abc"}}}],"n":123456789012345678901234567890}]"#,
    ));
}

#[test]
fn a_byte_order_mark_is_skipped_on_reading_and_kept_on_writing() {
    let text = format!("{BOM}{}", transcript(1, 5));
    let file = TranscriptFile::parse(Path::new("t.json"), &text)
        .unwrap_or_else(|e| panic!("cannot read a transcript with a BOM: {e}"));
    assert_eq!(file.messages.len(), 5);
    assert_eq!(file.to_text().unwrap(), text);
    // A bare array behind a BOM is still recognised as one.
    let bare = format!("{BOM}[{{\"role\":\"user\",\"content\":\"hi\"}}]");
    let file = TranscriptFile::parse(Path::new("t.json"), &bare).unwrap();
    assert_eq!(file.to_text().unwrap(), bare);
}

/// `troupe compact --model none` then `troupe expand` gives back `text` byte-for-byte; the
/// compaction must really have replaced messages, so the originals come back from the archive.
#[track_caller]
fn assert_compact_expand_round_trips(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("t.json");
    let small = dir.path().join("t.small.json");
    let archive = dir.path().join("t.archive.jsonl");
    let restored = dir.path().join("t.restored.json");
    std::fs::write(&input, text).unwrap();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let report = ok(&[
        "compact",
        &path(&input),
        "--window",
        "8000",
        "--model",
        "none",
        "--out",
        &path(&small),
        "--archive",
        &path(&archive),
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let r = &report["report"];
    assert!(
        r["tokens_after"].as_u64() < r["tokens_before"].as_u64(),
        "nothing was compacted: {r}"
    );
    assert!(
        std::fs::read_to_string(&archive).unwrap().lines().count() > 1,
        "the archive holds no originals"
    );
    let out = ok(&[
        "expand",
        &path(&small),
        "--archive",
        &path(&archive),
        "--out",
        &path(&restored),
    ]);
    assert!(out.contains("identical to the original"), "{out}");
    assert_eq!(std::fs::read_to_string(&restored).unwrap(), text);
}

#[test]
fn compact_then_expand_gives_back_a_transcript_with_unknown_fields_byte_for_byte() {
    assert_compact_expand_round_trips(&transcript(6, 2500));
}

#[test]
fn compact_then_expand_gives_back_a_transcript_with_a_byte_order_mark() {
    assert_compact_expand_round_trips(&format!("{BOM}{}", transcript(6, 2500)));
}
