//! The OpenAI-compatible provider against the fault-injecting server.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use troupe_models::RetryPolicy;
use troupe_models::{OpenAiConfig, OpenAiModel};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, FinishReason, ModelError, ToolChoice, ToolDefinition,
};

use super::support::model_fault_server::{
    Fault, FaultServer, completion_text, completion_tool_call, model,
};

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are terse."),
        ChatMessage::user("What is the capital of Norway?"),
    ]
}

/// Every attempt carried exactly the caller's conversation, and the caller's copy is untouched.
fn assert_conversation_intact(server: &FaultServer, sent: &[ChatMessage], before: &[ChatMessage]) {
    assert_eq!(sent, before, "the caller's conversation changed");
    let wire: Vec<Value> = before
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect();
    for (i, request) in server.requests().iter().enumerate() {
        assert_eq!(
            request["messages"],
            Value::Array(wire.clone()),
            "attempt {i} sent other messages"
        );
    }
}

async fn run(
    script: Vec<Fault>,
) -> (
    FaultServer,
    Result<troupe_protocol::ChatResponse, ModelError>,
) {
    let server = FaultServer::start(script).await;
    let messages = conversation();
    let before = messages.clone();
    let result = model(&server)
        .chat(ChatRequest::new(messages.clone()))
        .await;
    assert_conversation_intact(&server, &messages, &before);
    (server, result)
}

#[tokio::test]
async fn model_openai_plain_answer_with_usage_and_key() {
    let (server, result) = run(vec![Fault::Ok(completion_text("Oslo."))]).await;
    let response = result.unwrap();
    assert_eq!(response.message.text(), "Oslo.");
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (42, 7)
    );
    assert_eq!(
        server.auth_headers(),
        vec![Some("Bearer sk-test".to_string())]
    );
    assert_eq!(server.requests()[0]["model"], "gpt-test");
}

/// A base URL with a query (Azure's `…?api-version=…`, a proxy's key parameter): the endpoint
/// path goes before the query, and the query is sent with every request.
#[tokio::test]
async fn model_openai_base_url_with_a_query_puts_the_path_before_it() {
    for (suffix, extra, expected) in [
        ("?api-version=2024-06-01", None, "api-version=2024-06-01"),
        ("/?api-version=2024-06-01", None, "api-version=2024-06-01"),
        (
            "?api-version=2024-06-01",
            Some(("tenant", "a b")),
            "api-version=2024-06-01&tenant=a+b",
        ),
    ] {
        let server = FaultServer::start([Fault::Ok(completion_text("Oslo."))]).await;
        let mut config = OpenAiConfig::new(format!("{}{suffix}", server.base_url), "gpt-test")
            .with_request_timeout(Duration::from_millis(500));
        if let Some((key, value)) = extra {
            config.query.push((key.to_string(), value.to_string()));
        }
        let response = OpenAiModel::new(config)
            .unwrap()
            .chat(ChatRequest::new(conversation()))
            .await
            .unwrap_or_else(|e| panic!("{suffix}: {e}"));
        assert_eq!(response.message.text(), "Oslo.");
        assert_eq!(
            server.queries(),
            vec![Some(expected.to_string())],
            "{suffix}"
        );
    }
}

#[tokio::test]
async fn model_openai_429_then_ok_recovers_after_retry_after() {
    let started = Instant::now();
    let (server, result) = run(vec![
        Fault::RateLimited {
            retry_after: Some("1"),
        },
        Fault::Ok(completion_text("Oslo.")),
    ])
    .await;
    assert_eq!(result.unwrap().message.text(), "Oslo.");
    assert_eq!(server.attempts(), 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was not honoured"
    );
}

#[tokio::test]
async fn model_openai_429_asking_too_long_a_wait_is_final() {
    let (server, result) = run(vec![Fault::RateLimited {
        retry_after: Some("3600"),
    }])
    .await;
    assert!(
        matches!(result, Err(ModelError::RateLimited(_))),
        "{result:?}"
    );
    assert_eq!(server.attempts(), 1);
}

