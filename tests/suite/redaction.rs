//! Credentials never leave the process: redaction of every credential format, and a provider
//! error that echoes the key reaching neither the terminal nor the trace file.

/// One row per way a credential shows up in a provider error, a log line or a header dump: the
/// secret must go, the text around it must stay.
#[test]
fn redaction_removes_every_credential_format_and_keeps_the_text_around_it() {
    use troupe::telemetry::redact::redact_value;

    // (what, input, the secret, text that must survive)
    let rows: &[(&str, &str, &str, &str)] = &[
        (
            "Bearer",
            "status 401: Authorization: Bearer tok-Abc123XYZ was rejected",
            "tok-Abc123XYZ",
            "status 401",
        ),
        (
            "bare Bearer",
            "status 401: sent Bearer abcDEF123456ghi",
            "abcDEF123456ghi",
            "status 401",
        ),
        (
            "x-api-key header",
            "status 401\nx-api-key: Kx9f2Lmn88Qa\nretry later",
            "Kx9f2Lmn88Qa",
            "retry later",
        ),
        (
            "api-key header",
            "status 401 (api-key: 0123abcdSecretAzure)",
            "0123abcdSecretAzure",
            "status 401",
        ),
        (
            "query ?key=",
            "status 403 for https://example.com/v1/models?key=Qz7kD0cs9LmW&alt=json",
            "Qz7kD0cs9LmW",
            "&alt=json",
        ),
        (
            "access_token=",
            "status 401 GET /api?user=7&access_token=ya29.A0ARrdaM-secret&page=2",
            "ya29.A0ARrdaM-secret",
            "&page=2",
        ),
        (
            "JSON \"api_key\"",
            r#"status 400: {"error": "bad", "api_key": "my secret value 42", "input_tokens": 7}"#,
            "my secret value 42",
            r#""input_tokens": 7"#,
        ),
        (
            "escaped JSON \"api_key\"",
            r#"status 400: "{\"api_key\":\"plainSecret99\",\"model\":\"m\"}""#,
            "plainSecret99",
            r#"\"model\":\"m\""#,
        ),
        (
            "password=",
            "status 500: connect postgres://db?password=hunter2hunter2 failed",
            "hunter2hunter2",
            "failed",
        ),
        (
            "Cookie header",
            "status 401\nCookie: session=abcSESSION123; theme=dark\nstatus 401 again",
            "abcSESSION123",
            "status 401 again",
        ),
        (
            "JWT",
            "status 401: token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U expired",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
            "expired",
        ),
        (
            "GitHub ghp_",
            "status 401: bad credentials ghp_16C7e42F292c6912E7710c838347Ae178B4a for repo",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "for repo",
        ),
        (
            "GitHub github_pat_",
            "status 401 github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCD rejected",
            "github_pat_11ABCDEFG0123456789",
            "rejected",
        ),
        (
            "AWS access key id",
            "status 403: The AWS Access Key Id AKIAIOSFODNN7EXAMPLE does not exist",
            "AKIAIOSFODNN7EXAMPLE",
            "does not exist",
        ),
        (
            "Stripe sk_live_",
            "status 401: Invalid API Key provided: sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "status 401: Invalid API Key provided",
        ),
        (
            "Slack xoxb-",
            "status 200 invalid_auth for xoxb-2048-1024-AbCdEfGhIjKlMnOp here",
            "xoxb-2048-1024-AbCdEfGhIjKlMnOp",
            "here",
        ),
        (
            "Hugging Face hf_",
            "status 401: Invalid token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 for model",
            "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
            "for model",
        ),
        (
            "Google AIza",
            "status 400: API key not valid: AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW. Please pass a valid key.",
            "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
            "Please pass a valid key.",
        ),
        (
            "OpenAI sk-",
            "status 401: Incorrect API key provided: sk-proj-ABCdef123456. You can find your key",
            "sk-proj-ABCdef123456",
            "You can find your key",
        ),
        (
            "URL credentials",
            "status 407 via http://proxyuser:pr0xyPass@proxy.local:3128/",
            "pr0xyPass",
            "proxy.local:3128",
        ),
    ];
    for (what, input, secret, kept) in rows {
        let out = redact_value(input);
        assert!(
            !out.contains(secret),
            "{what}: `{secret}` survived in `{out}`"
        );
        assert!(out.contains(kept), "{what}: `{kept}` was lost in `{out}`");
        assert!(out.contains("[redacted]"), "{what}: no marker in `{out}`");
    }

    // Ordinary text is left alone.
    for text in [
        "gen_ai.usage.input_tokens=12 max_tokens=256 output_tokens: 7",
        "The key to good bread is time: let it rest overnight.",
        "Invalid API key: check the settings page",
        "read /home/baker/.config/troupe/keys/README.md and src/telemetry/redact.rs",
        "monkey=3 turkey: 4 keyboard=us tokenizer=cl100k_base",
        "ask the desk-clerk about the task-force and hf_hub_download",
        "status 401 Unauthorized",
    ] {
        assert_eq!(redact_value(text), text, "over-redacted");
    }
}

