//! The OpenAI-compatible provider's streamed answers, in the real wire format (server-sent
//! `chat.completion.chunk` events), against the fault-injecting server.

use std::time::{Duration, Instant};

use futures::StreamExt;
use troupe_models::{OpenAiConfig, OpenAiModel, RetryPolicy};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, FinishReason, ModelDelta, ModelError,
    ResponseAssembler, Usage, WireValue,
};

use super::support::model_fault_server::{
    Fault, FaultServer, SSE_DONE, chunk_call_arguments, chunk_call_start, chunk_finish, chunk_role,
    chunk_text, chunk_usage, completion_text, model, split_at, sse, sse_body,
};

fn request() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("What is the capital of Norway?")])
}

/// Every delta of one streamed call (stopping at the first error), and that error.
async fn stream(server: &FaultServer) -> (Vec<ModelDelta>, Option<ModelError>) {
    let mut stream = match model(server).chat_stream(request()).await {
        Ok(stream) => stream,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut deltas = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(delta) => deltas.push(delta),
            Err(e) => return (deltas, Some(e)),
        }
    }
    (deltas, None)
}

fn assemble(deltas: &[ModelDelta]) -> ChatResponse {
    let mut assembler = ResponseAssembler::new();
    for delta in deltas {
        assembler.push(delta).unwrap();
    }
    assembler.finish().unwrap()
}

