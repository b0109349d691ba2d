//! Who may reach `troupe a2a serve` (#52), through the real binary: a request naming another
//! `Host` (DNS rebinding) or coming from another origin's page is refused before anything is
//! read; a body that is not `application/json`, or one without `A2A-Version`, runs nothing;
//! an allowed origin gets a real preflight and CORS; a key is made when none is given (printed
//! once), and the Bearer scheme is taken in any case.

use serde_json::json;

use super::support::a2a_process::{A2aProcess, message};
use super::support::chat::{completions_server, write_config};

/// A config whose `assistant` answers `done N`, and the requests its model was sent.
fn answering(
    dir: &std::path::Path,
) -> (
    std::path::PathBuf,
    std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
) {
    let (url, requests) = completions_server(|_, n| {
        (
            json!({"role": "assistant", "content": format!("done {n}")}),
            "stop",
        )
    });
    (write_config(dir, &url), requests)
}

#[test]
fn a_foreign_host_is_refused_before_anything_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (config, _) = answering(dir.path());
    let server = A2aProcess::start(&config, &[], &[]);
    let sent = server.rpc(
        "assistant",
        "SendMessage",
        message("my secret plans", None, None),
    );
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    let port = server.addr.rsplit(':').next().unwrap();
    // A page on attacker.example, its name rebound to 127.0.0.1, lists the tasks: refused, and
    // before the body is read (it declares 100 bytes and sends none).
    let rebound = server
        .request("POST", "/agents/assistant")
        .header("Host", &format!("attacker.example:{port}"))
        .header("Content-Length", "100")
        .send();
    assert_eq!(rebound.status, 403, "{rebound:?}");
    assert!(rebound.body.contains("attacker.example"), "{rebound:?}");
    assert!(!rebound.body.contains("secret"), "{rebound:?}");
    let card = server
        .request("GET", "/agents/assistant/.well-known/agent-card.json")
        .header("Host", &format!("attacker.example:{port}"))
        .send();
    assert_eq!(card.status, 403, "{card:?}");
    // Its own names are answered: the address, and localhost on loopback.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    for host in [server.addr.clone(), format!("localhost:{port}")] {
        let own = server
            .request("POST", "/agents/assistant")
            .header("Host", &host)
            .json(&list)
            .send();
        assert_eq!(own.status, 200, "{host}: {own:?}");
        assert!(own.body.contains("my secret plans"), "{own:?}");
    }
}

#[test]
fn cross_site_posts_run_nothing_and_json_without_its_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (config, requests) = answering(dir.path());
    let server = A2aProcess::start(&config, &[], &[]);
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": message("echo pwned", None, None)});
    let own = format!("http://{}", server.addr);
    // What a page on another origin can send without a preflight: text/plain, a form (from a
    // sandboxed frame or a file, `Origin: null`), no A2A-Version.
    let refused = [
        server
            .request("POST", "/agents/assistant")
            .header("Origin", "http://evil.example")
            .header("Content-Type", "text/plain")
            .without("A2A-Version")
            .json(&send),
        server
            .request("POST", "/agents/assistant")
            .header("Origin", "null")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .without("A2A-Version")
            .body(&format!("{send}=")),
        server
            .request("POST", "/agents/assistant")
            .header("Sec-Fetch-Site", "cross-site")
            .json(&send),
        server
            .request("POST", "/agents/assistant")
            .header("Origin", "http://evil.example")
            .json(&send),
    ];
    for request in refused {
        let answer = request.clone().send();
        assert_eq!(answer.status, 403, "{request:?}: {answer:?}");
    }
    // The page's own origin, or no browser at all, still sends JSON with its version.
    let plain = server
        .request("POST", "/agents/assistant")
        .header("Origin", &own)
        .header("Content-Type", "text/plain")
        .json(&send)
        .send();
    assert_eq!(plain.status, 415, "{plain:?}");
    let unversioned = server
        .request("POST", "/agents/assistant")
        .without("A2A-Version")
        .json(&send)
        .send();
    assert!(unversioned.body.contains("-32009"), "{unversioned:?}");
    assert!(unversioned.body.contains("A2A-Version"), "{unversioned:?}");
    assert_eq!(requests.lock().unwrap().len(), 0, "the agent ran");
    let listed = server.rpc("assistant", "ListTasks", json!({}));
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
}

