//! The embedded local model, on the real default weights (`support::local`): each behaviour
//! checked once, on short prompts and few tokens.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use troupe_models::{LocalModel, LocalModelConfig};
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, FinishReason, ModelDelta, ModelError, RequestPriority,
    ResponseAssembler, ToolChoice, ToolDefinition,
};

use super::support::local::{LIGHTHOUSE, engine, model, serial};

#[tokio::test]
async fn model_local_summarises_a_paragraph_in_one_sentence() {
    // Its words are checked: on the serial engine the greedy answer does not depend on which
    // other tests' sequences share a batch (on the shared one it once came out two sentences).
    let model = serial().await;
    let words = LIGHTHOUSE.split_whitespace().count();
    assert!(
        (250..=350).contains(&words),
        "the paragraph has {words} words"
    );
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system("You summarise texts. Answer with exactly one sentence.").into(),
            ChatMessage::user(format!(
                "{LIGHTHOUSE}\n\nSummarise the text above in one sentence."
            ))
            .into(),
        ],
        max_tokens: Some(80),
        ..Default::default()
    };
    let started = Instant::now();
    let response = model.chat(request).await.unwrap();
    let summary = response.message.text();
    eprintln!("summary ({:?}): {summary}", started.elapsed());
    assert!(!summary.trim().is_empty());
    let sentences = summary
        .trim()
        .trim_end_matches(['.', '!', '?'])
        .matches(['.', '!', '?']);
    assert_eq!(sentences.count(), 0, "more than one sentence: {summary}");
    assert_eq!(
        response.finish_reason,
        FinishReason::Stop,
        "cut off: {summary}"
    );
    let lower = summary.to_lowercase();
    let key_terms = [
        "lighthouse",
        "elias",
        "keeper",
        "gull rock",
        "island",
        "storm",
        "lamp",
        "ship",
        "reef",
        "trawler",
        "fishermen",
    ];
    assert!(
        key_terms.iter().any(|t| lower.contains(t)),
        "no key term in: {summary}"
    );
    assert!(response.usage.input_tokens > 300, "{:?}", response.usage);
    assert!(response.usage.output_tokens > 0);
}

fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "get_weather".into(),
            description: "Get the current weather for a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"]
            }),
        },
        ToolDefinition {
            name: "send_email".into(),
            description: "Send an email.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "subject": {"type": "string"},
                    "urgent": {"type": "boolean"}
                },
                "required": ["to", "subject"]
            }),
        },
    ]
}

/// The arguments are an object with exactly the schema's properties, required ones present,
/// each of the declared type.
fn assert_matches_schema(arguments: &str, schema: &Value) {
    let args: Value =
        serde_json::from_str(arguments).unwrap_or_else(|e| panic!("{e}: {arguments}"));
    let args = args
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {arguments}"));
    let properties = schema["properties"].as_object().unwrap();
    for key in args.keys() {
        assert!(
            properties.contains_key(key),
            "unexpected argument `{key}` in {arguments}"
        );
    }
    for required in schema["required"].as_array().unwrap() {
        assert!(
            args.contains_key(required.as_str().unwrap()),
            "missing {required} in {arguments}"
        );
    }
    for (key, value) in args {
        let ok = match properties[key]["type"].as_str().unwrap() {
            "string" => value.is_string(),
            "boolean" => value.is_boolean(),
            other => panic!("type {other} not covered"),
        };
        assert!(ok, "`{key}` has the wrong type in {arguments}");
    }
}

async fn forced_call(choice: ToolChoice, question: &str) -> troupe_protocol::ToolCall {
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system("You are a helpful assistant.").into(),
            ChatMessage::user(question).into(),
        ],
        tools: tools(),
        tool_choice: choice,
        ..Default::default()
    };
    let response = model().await.chat(request).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls = response.message.calls();
    assert_eq!(calls.len(), 1, "{:?}", response.message);
    eprintln!(
        "call: {} {}",
        calls[0].function.name, calls[0].function.arguments
    );
    calls[0].clone()
}

