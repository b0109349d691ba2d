//! The Anthropic provider through troupe's agents, against a server speaking the real Messages
//! wire format (troupe-models' `anthropic_server`): a tool use round trip, the `chat` span's
//! cache counts, and a typed ask answered through a forced tool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use troupe_agents::traced_chat;
use troupe_agents::{AgentSpec, spawn_agent};
use troupe_protocol::trace::semconv;
use troupe_protocol::{ChatMessage, ChatRequest};
use troupe_runtime::{Team, TeamConfig};

use super::support::anthropic_server::{AnthropicServer, Reply, model};
use super::support::scoped_tracing::scoped_tracing;
use super::support::tools::shout_tools;

#[tokio::test]
async fn model_anthropic_tool_use_round_trip_through_an_agent() {
    let server = AnthropicServer::start([
        Reply::call("toolu_1", "shout", r#"{"word": "oslo"}"#),
        Reply::text("It is OSLO."),
    ])
    .await;
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let spec = AgentSpec::new("claude", Arc::new(model(&server)))
        .instructions("Use tools.")
        .tools(shout_tools());
    spawn_agent(&team, spec).await.unwrap();
    let answer = team.ask("claude", "shout oslo").await.unwrap();
    assert_eq!(answer, "It is OSLO.");

    let received = server.received();
    assert_eq!(received.len(), 2);
    let first = &received[0].body;
    assert_eq!(first["tools"][0]["name"], "shout");
    assert_eq!(first["tools"][0]["input_schema"]["type"], "object");
    let second = &received[1].body;
    let messages = second["messages"].as_array().unwrap();
    let assistant = &messages[1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0]["type"], "tool_use");
    assert_eq!(assistant["content"][0]["id"], "toolu_1");
    assert_eq!(assistant["content"][0]["input"], json!({"word": "oslo"}));
    let results = &messages[2];
    assert_eq!(results["role"], "user");
    assert_eq!(results["content"][0]["type"], "tool_result");
    assert_eq!(results["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(results["content"][0]["content"], "OSLO");
    team.shutdown().await;
}

/// The `u64` fields recorded on `chat` spans, one map per span, in the order they opened.
#[derive(Clone, Default)]
struct ChatSpans(Arc<Mutex<Vec<HashMap<String, u64>>>>);

struct Numbers<'a>(&'a mut HashMap<String, u64>);

impl tracing::field::Visit for Numbers<'_> {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().to_string(), value);
    }
    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

impl tracing::Subscriber for ChatSpans {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut spans = self.0.lock().unwrap();
        let mut fields = HashMap::new();
        span.record(&mut Numbers(&mut fields));
        if span.metadata().name() != "chat" {
            // Other spans get ids past the chat spans' range, and are not recorded.
            return tracing::span::Id::from_u64(1 << 40 | (spans.len() as u64 + 1));
        }
        spans.push(fields);
        tracing::span::Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(fields) = spans.get_mut(span.into_u64() as usize - 1) {
            values.record(&mut Numbers(fields));
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn model_anthropic_second_turn_reads_the_cache_and_its_chat_span_says_so() {
    let spans = ChatSpans::default();
    let _tracing = scoped_tracing(spans.clone());
    // A long system prompt, as a real agent has: the part worth caching.
    let system = "You answer questions about European capitals. ".repeat(40);
    let server = AnthropicServer::start([Reply::text("Oslo."), Reply::text("Stockholm.")]).await;
    let model = model(&server);
    let mut conversation = vec![
        ChatMessage::system(system),
        ChatMessage::user("Capital of Norway?"),
    ];
    let first = traced_chat(&model, ChatRequest::new(conversation.clone()), "claude")
        .await
        .unwrap();
    conversation.push(first.message);
    conversation.push(ChatMessage::user("And of Sweden?"));
    let second = traced_chat(&model, ChatRequest::new(conversation), "claude")
        .await
        .unwrap();
    assert_eq!(second.message.text(), "Stockholm.");

    assert_eq!(first.usage.cache_read_input_tokens, 0, "{:?}", first.usage);
    assert!(first.usage.cache_creation_input_tokens > 0);
    // The second request starts with everything the first one marked: it reads all of it.
    let written_first = first.usage.cache_creation_input_tokens;
    assert_eq!(
        second.usage.cache_read_input_tokens, written_first,
        "{:?}",
        second.usage
    );
    assert!(second.usage.input_tokens >= second.usage.cache_read_input_tokens);

    let spans = spans.0.lock().unwrap().clone();
    assert_eq!(spans.len(), 2);
    assert_eq!(
        spans[1].get(semconv::USAGE_CACHE_READ_INPUT_TOKENS),
        Some(&written_first),
        "{spans:?}"
    );
    assert_eq!(
        spans[0].get(semconv::USAGE_CACHE_CREATION_INPUT_TOKENS),
        Some(&written_first)
    );
    assert_eq!(spans[0].get(semconv::USAGE_CACHE_READ_INPUT_TOKENS), None);
    assert_eq!(
        spans[1].get(semconv::USAGE_INPUT_TOKENS),
        Some(&second.usage.input_tokens)
    );
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct City {
    name: String,
    population: u32,
}

#[tokio::test]
async fn model_anthropic_typed_ask_answers_through_a_forced_tool() {
    let server = AnthropicServer::start([Reply::call(
        "toolu_answer",
        "City",
        r#"{"name": "Oslo", "population": 709000}"#,
    )])
    .await;
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(&team, AgentSpec::new("claude", Arc::new(model(&server))))
        .await
        .unwrap();
    let city: City = team
        .ask_typed("claude", "The capital of Norway?")
        .await
        .unwrap();
    assert_eq!(
        city,
        City {
            name: "Oslo".into(),
            population: 709_000
        }
    );
    let body = &server.received()[0].body;
    assert_eq!(body["tools"][0]["name"], "City");
    assert_eq!(
        body["tools"][0]["input_schema"]["properties"]["population"]["type"],
        "integer"
    );
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "City"}));
    team.shutdown().await;
}
