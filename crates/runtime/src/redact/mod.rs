//! Keeping secrets out of everything troupe writes: the trace file, OTLP export, console logs and
//! the CLI's error lines all pass text through [`redact_value`], and drop the values of fields
//! that [`is_secret_name`] calls credentials.
//!
//! A secret is found two ways. **By name**: a credential-named key followed by its value, in
//! any of the forms a provider error, a URL or a header dump uses — `api_key=…` (query strings
//! and forms), `x-api-key: …` (headers; `Authorization: Bearer …` loses the scheme too, `Cookie:
//! …` the rest of the line), `"api_key": "…"` (JSON, escaped JSON inside a string too). **By
//! shape**: values that are credentials wherever they appear — `Bearer …`, JWTs, OpenAI `sk-…`,
//! Stripe `sk_live_…`, GitHub `ghp_…`/`github_pat_…`, GitLab `glpat-…`, npm `npm_…`, SendGrid
//! `SG.….…`, AWS `AKIA…` and a secret access key after its name, Slack `xox?-…`, Hugging Face
//! `hf_…`, Google `AIza…`, PEM and OpenSSH private keys, and the password of
//! `scheme://user:password@host`. Both ways see through the escapes of JSON text: a secret after
//! `\n`, `\"` or `\u0027` inside a JSON string (a tool result, a provider's error body, JSON
//! in JSON) is found as if the escape were a line break or a quote. Only the value is replaced,
//! so "status 401" and the rest of the message survive.
//!
//! The rules live in the runtime so that every crate applies the same ones: the telemetry of the
//! `troupe` crate, the CLI's error lines, and the MCP client, which redacts a server's stderr
//! before it reaches a tool result.

mod named;
mod names;
mod shaped;

pub use names::is_secret_name;

use named::{NAMED_VALUE, redact_named};
use shaped::{SHAPED_VALUE, redact_shape};

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// `value` with every credential in it replaced by [`REDACTED`] (see the module docs).
pub fn redact_value(value: &str) -> String {
    let (Some(named), Some(shaped)) = (NAMED_VALUE.as_ref(), SHAPED_VALUE.as_ref()) else {
        // The patterns are constants; if one ever failed to compile, write nothing rather than
        // risk a secret.
        return REDACTED.to_string();
    };
    let by_name = redact_named(named, value);
    shaped
        .replace_all(&by_name, |caps: &regex::Captures<'_>| redact_shape(caps))
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
    fn the_patterns_compile() {
        assert!(NAMED_VALUE.is_some() && SHAPED_VALUE.is_some());
    }

    #[test]
    fn a_private_key_cut_off_before_its_end_line_is_redacted_to_the_end_of_its_body() {
        let cut = "tail: -----BEGIN RSA PRIVATE KEY-----\\nMIIEpAIBAAKCAQEAs3cr3t\\nq8Lw5Zr1\"}";
        assert_eq!(redact_value(cut), "tail: [redacted]\"}");
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