#[tokio::test]
async fn model_local_required_tool_call_parses_and_picks_the_right_tool() {
    let call = forced_call(
        ToolChoice::Required,
        "What is the weather like in Paris today?",
    )
    .await;
    let tool = tools()
        .into_iter()
        .find(|t| t.name == call.function.name)
        .unwrap();
    assert_matches_schema(&call.function.arguments, &tool.parameters);
    assert_eq!(call.function.name, "get_weather");
}

#[tokio::test]
async fn model_local_auto_calls_after_user_and_answers_after_result() {
    let model = model().await;
    let mut request = ChatRequest {
        messages: vec![ChatMessage::user("What's the weather in Oslo?").into()],
        tools: tools(),
        ..Default::default()
    };
    let first = model.chat(request.clone()).await.unwrap();
    assert!(first.message.has_tool_calls(), "{:?}", first.message);
    let id = first.message.calls()[0].id.clone();
    request.messages.push(first.message.into());
    request
        .messages
        .push(ChatMessage::tool_result(id, "Sunny, 21 degrees.").into());
    request.max_tokens = Some(40);
    let second = model.chat(request).await.unwrap();
    assert!(!second.message.has_tool_calls());
    assert!(!second.message.text().is_empty());
}

#[tokio::test]
async fn model_local_reports_its_window_and_counts_tokens() {
    let model = model().await;
    let info = model.info();
    assert_eq!(
        info.context_window, 8192,
        "SmolLM2 trains on 8192 and the cap is 8192"
    );
    assert!(info.supports_tools);
    let short = model.count_tokens("Hello, world!").unwrap();
    let long = model.count_tokens(LIGHTHOUSE).unwrap();
    assert!((2..=6).contains(&short), "{short}");
    assert!(long > 250 && long < 600, "{long}");
    assert_eq!(model.count_tokens("").unwrap(), 0);
}

#[tokio::test]
async fn model_local_concurrent_requests_are_queued_and_all_answered() {
    let model = Arc::new(model().await.clone());
    let tasks: Vec<_> = (0..3)
        .map(|i| {
            let model = Arc::clone(&model);
            tokio::spawn(async move {
                let request = ChatRequest {
                    messages: vec![ChatMessage::user(format!("Count to {}.", i + 2)).into()],
                    max_tokens: Some(16),
                    ..Default::default()
                };
                model.chat(request).await
            })
        })
        .collect();
    for task in tasks {
        let response = task.await.unwrap().unwrap();
        assert!(response.usage.output_tokens > 0);
    }
}

#[tokio::test]
async fn model_local_prompt_over_the_window_is_context_length_exceeded() {
    let small = engine(512, LocalModelConfig::default().parallel).await;
    assert_eq!(small.info().context_window, 512);
    let request = ChatRequest::new(vec![ChatMessage::user(format!(
        "{LIGHTHOUSE}\n\n{LIGHTHOUSE}"
    ))]);
    let result = small.chat(request).await;
    assert!(
        matches!(result, Err(ModelError::ContextLengthExceeded(_))),
        "{result:?}"
    );
}

/// Every delta of a streamed answer to `request`.
async fn stream_deltas(model: &LocalModel, request: ChatRequest) -> Vec<ModelDelta> {
    let mut stream = model.chat_stream(request).await.unwrap();
    let mut deltas = Vec::new();
    while let Some(delta) = stream.next().await {
        deltas.push(delta.unwrap());
    }
    deltas
}

