//! Messages keep what troupe does not understand: unknown keys (on messages, tool calls and their
//! `function`), `tool_calls: null`, numbers `serde_json::Value` cannot hold, the `developer` role.
//! Each case is read and written back as text and must come out byte-for-byte.

use troupe_protocol::{ChatMessage, Conversation, StoredMessage};

/// Parse `raw` as one message and write it back compactly.
#[track_caller]
fn round_trip(raw: &str) -> String {
    let message: ChatMessage =
        serde_json::from_str(raw).unwrap_or_else(|e| panic!("could not read {raw}: {e}"));
    serde_json::to_string(&message).unwrap()
}

#[track_caller]
fn assert_round_trips(raw: &str) {
    assert_eq!(round_trip(raw), raw);
}

#[test]
fn unknown_keys_on_tool_calls_and_their_functions_are_kept() {
    assert_round_trips(
        r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"extra_content":{"google":{"thought_signature":"abc"}}}]}"#,
    );
    assert_round_trips(
        r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}","strict":true,"index":0}}]}"#,
    );
}

#[test]
fn unknown_top_level_keys_keep_their_values_and_order() {
    assert_round_trips(
        r#"{"role":"assistant","content":"hi","reasoning_content":"think","model":"gemini-2.5-pro","provider_specific":{"z":1,"a":[true,null]}}"#,
    );
}

#[test]
fn tool_calls_null_stays_null_and_absent_stays_absent() {
    assert_round_trips(r#"{"role":"user","content":"hi","tool_calls":null}"#);
    assert_round_trips(r#"{"role":"user","content":"hi"}"#);
    assert_round_trips(r#"{"role":"assistant","content":"done","tool_calls":[]}"#);
}

#[test]
fn numbers_in_unknown_fields_keep_their_exact_text() {
    assert_round_trips(
        r#"{"role":"assistant","content":"x","usage":{"huge":123456789012345678901234567890,"past_u64":18446744073709551616,"below_i64":-9223372036854775809,"one":1.0,"trailing_zero":1.50,"too_big_for_f64":1e400,"exp":2E-5,"neg_zero":-0,"plain":42,"list":[1.0,10000000000000000000000]}}"#,
    );
    assert_round_trips(
        r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}","seed":123456789012345678901234567890},"extra_content":{"n":18446744073709551616}}]}"#,
    );
}

#[test]
fn the_developer_role_is_accepted_and_written_back() {
    assert_round_trips(r#"{"role":"developer","content":"Answer briefly."}"#);
}

#[test]
fn stored_forms_keep_the_unknowns_too() {
    // The archive and the conversation's serde form carry messages inside other structs.
    let raw = [
        r#"{"role":"developer","content":"Answer briefly.","tool_calls":null}"#,
        r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"extra_content":{"google":{"thought_signature":"abc"}}}],"seed":123456789012345678901234567890,"t":1e400}"#,
    ];
    let messages: Vec<ChatMessage> = raw
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    let conversation = Conversation::from_messages(messages);
    let text = serde_json::to_string(&conversation).unwrap();
    let restored: Conversation = serde_json::from_str(&text).unwrap();
    assert_eq!(restored, conversation);
    for (message, raw) in restored.messages().iter().zip(raw) {
        assert_eq!(serde_json::to_string(message).unwrap(), raw);
        let stored = serde_json::to_string(&StoredMessage::from(&**message)).unwrap();
        let back: StoredMessage = serde_json::from_str(&stored).unwrap();
        assert_eq!(serde_json::to_string(&back.message).unwrap(), raw);
    }
}

#[test]
fn bad_messages_are_refused_with_the_reason() {
    let err = serde_json::from_str::<ChatMessage>(r#"{"content":"hi"}"#).unwrap_err();
    assert!(err.to_string().contains("missing field `role`"), "{err}");
    let err =
        serde_json::from_str::<ChatMessage>(r#"{"role":"wizard","content":"hi"}"#).unwrap_err();
    assert!(err.to_string().contains("wizard"), "{err}");
    let err = serde_json::from_str::<ChatMessage>(
        r#"{"role":"assistant","tool_calls":[{"id":"c1","type":"function"}]}"#,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("missing field `function`"),
        "{err}"
    );
    let err = serde_json::from_str::<ChatMessage>(r#"{"role":"user","role":"user"}"#).unwrap_err();
    assert!(err.to_string().contains("duplicate field `role`"), "{err}");
}
