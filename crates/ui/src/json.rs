//! JSON for the page with `<`, `>` and `&` escaped: model text inside it can never close a tag
//! or start one, whatever reads it.

use serde::Serialize;

/// `value` as JSON, with `<`, `>` and `&` written as `\u003c`, `\u003e` and `\u0026`.
///
/// Those characters only occur inside JSON strings, where the escape means the same character,
/// so the value read back is unchanged.
pub(crate) fn to_safe_json<T: Serialize>(value: &T) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|e| {
        serde_json::json!({ "error": format!("cannot serialize: {e}") }).to_string()
    });
    escape_markup(&text)
}

fn escape_markup(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped_and_reads_back_unchanged() {
        let text = "<script>alert(1)</script><img src=x onerror=alert(2)> & more";
        let json = to_safe_json(&serde_json::json!({ "said": text }));
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["said"], text);
    }
}
