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

/// A made-up RSA private key in PEM (PKCS#1); `MIIEpAIBAAKCAQEAs3cr3t` marks its body.
const PEM_RSA: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAs3cr3tq8Lw5Zr1XkRmJx0YbT9cQhVnW2pKfGd7aE4sUo6iLy\nb1NcD3eF5gH7jK9lM0nP2qR4sT6uV8wX0yZ1aB3cD5eF7gH9iJ1kL3mN5oP7qR9s\n-----END RSA PRIVATE KEY-----";

/// A made-up OpenSSH private key; `b3BlbnNzaC1rZXktdjEAAAAABG5vbmU` marks its body.
const OPENSSH: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDxq7Jk0aWm3fRzS1yQe2X8s3cr3tKeyBytesHereQAAAJgAAAAAAAAAAAAA\n-----END OPENSSH PRIVATE KEY-----";

/// A made-up GCP service-account key file, as `gcloud` writes it.
const SERVICE_ACCOUNT: &str = r#"{
  "type": "service_account",
  "project_id": "demo-project",
  "private_key_id": "3f9a1c0b7e6d5a4b3c2d1e0f9a8b7c6d5e4f3a2b",
  "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDGcpSvcG0nRk\nq3s3cr3tBodyOfTheServiceAccountKey0123456789abcdefABCDEF==\n-----END PRIVATE KEY-----\n",
  "client_email": "robot@demo-project.iam.gserviceaccount.com"
}"#;

