//! The first way a replayed request differs from the recorded one, in words short enough for
//! an error message.

use serde_json::Value;
use troupe_protocol::{ChatMessage, ToolDefinition};

use super::format::RecordedRequest;

/// The first way `got` differs from `expected`, in words; `None` when they match.
pub(super) fn first_difference(
    expected: &RecordedRequest,
    got: &RecordedRequest,
) -> Option<String> {
    for (i, (e, g)) in expected.messages.iter().zip(&got.messages).enumerate() {
        if let Some(d) = message_difference(e, g) {
            return Some(format!("messages[{i}] ({}) {d}", e.role));
        }
    }
    if expected.messages.len() != got.messages.len() {
        return Some(format!(
            "expected {} messages, got {}",
            expected.messages.len(),
            got.messages.len()
        ));
    }
    let names = |tools: &[ToolDefinition]| tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    if names(&expected.tools) != names(&got.tools) {
        return Some(format!(
            "tools differ: expected {:?}, got {:?}",
            names(&expected.tools),
            names(&got.tools)
        ));
    }
    for (e, g) in expected.tools.iter().zip(&got.tools) {
        if e != g {
            return Some(format!("tool `{}` definition differs", e.name));
        }
    }
    if expected.tool_choice != got.tool_choice {
        return Some(format!(
            "tool_choice differs: expected {:?}, got {:?}",
            expected.tool_choice, got.tool_choice
        ));
    }
    if expected.temperature != got.temperature {
        return Some(format!(
            "temperature differs: expected {:?}, got {:?}",
            expected.temperature, got.temperature
        ));
    }
    if expected.max_tokens != got.max_tokens {
        return Some(format!(
            "max_tokens differs: expected {:?}, got {:?}",
            expected.max_tokens, got.max_tokens
        ));
    }
    None
}

fn message_difference(expected: &ChatMessage, got: &ChatMessage) -> Option<String> {
    if expected.role != got.role {
        return Some(format!(
            "role differs: expected {}, got {}",
            expected.role, got.role
        ));
    }
    // Compare wire forms: that is what the model saw.
    let e = serde_json::to_value(expected).unwrap_or(Value::Null);
    let g = serde_json::to_value(got).unwrap_or(Value::Null);
    if e == g {
        return None;
    }
    if e.get("content") != g.get("content") {
        return Some(format!(
            "content differs: {}",
            text_difference(&expected.text(), &got.text())
        ));
    }
    for field in ["tool_calls", "tool_call_id"] {
        if e.get(field) != g.get(field) {
            return Some(format!(
                "{field} differs: expected {}, got {}",
                crate::shorten(&e.get(field).map(Value::to_string).unwrap_or_default(), 200),
                crate::shorten(&g.get(field).map(Value::to_string).unwrap_or_default(), 200),
            ));
        }
    }
    Some(format!(
        "differs: expected {}, got {}",
        crate::shorten(&e.to_string(), 200),
        crate::shorten(&g.to_string(), 200)
    ))
}

/// Both texts around their first differing character, so long messages give short errors.
fn text_difference(expected: &str, got: &str) -> String {
    let at = expected
        .char_indices()
        .zip(got.chars())
        .find(|((_, a), b)| a != b)
        .map_or_else(|| expected.len().min(got.len()), |((i, _), _)| i);
    let window = |s: &str| {
        let mut start = at.saturating_sub(30).min(s.len());
        while !s.is_char_boundary(start) {
            start -= 1;
        }
        let rest = &s[start..];
        let snippet: String = rest.chars().take(80).collect();
        let prefix = if start > 0 { "…" } else { "" };
        let suffix = if rest.chars().count() > 80 { "…" } else { "" };
        format!("{prefix}{snippet}{suffix}")
    };
    format!(
        "at byte {at}: expected {:?}, got {:?}",
        window(expected),
        window(got)
    )
}