#[tokio::test]
async fn model_local_streams_text_in_several_deltas_that_collect_to_the_whole_answer() {
    let model = serial().await;
    let request = ChatRequest {
        messages: vec![ChatMessage::user("Name three colours of the rainbow.").into()],
        max_tokens: Some(24),
        temperature: Some(0.0),
        ..Default::default()
    };
    let deltas = stream_deltas(model, request.clone()).await;
    let texts: Vec<&str> = deltas
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        texts.len() >= 2,
        "one delta for a multi-token answer: {texts:?}"
    );
    assert!(
        matches!(deltas.last(), Some(ModelDelta::Finished(_))),
        "{deltas:?}"
    );
    let mut assembler = ResponseAssembler::new();
    for delta in &deltas {
        assembler.push(delta).unwrap();
    }
    let streamed = assembler.finish().unwrap();
    assert_eq!(streamed.message.text(), texts.concat());
    assert!(streamed.usage.output_tokens >= 2);
    // The same request answered whole (greedy: deterministic) is the same answer.
    let whole = model.chat(request).await.unwrap();
    assert_eq!(whole, streamed);
}

/// A call forced by name streams as one start and its arguments, then the usage and the finish,
/// and collects to one call of that tool whose arguments match its schema. (`chat` collects this
/// same stream with the same assembler, so one answer checks both forms.)
#[tokio::test]
async fn model_local_named_tool_call_streams_as_one_start_and_its_arguments_and_matches_the_schema()
{
    let model = model().await;
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system("You are a helpful assistant.").into(),
            ChatMessage::user("What's the weather in Paris?").into(),
        ],
        tools: tools(),
        tool_choice: ToolChoice::Named("get_weather".into()),
        ..Default::default()
    };
    let deltas = stream_deltas(model, request).await;
    assert!(
        matches!(&deltas[..], [
            ModelDelta::ToolCallStarted { index: 0, name, .. },
            ModelDelta::ToolCallArguments { index: 0, .. },
            ModelDelta::Usage(_),
            ModelDelta::Finished(FinishReason::ToolCalls),
        ] if name == "get_weather"),
        "{deltas:?}"
    );
    let mut assembler = ResponseAssembler::new();
    for delta in &deltas {
        assembler.push(delta).unwrap();
    }
    let response = assembler.finish().unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls = response.message.calls();
    assert_eq!(calls.len(), 1, "{:?}", response.message);
    let call = &calls[0];
    eprintln!("call: {} {}", call.function.name, call.function.arguments);
    assert_eq!(call.function.name, "get_weather");
    assert!(call.id.starts_with("call_local_"));
    assert_matches_schema(&call.function.arguments, &tools()[0].parameters);
}

/// A request its caller stops waiting for stops generating, whether the caller drops a `chat`
/// future or a stream after its first piece, and the model answers the next request. The
/// engine serves one job at a time: the next answer comes only once both dropped jobs have
/// stopped, long before 6000 more tokens could be generated.
#[tokio::test]
async fn model_local_dropped_request_or_stream_stops_generation_and_the_model_answers_next() {
    let model = serial().await;
    let long = ChatRequest {
        messages: vec![ChatMessage::user("Write a very long story about a dragon.").into()],
        max_tokens: Some(6000),
        ..Default::default()
    };
    // A bound, not a timing goal: other tests share the 2-core machine; an uncancelled
    // 6000-token job would hold the engine for minutes.
    let bound = Duration::from_secs(90);
    let cancelled =
        tokio::time::timeout(Duration::from_millis(200), model.chat(long.clone())).await;
    assert!(
        cancelled.is_err(),
        "a 6000-token story should not finish in 200 ms"
    );
    let mut stream = model.chat_stream(long).await.unwrap();
    let first = tokio::time::timeout(bound, stream.next())
        .await
        .expect("the dropped chat kept the model busy");
    assert!(matches!(first, Some(Ok(ModelDelta::Text(_)))), "{first:?}");
    drop(stream);
    let request = ChatRequest {
        messages: vec![ChatMessage::user("Say hello.").into()],
        max_tokens: Some(8),
        ..Default::default()
    };
    let started = Instant::now();
    let response = tokio::time::timeout(bound, model.chat(request))
        .await
        .expect("the dropped stream kept the model busy")
        .unwrap();
    eprintln!("next answer after the drop in {:?}", started.elapsed());
    assert!(response.usage.output_tokens <= 8);
    assert!(!response.message.text().is_empty());
}

