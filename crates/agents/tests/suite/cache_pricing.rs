//! Cached prompt tokens priced at the cache prices, as each provider reports them: Anthropic's
//! `input_tokens` leaves out what was read from or written to the cache, OpenAI's
//! `prompt_tokens` includes its `cached_tokens`. Both arrive in [`Usage`] as the whole prompt
//! with the cached part beside it, so a call is priced once per token either way.

use std::time::Duration;

use troupe_models::{AnthropicConfig, AnthropicModel, RetryPolicy};
use troupe_protocol::{ChatMessage, ChatModel, ChatRequest, Usage};
use troupe_protocol::{ModelPrice, Spend};

use super::support::anthropic_server::{AnthropicServer, Reply};
use super::support::model_fault_server::model as openai_model;
use super::support::model_fault_server::{Fault, FaultServer, completion_text};

/// Anthropic's list prices for a Sonnet-class model: reads 0.1×, 5-minute writes 1.25× input.
fn anthropic_price() -> ModelPrice {
    ModelPrice {
        cache_read_per_million: Some(0.3),
        cache_write_per_million: Some(3.75),
        ..ModelPrice::new(3.0, 15.0)
    }
}

/// The same call with no cache at all: every prompt token billed as input.
fn uncached(usage: Usage) -> Usage {
    Usage {
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        ..usage
    }
}

/// The cost by hand, in millionths: plain input, cache reads, cache writes, output.
fn by_hand(plain: u64, read: u64, written: u64, output: u64, price: ModelPrice) -> u64 {
    (plain as f64 * price.input_per_million
        + read as f64
            * price
                .cache_read_per_million
                .unwrap_or(price.input_per_million)
        + written as f64
            * price
                .cache_write_per_million
                .unwrap_or(price.input_per_million)
        + output as f64 * price.output_per_million)
        .round() as u64
}

#[tokio::test]
async fn cache_pricing_anthropic_a_second_turn_reading_the_cache_costs_less_than_uncached() {
    let server = AnthropicServer::start([Reply::text("Oslo."), Reply::text("Stockholm.")]).await;
    let model = AnthropicModel::new(
        AnthropicConfig::new(&server.base_url, "claude-test")
            .with_api_key("sk-ant-test-key-123456")
            .with_request_timeout(Duration::from_millis(1000))
            .with_retry(RetryPolicy {
                max_retries: 0,
                ..RetryPolicy::default()
            }),
    )
    .unwrap();
    let system = "You answer questions about European capitals. ".repeat(40);
    let mut conversation = vec![
        ChatMessage::system(system),
        ChatMessage::user("Capital of Norway?"),
    ];
    let first = model
        .chat(ChatRequest::new(conversation.clone()))
        .await
        .unwrap();
    conversation.push(first.message);
    conversation.push(ChatMessage::user("And of Sweden?"));
    let second = model.chat(ChatRequest::new(conversation)).await.unwrap();
    let price = anthropic_price();

    // The first turn writes the cache: dearer than uncached (1.25× on what it wrote).
    let first_usage = first.usage;
    assert!(
        first_usage.cache_creation_input_tokens > 0,
        "{first_usage:?}"
    );
    assert!(
        Spend::of(first_usage, Some(price)).cost_micros
            > Spend::of(uncached(first_usage), Some(price)).cost_micros
    );
    // The second reads it: cheaper than the same call uncached.
    let usage = second.usage;
    let (read, written) = (
        usage.cache_read_input_tokens,
        usage.cache_creation_input_tokens,
    );
    assert!(read > 0, "{usage:?}");
    let cached = Spend::of(usage, Some(price));
    let plain = Spend::of(uncached(usage), Some(price));
    assert!(
        cached.cost_micros < plain.cost_micros,
        "{cached} vs {plain}"
    );
    // Each prompt token priced once: Anthropic's own `input_tokens` (the tokens after the last
    // cache mark) at the input price, the cached ones at theirs.
    let after_last_mark = usage.input_tokens - read - written;
    assert_eq!(
        cached.cost_micros,
        by_hand(after_last_mark, read, written, usage.output_tokens, price)
    );
    assert_eq!(cached.input_tokens, usage.input_tokens);
}

#[tokio::test]
async fn cache_pricing_openai_cached_prompt_tokens_are_not_billed_twice() {
    // OpenAI: 1200 prompt tokens, 1024 of them cached (cached input at 0.5× here).
    let mut body = completion_text("Oslo.");
    body["usage"] = serde_json::json!({
        "prompt_tokens": 1200,
        "completion_tokens": 7,
        "total_tokens": 1207,
        "prompt_tokens_details": {"cached_tokens": 1024}
    });
    let server = FaultServer::start([Fault::Ok(body)]).await;
    let response = openai_model(&server)
        .chat(ChatRequest::new(vec![ChatMessage::user(
            "Capital of Norway?",
        )]))
        .await
        .unwrap();
    let usage = response.usage;
    assert_eq!(
        (usage.input_tokens, usage.cache_read_input_tokens),
        (1200, 1024)
    );
    let price = ModelPrice {
        cache_read_per_million: Some(1.25),
        ..ModelPrice::new(2.5, 10.0)
    };
    let cached = Spend::of(usage, Some(price));
    // 176 × 2.5 + 1024 × 1.25 + 7 × 10: the cached tokens are not also billed as input.
    assert_eq!(cached.cost_micros, 1790);
    assert_eq!(cached.cost_micros, by_hand(176, 1024, 0, 7, price));
    assert!(cached.cost_micros < Spend::of(uncached(usage), Some(price)).cost_micros);
    // Without a cache price the cached tokens cost what input costs.
    assert_eq!(
        Spend::of(usage, Some(ModelPrice::new(2.5, 10.0))).cost_micros,
        Spend::of(uncached(usage), Some(price)).cost_micros
    );
}
