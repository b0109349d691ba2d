//! `troupe replay --cost` (#31): the session's input billed under an emulated prompt cache,
//! each compaction's receipt, and clear errors for a bad cost model or rate.

use super::support::binary::{fails, ok, s};

/// A transcript with a long system prompt (over the 1,024-token minimum a cache keeps) and
/// twelve reads: at an 8,000-token window it compacts.
fn transcript(dir: &std::path::Path) -> std::path::PathBuf {
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are a careful coder. ".repeat(300)}),
        serde_json::json!({"role": "user", "content": "Fix the parser bug in src/parse.rs."}),
    ];
    for i in 0..12 {
        let id = format!("call_{i}");
        messages.push(serde_json::json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "read", "arguments": format!("{{\"path\":\"src/f{i}.rs\"}}")}}]
        }));
        let body: String = (0..40)
            .map(|l| format!("line {l} of file {i}: some code here\n"))
            .collect();
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": body}));
    }
    messages.push(serde_json::json!({"role": "assistant", "content": "Fixed."}));
    let path = dir.join("session.json");
    std::fs::write(
        &path,
        serde_json::json!({ "messages": messages }).to_string(),
    )
    .unwrap();
    path
}

#[test]
fn replay_cost_bills_below_uncached_with_cache_hits_and_a_receipt_per_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let file = transcript(dir.path());
    for model in ["anthropic", "openai"] {
        let out = ok(&[
            "replay",
            s(&file),
            "--window",
            "8000",
            "--cost",
            model,
            "--json",
        ]);
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        let cost = &report["cost"];
        assert_eq!(cost["model"], model);
        let billed = cost["billed"].as_f64().unwrap();
        let uncached = cost["uncached"].as_f64().unwrap();
        assert!(billed > 0.0 && billed < uncached, "{cost}");
        assert!(cost["cache_hit"].as_f64().unwrap() > 0.0, "{cost}");
        // One agent call per assistant message after the first message.
        assert_eq!(cost["agent_calls"], 13, "{cost}");
        let rows = report["compactions"].as_array().unwrap();
        assert!(!rows.is_empty(), "the window is small enough to compact");
        let mut rebilled = 0;
        for row in rows {
            let receipt = &row["receipt"];
            assert!(receipt["net_saving"].is_number(), "{row}");
            rebilled += receipt["rebilled_tokens"].as_u64().unwrap();
        }
        assert_eq!(cost["rebilled_tokens"].as_u64(), Some(rebilled));
    }
    // The human form says the same.
    let text = ok(&[
        "replay",
        s(&file),
        "--window",
        "8000",
        "--cost",
        "anthropic",
    ]);
    assert!(text.contains("cost (anthropic"), "{text}");
    assert!(text.contains("net saving"), "{text}");
    // Rates override the model's.
    let out = ok(&[
        "replay",
        s(&file),
        "--window",
        "8000",
        "--cost",
        "openai",
        "--rates",
        "cached=0.5",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["cost"]["cached_rate"], 0.5);
    // Without --cost there is no cost section.
    let out = ok(&["replay", s(&file), "--window", "8000", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(report.get("cost").is_none());
}

#[test]
fn a_bad_cost_model_or_rate_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = transcript(dir.path());
    let err = fails(&["replay", s(&file), "--window", "8000", "--cost", "foo"]);
    assert!(
        err.contains("unknown cost model `foo` (known: openai, anthropic)"),
        "{err}"
    );
    let err = fails(&[
        "replay",
        s(&file),
        "--window",
        "8000",
        "--cost",
        "openai",
        "--rates",
        "cached=cheap",
    ]);
    assert!(err.contains("a rate is a non-negative number"), "{err}");
    let err = fails(&[
        "replay",
        s(&file),
        "--window",
        "8000",
        "--cost",
        "openai",
        "--rates",
        "speed=2",
    ]);
    assert!(err.contains("unknown rate `speed`"), "{err}");
    let err = fails(&[
        "replay",
        s(&file),
        "--window",
        "8000",
        "--rates",
        "cached=0.2",
    ]);
    assert!(err.contains("--cost"), "{err}");
}