#[tokio::test]
async fn model_local_answer_is_the_same_whether_its_prefix_was_cached_or_not() {
    // An engine of its own (engines are shared per path and options): what the cache holds
    // before each call is then this test's doing, not whatever another test ran in between.
    let model = engine(2048, LocalModelConfig::default().parallel).await;
    let ask = |question: &str| ChatRequest {
        messages: vec![
            ChatMessage::system(format!("Answer from this story only.\n\n{LIGHTHOUSE}")).into(),
            ChatMessage::user(question).into(),
        ],
        max_tokens: Some(24),
        temperature: Some(0.0),
        ..Default::default()
    };
    let question = "How many fishermen survived?";
    // Cold: the call before shares nothing past the chat template's opening.
    let unrelated = ChatRequest {
        messages: vec![ChatMessage::user("Name a colour.").into()],
        max_tokens: Some(4),
        temperature: Some(0.0),
        ..Default::default()
    };
    model.chat(unrelated).await.unwrap();
    let cold = model.chat(ask(question)).await.unwrap();
    // Warm: the call before leaves the story's whole system prompt in the KV cache.
    model.chat(ask("What did Elias grow?")).await.unwrap();
    let warm = model.chat(ask(question)).await.unwrap();
    // A reused prefix must be the same prompt: the answer starts alike and is about this
    // question, not the one before (a wrong reuse answers "potatoes and kale"). Not the whole
    // answer byte for byte: decoding 10 new tokens after a cached prefix adds the same numbers
    // in another order than decoding all 357 at once, and greedy decoding flips on a near-tie
    // a few tokens in (measured on this fresh 2,048-token context: identical for 7 words, then
    // apart; on the shared 8,192-token engine it depended on what other tests had run).
    let words = |r: &troupe_protocol::ChatResponse| -> Vec<String> {
        r.message
            .text()
            .split_whitespace()
            .take(5)
            .map(str::to_string)
            .collect()
    };
    assert_eq!(words(&warm), words(&cold), "{warm:?}\n{cold:?}");
    assert_eq!(words(&cold).len(), 5, "{cold:?}");
    assert_eq!(warm.usage, cold.usage);
    for answer in [&warm, &cold] {
        let text = answer.message.text().to_lowercase();
        assert!(!text.contains("potato") && !text.contains("kale"), "{text}");
    }
}

/// When more calls wait than the engine runs at once (here one), an agent's call queued behind
/// a compressor's background call goes first (the running job is not preempted).
/// Deterministic: whatever the worker runs when these are queued, the interactive lane is
/// served before the background one.
#[tokio::test]
async fn model_local_serves_a_later_interactive_call_before_a_queued_background_one() {
    let model = serial().await;
    let ask = |text: &str, priority| ChatRequest {
        messages: vec![ChatMessage::user(text).into()],
        tool_choice: ToolChoice::None,
        temperature: Some(0.0),
        max_tokens: Some(4),
        priority,
        ..ChatRequest::default()
    };
    let finished = std::sync::Mutex::new(Vec::new());
    let call = |name: &'static str, request: ChatRequest| {
        let finished = &finished;
        async move {
            let answer = model.chat(request).await;
            finished.lock().unwrap().push(name);
            answer
        }
    };
    // Queued in this order (each call queues its job on its first poll).
    let (first, background, interactive) = tokio::join!(
        call("first", ask("Say hello.", RequestPriority::Interactive)),
        call("background", ask("Say no.", RequestPriority::Background)),
        call("interactive", ask("Say yes.", RequestPriority::Interactive)),
    );
    for answer in [first, background, interactive] {
        answer.unwrap();
    }
    let finished = finished.into_inner().unwrap();
    let at = |name| finished.iter().position(|n| *n == name).unwrap();
    assert!(at("interactive") < at("background"), "{finished:?}");
}