fn texts(deltas: &[ModelDelta]) -> Vec<&str> {
    deltas
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn model_openai_stream_text_split_inside_a_character_arrives_whole_with_usage() {
    let body = sse_body(&[
        chunk_role(),
        chunk_text("Oslo "),
        chunk_text("✓ — "),
        chunk_text("déjà vu."),
        chunk_finish("stop"),
        chunk_usage(42, 7),
    ]);
    // Cut the body inside the 3-byte "✓", inside the 2-byte "é", and inside a `data:` prefix.
    let check = body.windows(3).position(|w| w == "✓".as_bytes()).unwrap();
    let e_acute = body.windows(2).position(|w| w == "é".as_bytes()).unwrap();
    let data = body.windows(5).position(|w| w == b"data:").unwrap() + 2;
    let mut offsets = vec![data, check + 1, check + 2, e_acute + 1];
    offsets.sort_unstable();
    let server = FaultServer::start([Fault::Stream(split_at(&body, &offsets))]).await;

    let (deltas, error) = stream(&server).await;
    assert_eq!(error, None);
    assert_eq!(texts(&deltas), ["Oslo ", "✓ — ", "déjà vu."]);
    assert_eq!(
        deltas[deltas.len() - 2..],
        [
            ModelDelta::Finished(FinishReason::Stop),
            ModelDelta::Usage(Usage {
                input_tokens: 42,
                output_tokens: 7,
                ..Default::default()
            }),
        ]
    );
    let response = assemble(&deltas);
    assert_eq!(response.message.text(), "Oslo ✓ — déjà vu.");
    let sent = &server.requests()[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn model_openai_stream_tool_arguments_split_mid_string_are_joined() {
    let body = sse_body(&[
        chunk_role(),
        chunk_call_start(0, "call_abc", "get_weather", ""),
        chunk_call_arguments(0, r#"{"city": "Os"#),
        chunk_call_arguments(0, r#"lo, Nor"#),
        chunk_call_arguments(0, r#"way"}"#),
        chunk_finish("tool_calls"),
        chunk_usage(80, 12),
    ]);
    // Also cut the network reads inside an argument fragment's JSON string.
    let inside = body.windows(3).position(|w| w == b"Nor").unwrap() + 1;
    let server = FaultServer::start([Fault::Stream(split_at(&body, &[inside]))]).await;
    let response = model(&server).chat(request()).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls = response.message.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].function.name.as_str()),
        ("call_abc", "get_weather")
    );
    assert_eq!(calls[0].function.arguments, r#"{"city": "Oslo, Norway"}"#);
    assert_eq!(response.usage.output_tokens, 12);
}

#[tokio::test]
async fn model_openai_stream_parallel_tool_calls_interleaved_by_index() {
    let body = sse_body(&[
        chunk_role(),
        chunk_call_start(0, "call_a", "get_weather", r#"{"ci"#),
        chunk_call_start(1, "call_b", "get_time", r#"{"tz""#),
        chunk_call_arguments(0, r#"ty":"Oslo"}"#),
        chunk_call_arguments(1, r#":"CET"}"#),
        chunk_finish("tool_calls"),
    ]);
    let server = FaultServer::start([Fault::Stream(vec![body])]).await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(error, None);
    let response = assemble(&deltas);
    let calls: Vec<_> = response
        .message
        .calls()
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.function.name.as_str(),
                c.function.arguments.as_str(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "get_weather", r#"{"city":"Oslo"}"#),
            ("call_b", "get_time", r#"{"tz":"CET"}"#),
        ]
    );
}

#[tokio::test]
async fn model_openai_stream_cut_after_a_delta_is_a_typed_error_and_not_retried() {
    let partial = [
        sse(&chunk_role()),
        sse(&chunk_text("Os")),
        b"data: {\"choi".to_vec(),
    ];
    let server = FaultServer::start([
        Fault::StreamThenCut(partial.to_vec()),
        Fault::Stream(vec![sse_body(&[
            chunk_text("unused"),
            chunk_finish("stop"),
        ])]),
    ])
    .await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(texts(&deltas), ["Os"]);
    assert!(
        matches!(&error, Some(ModelError::Transport(m)) if m.contains("broke off")),
        "{error:?}"
    );
    assert_eq!(
        server.attempts(),
        1,
        "a stream that yielded a delta was retried"
    );
    // The collected form fails the same way.
    let server = FaultServer::start([
        Fault::StreamThenCut(partial.to_vec()),
        Fault::Stream(vec![sse_body(&[
            chunk_text("unused"),
            chunk_finish("stop"),
        ])]),
    ])
    .await;
    let result = model(&server).chat(request()).await;
    assert!(
        matches!(result, Err(ModelError::Transport(_))),
        "{result:?}"
    );
    assert_eq!(server.attempts(), 1);
}

#[tokio::test]
async fn model_openai_stream_cut_before_the_first_delta_is_retried() {
    let server = FaultServer::start([
        // Only the role chunk (no delta) and half an event, then the cut.
        Fault::StreamThenCut(vec![sse(&chunk_role()), b"data: {\"id\"".to_vec()]),
        Fault::Stream(vec![sse_body(&[chunk_text("Oslo."), chunk_finish("stop")])]),
    ])
    .await;
    let response = model(&server).chat(request()).await.unwrap();
    assert_eq!(response.message.text(), "Oslo.");
    assert_eq!(server.attempts(), 2);
}

#[tokio::test]
async fn model_openai_stream_429_before_the_stream_is_retried() {
    let server = FaultServer::start([
        Fault::RateLimited {
            retry_after: Some("0"),
        },
        Fault::Stream(vec![sse_body(&[chunk_text("Oslo."), chunk_finish("stop")])]),
    ])
    .await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(error, None);
    assert_eq!(texts(&deltas), ["Oslo."]);
    assert_eq!(server.attempts(), 2);
}

#[tokio::test]
async fn model_openai_stream_a_whole_json_answer_is_accepted_as_deltas() {
    let server = FaultServer::start([Fault::Ok(completion_text("Oslo."))]).await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(error, None);
    assert_eq!(
        deltas,
        [
            ModelDelta::Text("Oslo.".into()),
            ModelDelta::Usage(Usage {
                input_tokens: 42,
                output_tokens: 7,
                ..Default::default()
            }),
            ModelDelta::Finished(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn model_openai_stream_a_streamed_refusal_is_kept_in_the_message() {
    let refusal = |piece: &str| {
        let mut chunk = chunk_text("");
        chunk["choices"][0]["delta"] = serde_json::json!({"refusal": piece});
        chunk
    };
    let server = FaultServer::start([Fault::Stream(vec![sse_body(&[
        chunk_role(),
        refusal("I can't "),
        refusal("help with that."),
        chunk_finish("stop"),
    ])])])
    .await;
    let response = model(&server)
        .chat(ChatRequest::new(vec![ChatMessage::user("?")]))
        .await
        .unwrap();
    assert_eq!(
        response
            .message
            .extra
            .get("refusal")
            .and_then(WireValue::as_str),
        Some("I can't help with that.")
    );
}

#[tokio::test]
async fn model_openai_stream_ends_at_done_even_if_the_connection_stays_open() {
    // Comments (keep-alives), CRLF line ends, then [DONE]; the server then keeps the
    // connection open and silent: the answer is complete at [DONE], not at a timeout.
    let mut body = b": keep-alive\r\n\r\n".to_vec();
    body.extend(sse(&chunk_text("Oslo.")).iter().flat_map(|b| {
        if *b == b'\n' {
            vec![b'\r', b'\n']
        } else {
            vec![*b]
        }
    }));
    body.extend(sse(&chunk_finish("stop")));
    body.extend_from_slice(SSE_DONE);
    body.extend(sse(&chunk_text(" (after the end)")));
    let server = FaultServer::start([Fault::StreamThenStall(vec![body])]).await;
    let started = Instant::now();
    let response = model(&server).chat(request()).await.unwrap();
    assert_eq!(response.message.text(), "Oslo.");
    assert!(
        started.elapsed() < Duration::from_millis(450),
        "waited for more after [DONE]"
    );
}

#[tokio::test]
async fn model_openai_stream_done_before_the_finish_is_an_error() {
    let server = FaultServer::start([Fault::Stream(vec![
        sse(&chunk_text("Os")),
        SSE_DONE.to_vec(),
    ])])
    .await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(texts(&deltas), ["Os"]);
    assert!(
        matches!(&error, Some(ModelError::InvalidResponse(m)) if m.contains("[DONE] before")),
        "{error:?}"
    );
}

#[tokio::test]
async fn model_openai_stream_that_ends_without_done_or_finish_is_an_error() {
    let server = FaultServer::start([
        Fault::Stream(vec![sse(&chunk_role()), sse(&chunk_text("Os"))]),
        Fault::Stream(vec![sse_body(&[
            chunk_text("unused"),
            chunk_finish("stop"),
        ])]),
    ])
    .await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(texts(&deltas), ["Os"]);
    assert!(
        matches!(&error, Some(ModelError::InvalidResponse(m)) if m.contains("no finish reason")),
        "{error:?}"
    );
    assert_eq!(server.attempts(), 1);
}

#[tokio::test]
async fn model_openai_stream_timeout_is_per_gap_not_for_the_whole_answer() {
    // Eight chunks 100 ms apart take longer than the 500 ms timeout in all, and are fine.
    let mut chunks: Vec<Vec<u8>> = (0..7).map(|i| sse(&chunk_text(&format!("{i} ")))).collect();
    chunks.push(sse_body(&[chunk_finish("stop")]));
    let server = FaultServer::start([Fault::StreamPaced(chunks, Duration::from_millis(100))]).await;
    let started = Instant::now();
    let response = model(&server).chat(request()).await.unwrap();
    assert!(started.elapsed() > Duration::from_millis(500));
    assert_eq!(response.message.text(), "0 1 2 3 4 5 6 ");
    assert_eq!(server.attempts(), 1);

    // A stream that goes silent mid-answer times out, after its deltas, without a retry.
    let server = FaultServer::start([
        Fault::StreamThenStall(vec![sse(&chunk_text("Os"))]),
        Fault::Stream(vec![sse_body(&[
            chunk_text("unused"),
            chunk_finish("stop"),
        ])]),
    ])
    .await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(texts(&deltas), ["Os"]);
    assert!(matches!(error, Some(ModelError::Timeout(_))), "{error:?}");
    assert_eq!(server.attempts(), 1);
}

/// SSE comments are keep-alives, not progress: a server that sends only them for longer than
/// the request timeout has gone quiet, before the answer (a timeout, retried) and in the
/// middle of it (a timeout, after the deltas before it). What it sends after is never taken.
#[tokio::test]
async fn model_openai_stream_keep_alive_comments_are_not_progress() {
    let keep_alives = |then: Vec<Vec<u8>>| {
        // 100 ms apart for 1.5 s, three times the 500 ms timeout.
        let mut chunks = vec![b": keep-alive\n\n".to_vec(); 15];
        chunks.extend(then);
        Fault::StreamPaced(chunks, Duration::from_millis(100))
    };
    let late = || vec![sse_body(&[chunk_text("too late"), chunk_finish("stop")])];
    let server = FaultServer::start([keep_alives(late())]).await;
    let quick = OpenAiModel::new(
        OpenAiConfig::new(&server.base_url, "gpt-test")
            .with_request_timeout(Duration::from_millis(500))
            .with_retry(RetryPolicy::none()),
    )
    .unwrap();
    let result = quick.chat(request()).await;
    assert!(matches!(result, Err(ModelError::Timeout(_))), "{result:?}");

    // Mid-answer: the delta before the keep-alives is passed on, then the timeout.
    let mut first = vec![sse(&chunk_text("Os"))];
    first.push(b": keep-alive\n\n".to_vec());
    let server = FaultServer::start([Fault::StreamPaced(
        [first, vec![b": keep-alive\n\n".to_vec(); 14], late()].concat(),
        Duration::from_millis(100),
    )])
    .await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(texts(&deltas), ["Os"]);
    assert!(matches!(error, Some(ModelError::Timeout(_))), "{error:?}");
    assert_eq!(server.attempts(), 1);
}

/// Every attempt ends by its deadline, which nothing the server sends moves: events that keep
/// coming within the request timeout, with deltas (the answer ends in a timeout after them,
/// not retried) or without (a timeout before the answer).
#[tokio::test]
async fn model_openai_stream_an_attempt_ends_at_its_deadline_however_much_keeps_coming() {
    let paced = |chunk: serde_json::Value| {
        let mut chunks = vec![sse(&chunk); 30];
        chunks.push(sse_body(&[chunk_finish("stop")]));
        // 100 ms apart, 3 s in all: each well within the 500 ms timeout.
        Fault::StreamPaced(chunks, Duration::from_millis(100))
    };
    let deadline = |server: &FaultServer| {
        OpenAiModel::new(
            OpenAiConfig::new(&server.base_url, "gpt-test")
                .with_request_timeout(Duration::from_millis(500))
                .with_attempt_timeout(Duration::from_secs(1))
                .with_retry(RetryPolicy::none()),
        )
        .unwrap()
    };
    let server = FaultServer::start([paced(chunk_text("more "))]).await;
    let mut stream = deadline(&server).chat_stream(request()).await.unwrap();
    let (mut texts, mut error) = (0, None);
    while let Some(item) = stream.next().await {
        match item {
            Ok(ModelDelta::Text(_)) => texts += 1,
            Ok(delta) => panic!("the answer went on to {delta:?}"),
            Err(e) => error = Some(e),
        }
    }
    assert!((1..30).contains(&texts), "{texts} text deltas");
    assert_eq!(error, Some(ModelError::Timeout(1)));

    // Chunks without deltas (the role, again and again) are events too, but no answer.
    let server = FaultServer::start([paced(chunk_role())]).await;
    let result = deadline(&server).chat(request()).await;
    assert_eq!(result, Err(ModelError::Timeout(1)));
}

#[tokio::test]
async fn model_openai_stream_cached_prompt_tokens_are_the_cache_read() {
    let mut usage = chunk_usage(1200, 7);
    usage["usage"]["prompt_tokens_details"] = serde_json::json!({"cached_tokens": 1024});
    let body = sse_body(&[
        chunk_role(),
        chunk_text("Oslo."),
        chunk_finish("stop"),
        usage,
    ]);
    let server = FaultServer::start([Fault::Stream(vec![body])]).await;
    let (deltas, error) = stream(&server).await;
    assert_eq!(error, None);
    assert_eq!(
        deltas.last(),
        Some(&ModelDelta::Usage(Usage {
            input_tokens: 1200,
            output_tokens: 7,
            cache_read_input_tokens: 1024,
            cache_creation_input_tokens: 0,
        }))
    );
}