/// A wait no policy can honour — past what a `Duration` holds, infinite, not a number,
/// negative — ends the call with the server's typed error saying so; it used to panic the
/// caller ("cannot convert float seconds to Duration") or retry on a made-up backoff.
#[tokio::test]
async fn model_openai_an_absurd_retry_after_is_a_typed_error_not_a_panic() {
    let faults = [
        Fault::RateLimited {
            retry_after: Some("1e20"),
        },
        Fault::RateLimited {
            retry_after: Some("inf"),
        },
        Fault::RateLimited {
            retry_after: Some("NaN"),
        },
        Fault::RateLimited {
            retry_after: Some("-5"),
        },
        Fault::RateLimitedMs("1e30"),
        Fault::RateLimitedMs("-1"),
    ];
    for fault in faults {
        let shown = format!("{fault:?}");
        let (server, result) = run(vec![fault, Fault::Ok(completion_text("Oslo."))]).await;
        assert!(
            matches!(&result, Err(ModelError::RateLimited(m)) if m.contains("no wait")),
            "{shown}: {result:?}"
        );
        assert_eq!(server.attempts(), 1, "{shown}");
    }
}

#[tokio::test]
async fn model_openai_500s_then_ok_recovers() {
    let (server, result) = run(vec![
        Fault::ServerError(500),
        Fault::ServerError(503),
        Fault::Ok(completion_text("Oslo.")),
    ])
    .await;
    assert_eq!(result.unwrap().message.text(), "Oslo.");
    assert_eq!(server.attempts(), 3);
}

#[tokio::test]
async fn model_openai_persistent_500_fails_after_all_retries() {
    let (server, result) = run(vec![Fault::ServerError(500); 5]).await;
    match result {
        Err(ModelError::Server {
            status: 500,
            message,
        }) => {
            assert!(message.contains("server had an error"), "{message}")
        }
        other => panic!("expected a 500 server error, got {other:?}"),
    }
    assert_eq!(server.attempts(), 4, "1 attempt + 3 retries");
}

#[tokio::test]
async fn model_openai_stalled_response_times_out_and_is_retried() {
    let started = Instant::now();
    let (server, result) = run(vec![
        Fault::Stall(Duration::from_secs(10)),
        Fault::Ok(completion_text("Oslo.")),
    ])
    .await;
    assert_eq!(result.unwrap().message.text(), "Oslo.");
    assert_eq!(server.attempts(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the stall was waited out"
    );
}

#[tokio::test]
async fn model_openai_persistent_stall_is_a_timeout_error() {
    let (server, result) = run(vec![Fault::Stall(Duration::from_secs(10)); 4]).await;
    assert!(matches!(result, Err(ModelError::Timeout(_))), "{result:?}");
    assert_eq!(server.attempts(), 4);
}

#[tokio::test]
async fn model_openai_malformed_json_is_invalid_response_without_retry() {
    // A 200 with a broken body was billed and would most likely break again: not retried.
    let (server, result) = run(vec![Fault::Malformed, Fault::Ok(completion_text("unused"))]).await;
    match result {
        Err(ModelError::InvalidResponse(message)) => {
            assert!(message.contains("not JSON"), "{message}")
        }
        other => panic!("expected InvalidResponse, got {other:?}"),
    }
    assert_eq!(server.attempts(), 1);
}

#[tokio::test]
async fn model_openai_context_length_is_typed_and_not_retried() {
    let (server, result) = run(vec![
        Fault::ContextLength,
        Fault::Ok(completion_text("unused")),
    ])
    .await;
    match result {
        Err(ModelError::ContextLengthExceeded(message)) => {
            assert!(message.contains("maximum context length"), "{message}")
        }
        other => panic!("expected ContextLengthExceeded, got {other:?}"),
    }
    assert_eq!(server.attempts(), 1);
}

#[tokio::test]
async fn model_openai_401_is_auth_error_without_retry() {
    let (server, result) = run(vec![
        Fault::Unauthorized,
        Fault::Ok(completion_text("unused")),
    ])
    .await;
    match result {
        Err(ModelError::Auth(message)) => {
            assert!(message.contains("Incorrect API key"), "{message}")
        }
        other => panic!("expected Auth, got {other:?}"),
    }
    assert_eq!(server.attempts(), 1);
}

#[tokio::test]
async fn model_openai_unknown_model_and_other_4xx_are_not_retried() {
    let (server, result) = run(vec![Fault::ModelNotFound]).await;
    assert_eq!(
        result.err(),
        Some(ModelError::UnknownModel("gpt-test".into()))
    );
    assert_eq!(server.attempts(), 1);

    let (server, result) = run(vec![
        Fault::BadRequest,
        Fault::Ok(completion_text("unused")),
    ])
    .await;
    assert!(
        matches!(result, Err(ModelError::BadRequest { status: 400, .. })),
        "{result:?}"
    );
    assert_eq!(server.attempts(), 1);
}

#[tokio::test]
async fn model_openai_connection_refused_is_a_transport_error() {
    // Bind and drop a listener: the port is (almost certainly) closed afterwards.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "gpt-test").with_retry(
        RetryPolicy {
            max_retries: 1,
            initial_backoff: Duration::from_millis(5),
            ..Default::default()
        },
    );
    let result = OpenAiModel::new(config)
        .unwrap()
        .chat(ChatRequest::new(conversation()))
        .await;
    assert!(
        matches!(result, Err(ModelError::Transport(_))),
        "{result:?}"
    );
}

fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "get_weather".into(),
            description: "Current weather for a city.".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        },
        ToolDefinition {
            name: "get_time".into(),
            description: "Current time in a timezone.".into(),
            parameters: json!({"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}),
        },
    ]
}

#[tokio::test]
async fn model_openai_tool_call_round_trip() {
    let server = FaultServer::start([
        Fault::Ok(completion_tool_call(
            "call_abc",
            "get_weather",
            r#"{"city":"Oslo"}"#,
        )),
        Fault::Ok(completion_text("It is sunny in Oslo.")),
    ])
    .await;
    let model = model(&server);
    let mut messages = vec![ChatMessage::user("Weather in Oslo?")];
    let request = ChatRequest {
        messages: messages.iter().cloned().map(Into::into).collect(),
        tools: tools(),
        tool_choice: ToolChoice::Named("get_weather".into()),
        temperature: Some(0.0),
        max_tokens: Some(100),
        ..ChatRequest::default()
    };
    let response = model.chat(request).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls = response.message.calls().to_vec();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].function.name.as_str()),
        ("call_abc", "get_weather")
    );
    assert_eq!(calls[0].function.arguments, r#"{"city":"Oslo"}"#);

    let sent = &server.requests()[0];
    assert_eq!(sent["tools"][0], tools()[0].to_openai_json());
    assert_eq!(sent["tools"][1]["function"]["name"], "get_time");
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert_eq!(sent["max_tokens"], 100);

    // Second turn: the call and its result go back in the wire shape.
    messages.push(response.message.clone());
    messages.push(ChatMessage::tool_result("call_abc", "sunny, 21 °C"));
    let request = ChatRequest {
        messages: messages.iter().cloned().map(Into::into).collect(),
        tools: tools(),
        ..Default::default()
    };
    let response = model.chat(request).await.unwrap();
    assert_eq!(response.message.text(), "It is sunny in Oslo.");
    let sent = &server.requests()[1];
    assert_eq!(sent["messages"][1]["tool_calls"][0]["id"], "call_abc");
    assert_eq!(sent["messages"][1]["tool_calls"][0]["type"], "function");
    assert_eq!(
        sent["messages"][2],
        json!({"role": "tool", "content": "sunny, 21 °C", "tool_call_id": "call_abc"})
    );
    assert_eq!(sent["tool_choice"], "auto");
}

#[test]
fn an_https_client_builds_with_the_one_crypto_provider() {
    // reqwest is built without a crypto provider (aws-lc-rs is installed by troupe): building the
    // provider's client must not panic, with no other client built before it in this test.
    let config = OpenAiConfig::new("https://api.example.invalid/v1", "gpt-test");
    assert!(OpenAiModel::new(config).is_ok());
}
