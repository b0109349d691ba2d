//! Secrets found by shape: values that are credentials wherever they appear.

use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::REDACTED;

/// What may stand before a credential: the start of the text, a character that cannot be part of
/// a token, or an escape of JSON (or C) text — `\n`, `\t`, `\"`, `\u0027` — whose letters would
/// otherwise run into the credential (`…\nsk-…` has no word boundary before `sk`). Kept as is.
const BEFORE: &str = r"(?P<before>^|\\u[0-9A-Fa-f]{4}|\\[A-Za-z]|[^A-Za-z0-9_])";

/// The credential shapes, after [`BEFORE`]. Groups `scheme` (`Bearer `), `userinfo` (the
/// `scheme://user:` before a password, whose match ends with the `@` after it) and `name` (the
/// name in front of a bare AWS secret) are kept; everything else matched is the secret.
const SHAPES: &[&str] = &[
    // `Bearer <token>`.
    r"(?i:(?P<scheme>bearer[ \t]+))[A-Za-z0-9._~+/=\-]+",
    // The password of `scheme://user:password@host`.
    r"(?i:(?P<userinfo>[a-z][a-z0-9+.\-]*://[^\s/:@]+:))[^\s/@]+@",
    // A JWT: header.payload.signature, both JSON parts starting `{"`.
    r"eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
    // OpenAI and Anthropic (`sk-proj-…`, `sk-ant-…`).
    r"sk-[A-Za-z0-9_\-]{6,}",
    // Stripe secret, restricted and publishable keys.
    r"[spr]k_(?:live|test)_[A-Za-z0-9]{8,}",
    // GitHub tokens.
    r"gh[pousr]_[A-Za-z0-9]{20,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    // GitLab personal, deploy, runner and trigger tokens.
    r"gl(?:pat|dt|rt|ptt|cbt)-[A-Za-z0-9_\-]{20,}",
    // npm access tokens.
    r"npm_[A-Za-z0-9]{36,}",
    // SendGrid API keys: `SG.<id>.<secret>`.
    r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
    // AWS access key ids (long-lived and temporary).
    r"(?:AKIA|ASIA)[A-Z0-9]{16}\b",
    // An AWS secret access key (40 characters of base64) right after its name, whatever the
    // separator: `aws_secret_access_key = …`, `| SecretAccessKey | … |`, `"SecretAccessKey": "…"`.
    r#"(?i:(?P<name>(?:aws_?)?secret_?access_?key[\s"'\\:=|,]{0,12}))[A-Za-z0-9/+=]{40}"#,
    // Slack tokens.
    r"xox[abposr]-[A-Za-z0-9\-]{8,}",
    // Hugging Face tokens.
    r"hf_[A-Za-z0-9]{20,}",
    // Google API keys.
    r"AIza[0-9A-Za-z_\-]{30,}",
    // PEM private keys (PKCS#1, PKCS#8, EC, OpenSSH, PGP), with real or escaped (`\n`) line
    // breaks, through their END line; a key cut off before it, through the end of its body.
    concat!(
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        r"(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        r"|(?:[A-Za-z0-9+/=\s:,\-]|\\[nrt])*)",
    ),
];

/// [`BEFORE`] followed by any of [`SHAPES`].
pub(super) static SHAPED_VALUE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!("{BEFORE}(?:{})", SHAPES.join("|"))).ok());

/// The replacement for one shaped match: what stood before it and the kept prefix, then
/// [`REDACTED`]; a `Bearer` followed by an ordinary word ("a bearer token") is left alone.
pub(super) fn redact_shape(caps: &Captures<'_>) -> String {
    let whole = caps.get(0).map_or("", |m| m.as_str());
    let before = caps.name("before").map_or("", |m| m.as_str());
    if let Some(scheme) = caps.name("scheme") {
        let token = &whole[before.len() + scheme.len()..];
        if token.len() < 8 && !token.chars().any(|c| c.is_ascii_digit()) {
            return whole.to_string();
        }
        return format!("{before}{}{REDACTED}", scheme.as_str());
    }
    if let Some(userinfo) = caps.name("userinfo") {
        return format!("{before}{}{REDACTED}@", userinfo.as_str());
    }
    if let Some(name) = caps.name("name") {
        return format!("{before}{}{REDACTED}", name.as_str());
    }
    format!("{before}{REDACTED}")
}
