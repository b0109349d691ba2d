//! Keeping secrets out of everything troupe writes: the trace file, OTLP export, console logs and
//! the CLI's error lines all pass text through [`redact_value`], and drop the values of fields
//! that [`is_secret_name`] calls credentials.
//!
//! A secret is found two ways. **By name**: a credential-named key followed by its value, in
//! any of the forms a provider error, a URL or a header dump uses — `api_key=…` (query strings
//! and forms), `x-api-key: …` (headers; `Authorization: Bearer …` loses the scheme too, `Cookie:
//! …` the rest of the line), `"api_key": "…"` (JSON, escaped JSON inside a string too). **By
//! shape**: values that are credentials wherever they appear — `Bearer …`, JWTs, OpenAI `sk-…`,
//! Stripe `sk_live_…`, GitHub `ghp_…`/`github_pat_…`, AWS `AKIA…`, Slack `xox?-…`, Hugging Face
//! `hf_…`, Google `AIza…`, and the password of `scheme://user:password@host`. Only the value is
//! replaced, so "status 401" and the rest of the message survive.

use std::sync::LazyLock;

use regex::{Captures, Regex};

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

/// Whole words of a name (split on punctuation and camelCase) that mark a credential;
/// `input_tokens` is a count, not a token, and `monkey` is not a key, so only whole words count.
const SECRET_WORDS: &[&str] = &["key", "token", "auth", "pat", "pwd", "signature"];

/// Names so generic that, in the `name: value` form, prose uses them too ("Invalid key: check
/// your settings"): their value is redacted only if it looks like a credential.
const WEAK_NAMES: &[&str] = &["key", "token", "auth", "pat"];

/// The words of a field name: split on anything not alphanumeric and where a lowercase letter
/// meets an uppercase one (`apiKey` → `api`, `key`), lowercased.
fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Whether a field with this name must never be written.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_NAME_PARTS.iter().any(|part| lower.contains(part))
        || words(name)
            .iter()
            .any(|w| SECRET_WORDS.contains(&w.as_str()))
}

/// `value` with every credential in it replaced by [`REDACTED`] (see the module docs).
pub fn redact_value(value: &str) -> String {
    let (Some(named), Some(shaped)) = (NAMED_VALUE.as_ref(), SHAPED_VALUE.as_ref()) else {
        // The patterns are constants; if one ever failed to compile, write nothing rather than
        // risk a secret.
        return REDACTED.to_string();
    };
    let by_name = redact_named(named, value);
    shaped
        .replace_all(&by_name, |caps: &Captures<'_>| redact_shape(caps))
        .into_owned()
}

/// A key, what closes it (a quote, maybe escaped), the separator, and what opens its value.
static NAMED_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"([A-Za-z0-9_.\-]+)(\\?["']?)[ \t]*([:=])[ \t]*(\\?["']?)"#).ok()
});

/// Replace the values of credential-named keys.
fn redact_named(re: &Regex, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut pos = 0;
    while let Some(caps) = re.captures_at(text, pos) {
        let (Some(whole), Some(name), Some(sep), Some(open)) =
            (caps.get(0), caps.get(1), caps.get(3), caps.get(4))
        else {
            break;
        };
        pos = whole.end().max(pos + 1);
        if !is_secret_name(name.as_str()) {
            continue;
        }
        let quoted = !open.as_str().is_empty();
        let end = value_end(text, whole.end(), open.as_str(), name.as_str());
        let value = &text[whole.end()..end];
        let weak = WEAK_NAMES.contains(&name.as_str().to_ascii_lowercase().as_str());
        if value.is_empty()
            || (weak && sep.as_str() == ":" && !quoted && !looks_like_credential(value))
        {
            continue;
        }
        out.push_str(&text[copied..whole.end()]);
        out.push_str(REDACTED);
        copied = end;
        pos = end.max(pos);
    }
    out.push_str(&text[copied..]);
    out
}