/// At least 25 credential formats, each embedded three ways: in plain text, after an escaped
/// line break inside a JSON string (a provider's error body), and inside a JSON tool result that
/// carries JSON (escaped twice). No secret survives any of them, and the text around it does.
#[test]
fn every_credential_format_is_redacted_plain_in_json_and_in_json_in_json() {
    use troupe::telemetry::redact::redact_value;

    let aws_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let aws_ini = format!("[default]\naws_secret_access_key = {aws_secret}\nregion = eu-west-1");
    let aws_env = format!("AWS_SECRET_ACCESS_KEY={aws_secret}");
    let aws_json = format!(r#"{{"AccessKeyId": "id", "SecretAccessKey": "{aws_secret}"}}"#);
    let aws_table = format!("| SecretAccessKey | {aws_secret} |");
    // (what, text holding the secret, a part of the secret that must not survive)
    let rows: Vec<(&str, String, &str)> = vec![
        ("OpenAI sk-proj-", "sk-proj-Abc123Def456Ghi789Jkl012Mno345".into(), "Abc123Def456Ghi789"),
        ("Anthropic sk-ant-", "sk-ant-api03-Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AbCdEf".into(), "Zy9Xw8Vu7Ts6"),
        ("Authorization: Bearer", "Authorization: Bearer tok-Abc123XYZ987".into(), "Abc123XYZ987"),
        ("bare Bearer", "sent Bearer abcDEF123456ghiJKL".into(), "abcDEF123456ghi"),
        ("JWT", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(), "eyJzdWIiOiIxMjM0NTY3ODkwIn0"),
        ("GitHub ghp_", "ghp_16C7e42F292c6912E7710c838347Ae178B4a".into(), "16C7e42F292c6912E77"),
        ("GitHub gho_", "gho_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8".into(), "A1b2C3d4E5f6G7h8"),
        ("GitHub github_pat_", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz".into(), "11ABCDEFG0123456789"),
        ("GitLab glpat-", "glpat-Xy12Ab34Cd56Ef78Gh90".into(), "Xy12Ab34Cd56Ef78"),
        ("npm npm_", "npm_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8".into(), "A1b2C3d4E5f6G7h8I9"),
        ("SendGrid SG.", "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".into(), "TwL2iGABf9DHoTf"),
        ("AWS access key id AKIA", "AKIAIOSFODNN7EXAMPLE".into(), "IOSFODNN7EXAMPLE"),
        ("AWS temporary key id ASIA", "ASIAY34FZKBOKMUTVV7A".into(), "Y34FZKBOKMUTVV7A"),
        ("AWS secret in credentials file", aws_ini, aws_secret),
        ("AWS secret in the environment", aws_env, aws_secret),
        ("AWS secret in JSON", aws_json, aws_secret),
        ("AWS secret in a table", aws_table, aws_secret),
        ("Stripe sk_live_", "sk_live_4eC39HqLyjWDarjtT1zdp7dc".into(), "4eC39HqLyjWDarjt"),
        ("Stripe rk_live_", "rk_live_51H8xYzAbCdEfGhIjKlMnOp".into(), "51H8xYzAbCdEfGh"),
        ("Slack xoxb-", "xoxb-2048-1024-AbCdEfGhIjKlMnOp".into(), "AbCdEfGhIjKlMnOp"),
        ("Hugging Face hf_", "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789".into(), "aBcDeFgHiJkLmNoPq"),
        ("Google AIza", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW".into(), "SyA1b2C3d4E5f6G7"),
        ("PEM RSA private key", PEM_RSA.into(), "MIIEpAIBAAKCAQEAs3cr3t"),
        ("PEM PKCS#8 private key", PEM_RSA.replace("RSA PRIVATE", "PRIVATE"), "MIIEpAIBAAKCAQEAs3cr3t"),
        ("PEM EC private key", PEM_RSA.replace("RSA PRIVATE", "EC PRIVATE"), "MIIEpAIBAAKCAQEAs3cr3t"),
        ("OpenSSH private key", OPENSSH.into(), "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"),
        ("GCP service-account private_key", SERVICE_ACCOUNT.into(), "MIIEvQIBADANBgkqhkiG9w0B"),
        ("URL credentials", "http://proxyuser:pr0xyPass@proxy.local:3128/".into(), "pr0xyPass"),
        ("x-api-key header", "x-api-key: Kx9f2Lmn88Qa".into(), "Kx9f2Lmn88Qa"),
        ("query ?key=", "https://example.com/v1/models?key=Qz7kD0cs9LmW&alt=json".into(), "Qz7kD0cs9LmW"),
        ("token: (a weak name)", "token: 9f8e7d6c5b4a39281706".into(), "9f8e7d6c5b4a39281706"),
        ("password=", "postgres://db?password=hunter2hunter2".into(), "hunter2hunter2"),
        ("JSON \"api_key\"", r#"{"api_key": "my secret value 42"}"#.into(), "my secret value 42"),
        ("Cookie header", "Cookie: session=abcSESSION123; theme=dark".into(), "abcSESSION123"),
    ];
    assert!(rows.len() >= 25);
    for (what, input, secret) in &rows {
        let plain = format!("status 401: {input}\n(request 7)");
        let in_json = serde_json::to_string(&format!("output:\n{input}\nexit 1")).unwrap();
        let inner = serde_json::json!({"stdout": format!("\n{input}\n"), "code": 1}).to_string();
        let tool_result =
            serde_json::json!({"role": "tool", "tool_call_id": "call_1", "content": inner})
                .to_string();
        for (how, text, kept) in [
            ("plain", plain, "(request 7)"),
            ("after \\n in a JSON string", in_json, "exit 1"),
            (
                "in a JSON tool result",
                tool_result,
                r#""tool_call_id":"call_1""#,
            ),
        ] {
            let out = redact_value(&text);
            assert!(
                !out.contains(secret),
                "{what}, {how}: `{secret}` survived in `{out}`"
            );
            assert!(
                out.contains("[redacted]"),
                "{what}, {how}: no marker in `{out}`"
            );
            assert!(
                out.contains(kept),
                "{what}, {how}: `{kept}` was lost in `{out}`"
            );
        }
    }

    // Ordinary text near the new shapes is left alone.
    for text in [
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
        "set npm_config_cache and visit SG.example.com",
        "the secret access key is stored in the vault",
        "output:\\nall 3 tests passed\\nsee task-force notes",
        r#"{"text": "line one\nline two", "tokens": 12}"#,
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
                        "Incorrect API key provided: {E2E_KEY}. Request had Authorization: Bearer {E2E_KEY}; see ?key={E2E_KEY}\nsk-ant-api03-e2eSECRETanthropic01\nAKIAE2ESECRETAWSKEY1"
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
        // Also the keys after a line break, which the JSON body escapes (`\nsk-ant-…`).
        for secret in ["e2eSECRET", "E2ESECRETAWS"] {
            assert!(!text.contains(secret), "the key reached {what}:\n{text}");
        }
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