/// The API key of [`a_provider_error_carrying_the_key_reaches_neither_stderr_nor_the_trace`].
const E2E_KEY: &str = "sk-e2eSECRETkey0123456789";

/// An OpenAI-wire server on 127.0.0.1 that answers every request 401, echoing the key the way
/// careless providers and proxies do. Returns its `/v1` URL.
fn start_echoing_401_server() -> String {
    use std::io::{BufRead, BufReader, Read, Write};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let body = serde_json::json!({
                "error": {
                    "message": format!(
                        "Incorrect API key provided: {E2E_KEY}. Request had Authorization: Bearer {E2E_KEY}; see ?key={E2E_KEY}"
                    ),
                    "api_key": E2E_KEY,
                    "type": "invalid_request_error",
                    "code": "invalid_api_key"
                }
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// End to end: `troupe chat` against a provider whose 401 echoes the key, with a trace file and
/// debug logs on. The key must not reach stdout (the REPL's error line), stderr (console logs and
/// the final error line) or the trace file.
#[test]
fn a_provider_error_carrying_the_key_reaches_neither_stderr_nor_the_trace() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let url = start_echoing_401_server();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("troupe.toml");
    std::fs::write(
        &config,
        format!(
            "[models.remote]\nprovider = \"openai\"\nbase_url = \"{url}\"\napi_key_env = \"TEST_LEAK_KEY\"\nmodel = \"m\"\ncontext_window = 8000\n\n[agents.assistant]\nmodel = \"remote\"\n"
        ),
    )
    .unwrap();
    let trace = dir.path().join("trace.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["chat", "--config"])
        .arg(&config)
        .arg("--session")
        .arg(dir.path().join("s.jsonl"))
        .env("TEST_LEAK_KEY", E2E_KEY)
        .env("TROUPE_TRACE", &trace)
        .env("TROUPE_TRACE_FILTER", "debug")
        .env("TROUPE_TRACE_CONTENT", "1")
        .env("RUST_LOG", "debug")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello\n/exit\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let file = std::fs::read_to_string(&trace).unwrap_or_default();

    // The request did fail with the provider's 401, and said so.
    assert!(
        stdout.contains("error: "),
        "no error line:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("Incorrect API key provided"),
        "the error lost its text:\n{stdout}"
    );
    assert!(!file.is_empty(), "no trace was written:\n{stderr}");
    for (what, text) in [
        ("stdout", stdout.as_ref()),
        ("stderr", stderr.as_ref()),
        ("the trace file", file.as_str()),
    ] {
        assert!(
            !text.contains("e2eSECRET"),
            "the key reached {what}:\n{text}"
        );
    }
    assert!(file.contains("[redacted]"), "{file}");
}

/// A command that fails outright: its final `error: …` line on stderr is redacted too.
#[test]
fn the_final_error_line_of_the_binary_is_redacted() {
    use std::process::Command;

    let dir = tempfile::tempdir().unwrap();
    let missing = dir
        .path()
        .join(format!("token=ghp_{}", "A".repeat(36)))
        .join("run.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("trace")
        .arg(&missing)
        .env_remove("TROUPE_TRACE")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("error: "), "{stderr}");
    assert!(!stderr.contains("AAAAAAAAAAAAAAAAAAAA"), "{stderr}");
}
