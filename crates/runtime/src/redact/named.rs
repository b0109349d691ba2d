//! Secrets found by name: the value after a credential-named key, in the forms query strings,
//! headers and JSON (plain or escaped inside a string) use.

use std::sync::LazyLock;

use regex::Regex;

use super::REDACTED;
use super::names::{WEAK_NAMES, is_secret_name};

/// A key, what closes it (a quote, maybe escaped — once in JSON inside a JSON string, more in
/// deeper nesting), the separator, and what opens its value.
pub(super) static NAMED_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"([A-Za-z0-9_.\-]+)(\\*["']?)[ \t]*([:=])[ \t]*(\\*["']?)"#).ok()
});

/// Replace the values of credential-named keys.
pub(super) fn redact_named(re: &Regex, text: &str) -> String {
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
        let Some(name) = secret_name(text, name.start(), name.as_str()) else {
            continue;
        };
        let quoted = !open.as_str().is_empty();
        let end = value_end(text, whole.end(), open.as_str(), name);
        let value = &text[whole.end()..end];
        let weak = WEAK_NAMES.contains(&name.to_ascii_lowercase().as_str());
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

/// The credential name `name` (found at `start` in `text`) stands for, if any. Inside JSON text a
/// key can follow an escape (`…\napi_key=…`, `\ttoken: …`, `\u0027secret…`) whose letters the
/// pattern takes as part of the name; the name without them counts too.
fn secret_name<'t>(text: &'t str, start: usize, name: &'t str) -> Option<&'t str> {
    let escaped = text[..start].ends_with('\\');
    if escaped {
        let unicode = name.len() > 5
            && name.starts_with('u')
            && name[1..5].chars().all(|c| c.is_ascii_hexdigit());
        let unescaped = if unicode { &name[5..] } else { &name[1..] };
        if !unescaped.is_empty() && is_secret_name(unescaped) {
            return Some(unescaped);
        }
    }
    is_secret_name(name).then_some(name)
}

/// Where the value that starts at `start` ends: at its closing quote when it was quoted, at the
/// end of the line for a cookie, after the scheme and token for an authorization, else at the
/// first character that cannot be part of a token.
fn value_end(text: &str, start: usize, open: &str, name: &str) -> usize {
    let rest = &text[start..];
    let line_end = rest.find(['\n', '\r']).unwrap_or(rest.len());
    let found = |offset: Option<usize>| start + offset.unwrap_or(line_end);
    match open {
        r#"""# => return found(closing_quote(rest)),
        // An escaped quote (`\"`, `\\\"` …) is closed by the same sequence, a `'` by a `'`.
        _ if open.ends_with(['"', '\'']) => return found(rest.find(open)),
        _ => {}
    }
    if rest.starts_with(['{', '[']) {
        // A nested object or array: its own keys are scanned on their own.
        return start;
    }
    let lower = name.to_ascii_lowercase();
    if lower.contains("cookie") {
        // To the end of the line, which inside JSON text is an escaped line break.
        let escaped_break = [r#"""#, "\n", "\r", r"\n", r"\r"]
            .iter()
            .filter_map(|end| rest.find(end))
            .min();
        return found(escaped_break);
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