#[test]
fn an_allowed_origin_gets_its_preflight_and_cors_and_no_other_does() {
    let dir = tempfile::tempdir().unwrap();
    let (config, _) = answering(dir.path());
    let app = "http://app.example:3000";
    let server = A2aProcess::start(&config, &["--allow-origin", app], &[]);
    let preflight = |origin: &str| {
        server
            .request("OPTIONS", "/agents/assistant")
            .without("Content-Type")
            .without("A2A-Version")
            .without("Authorization")
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header(
                "Access-Control-Request-Headers",
                "authorization, content-type, a2a-version",
            )
            .send()
    };
    let allowed = preflight(app);
    assert_eq!(allowed.status, 204, "{allowed:?}");
    assert_eq!(allowed.header("access-control-allow-origin"), Some(app));
    assert!(
        allowed
            .header("access-control-allow-headers")
            .unwrap()
            .contains("a2a-version")
    );
    let sent = server
        .request("POST", "/agents/assistant")
        .header("Origin", app)
        .header("Sec-Fetch-Site", "cross-site")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": message("hello", None, None)}))
        .send();
    assert_eq!(sent.status, 200, "{sent:?}");
    assert_eq!(sent.header("access-control-allow-origin"), Some(app));
    assert!(sent.body.contains("TASK_STATE_COMPLETED"), "{sent:?}");
    let other = preflight("http://evil.example");
    assert_eq!(other.status, 403, "{other:?}");
    assert_eq!(other.header("access-control-allow-origin"), None);
    // An origin is named whole: a wildcard or a path is refused at the start.
    for bad in ["*", "https://app.example/path"] {
        let out = A2aProcess::command(&config, &["--allow-origin", bad], &[])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad} was taken");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains(bad) && said.contains("origin"),
            "{bad}: {said}"
        );
    }
}

#[test]
fn without_a_key_one_is_made_and_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let (config, requests) = answering(dir.path());
    let server = A2aProcess::start(&config, &[], &[]);
    let key = server
        .key
        .clone()
        .unwrap_or_else(|| panic!("no `key: …` line before READY: {:?}", server.printed));
    assert_eq!(key.len(), 32, "{key}");
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
    assert_eq!(
        server.printed.iter().filter(|l| l.contains(&key)).count(),
        1,
        "{:?}",
        server.printed
    );
    let send = || message("hello", None, None);
    let keyless = server.rpc_as(None, "assistant", "SendMessage", send());
    assert!(keyless.to_string().contains("credentials"), "{keyless}");
    let wrong = server.rpc_as(Some("0123"), "assistant", "SendMessage", send());
    assert!(wrong.to_string().contains("credentials"), "{wrong}");
    assert_eq!(
        requests.lock().unwrap().len(),
        0,
        "the agent ran without the key"
    );
    let keyed = server.rpc("assistant", "SendMessage", send());
    assert_eq!(
        keyed["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{keyed}"
    );
    let card = server
        .request("GET", "/agents/assistant/.well-known/agent-card.json")
        .without("Authorization")
        .send();
    assert!(card.body.contains("securitySchemes"), "{card:?}");
    assert!(!card.body.contains(&key), "{card:?}");
}

#[test]
fn the_bearer_scheme_is_taken_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let (config, _) = answering(dir.path());
    let key = "a2a-key-of-the-operator";
    let server = A2aProcess::start(
        &config,
        &["--key-env", "TEST_A2A_KEY"],
        &[("TEST_A2A_KEY", key)],
    );
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let answer = server
            .request("POST", "/agents/assistant")
            .header("Authorization", &format!("{scheme} {key}"))
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
            .send();
        assert_eq!(answer.status, 200, "{scheme}: {answer:?}");
    }
}
