//! Keeping secrets out of trace files: field names that name a credential, and values that look
//! like one, are replaced before anything is written.

use std::sync::LazyLock;

use regex::Regex;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Substrings of a field name that mark it as a credential wherever they occur.
const SECRET_NAME_PARTS: &[&str] = &[
    "authorization",
    "secret",
    "password",
    "passwd",
    "apikey",
    "api_key",
    "api-key",
    "credential",
    "cookie",
    "bearer",
];

/// Whole name segments (split on `.`, `_`, `-`) that mark a credential; `input_tokens` is a
/// count, not a token, so only the singular `token` counts.
const SECRET_SEGMENTS: &[&str] = &["key", "token", "auth", "pat"];

/// Whether a field with this name must never be written.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if SECRET_NAME_PARTS.iter().any(|part| lower.contains(part)) {
        return true;
    }
    let segments: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    segments.iter().any(|s| SECRET_SEGMENTS.contains(s))
        || segments
            .last()
            .is_some_and(|s| s.ends_with("key") || s.ends_with("token"))
}

static SECRET_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    // `Bearer <token>`, `Authorization: [scheme] <anything>`, and OpenAI-style `sk-…` keys. The
    // scheme is optional so that `Authorization: Bearer x` loses `x`, not just the word `Bearer`.
    Regex::new(
        r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+|(authorization[\x22']?\s*[:=]\s*[\x22']?)(?:(?:bearer|basic|token|digest)\s+)?[^\s,;}\x22']+|\bsk-[A-Za-z0-9_-]{6,}",
    )
    .ok()
});

/// `value` with every credential-looking substring replaced by [`REDACTED`].
pub fn redact_value(value: &str) -> String {
    let Some(re) = SECRET_VALUE.as_ref() else {
        // The pattern is a constant; if it ever failed to compile, write nothing rather than
        // risk a secret.
        return REDACTED.to_string();
    };
    re.replace_all(value, |caps: &regex::Captures<'_>| {
        let prefix = caps
            .get(1)
            .or_else(|| caps.get(2))
            .map_or("", |m| m.as_str());
        format!("{prefix}{REDACTED}")
    })
    .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_are_secret_and_token_counts_are_not() {
        for name in [
            "api_key",
            "OPENAI_API_KEY",
            "http.request.header.authorization",
            "access_token",
            "client_secret",
            "password",
            "apiKey",
            "x-api-key",
            "token",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.request.model",
            "gen_ai.tool.call.id",
            "troupe.trace_id",
            "tokens_before",
            "monkey_business",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn credential_values_are_replaced() {
        assert_eq!(redact_value("Bearer abc.def-123"), "Bearer [redacted]");
        assert_eq!(
            redact_value("header Authorization: xyz123 sent"),
            "header Authorization: [redacted] sent"
        );
        assert_eq!(
            redact_value("key sk-proj-ABCdef123456 rejected"),
            "key [redacted] rejected"
        );
        assert_eq!(
            redact_value("Authorization: Bearer tok-XYZ987"),
            "Authorization: [redacted]"
        );
        assert_eq!(
            redact_value(r#"{"authorization":"Basic dXNlcjpwYXNz"}"#),
            r#"{"authorization":"[redacted]"}"#
        );
        assert_eq!(redact_value("nothing to see"), "nothing to see");
    }
}