/// Where the value that starts at `start` ends: at its closing quote when it was quoted, at the
/// end of the line for a cookie, after the scheme and token for an authorization, else at the
/// first character that cannot be part of a token.
fn value_end(text: &str, start: usize, open: &str, name: &str) -> usize {
    let rest = &text[start..];
    let line_end = rest.find(['\n', '\r']).unwrap_or(rest.len());
    let found = |offset: Option<usize>| start + offset.unwrap_or(line_end);
    match open {
        r#"\""# => return found(rest.find(r#"\""#)),
        r#"\'"# => return found(rest.find(r"\'")),
        "'" => return found(rest.find('\'')),
        r#"""# => return found(closing_quote(rest)),
        _ => {}
    }
    if rest.starts_with(['{', '[']) {
        // A nested object or array: its own keys are scanned on their own.
        return start;
    }
    let lower = name.to_ascii_lowercase();
    if lower.contains("cookie") {
        return found(rest.find('"'));
    }
    let mut skip = 0;
    if lower.contains("authorization") || lower == "auth" {
        skip = AUTH_SCHEME
            .as_ref()
            .and_then(|re| re.find(rest))
            .map_or(0, |m| m.end());
    }
    let token_end = rest[skip..]
        .find(|c: char| c.is_whitespace() || "&,;\"'}])<>\\".contains(c))
        .map_or(rest.len(), |i| skip + i);
    start + token_end
}

/// The position of the first `"` in `text` that a backslash does not escape.
fn closing_quote(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

/// An authorization scheme in front of the credential, which goes with it.
static AUTH_SCHEME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^(?i)(?:bearer|basic|token|digest|negotiate|apikey|key)[ \t]+").ok()
});

/// Whether a bare value is credential-shaped: long enough and mixing letters and digits.
fn looks_like_credential(value: &str) -> bool {
    value.len() >= 8
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic())
}

/// Values that are credentials wherever they appear. Group 1 (`Bearer `) and group 2 (the
/// `scheme://user:` before a password, whose match ends with the `@` after it) are kept;
/// everything else matched is the secret.
static SHAPED_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let patterns = [
        // `Bearer <token>`.
        r"(?i:\b(bearer[ \t]+))[A-Za-z0-9._~+/=\-]+",
        // The password of `scheme://user:password@host`.
        r"(?i:\b([a-z][a-z0-9+.\-]*://[^\s/:@]+:))[^\s/@]+@",
        // A JWT: header.payload.signature, both JSON parts starting `{"`.
        r"\beyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
        // OpenAI and Anthropic (`sk-proj-…`, `sk-ant-…`).
        r"\bsk-[A-Za-z0-9_\-]{6,}",
        // Stripe secret, restricted and publishable keys.
        r"\b[spr]k_(?:live|test)_[A-Za-z0-9]{8,}",
        // GitHub tokens.
        r"\bgh[pousr]_[A-Za-z0-9]{20,}",
        r"\bgithub_pat_[A-Za-z0-9_]{20,}",
        // AWS access key ids (long-lived and temporary).
        r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
        // Slack tokens.
        r"\bxox[abposr]-[A-Za-z0-9\-]{8,}",
        // Hugging Face tokens.
        r"\bhf_[A-Za-z0-9]{20,}",
        // Google API keys.
        r"\bAIza[0-9A-Za-z_\-]{30,}",
    ];
    Regex::new(&patterns.join("|")).ok()
});

/// The replacement for one shaped match: the kept prefix, then [`REDACTED`]; a `Bearer` followed
/// by an ordinary word ("a bearer token") is left alone.
fn redact_shape(caps: &Captures<'_>) -> String {
    let whole = caps.get(0).map_or("", |m| m.as_str());
    if let Some(scheme) = caps.get(1) {
        let token = &whole[scheme.len()..];
        if token.len() < 8 && !token.chars().any(|c| c.is_ascii_digit()) {
            return whole.to_string();
        }
        return format!("{}{REDACTED}", scheme.as_str());
    }
    if let Some(userinfo) = caps.get(2) {
        return format!("{}{REDACTED}@", userinfo.as_str());
    }
    REDACTED.to_string()
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
            "accessToken",
            "client_secret",
            "password",
            "apiKey",
            "x-api-key",
            "token",
            "X-Amz-Signature",
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
            "monkey",
            "keyboard",
            "tokenizer",
            "author",
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
        assert_eq!(
            redact_value(r#"{"api_key": "a \"quoted\" secret", "n": 1}"#),
            r#"{"api_key": "[redacted]", "n": 1}"#
        );
        assert_eq!(
            redact_value("GET /v1?key=abc&alt=json"),
            "GET /v1?key=[redacted]&alt=json"
        );
        assert_eq!(redact_value("nothing to see"), "nothing to see");
        assert_eq!(
            redact_value("a bearer token is required"),
            "a bearer token is required"
        );
    }
}
