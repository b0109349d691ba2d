//! OTLP metrics (feature `otlp`): the numbers a dashboard wants, read off the spans troupe
//! already opens, so the libraries record nothing twice.
//!
//! [`MetricsLayer`] watches four kinds of span and, when one closes, records into an
//! OpenTelemetry meter:
//!
//! | span | metric |
//! | --- | --- |
//! | `chat` | `gen_ai.client.token.usage` (histogram, per `gen_ai.token.type` input/output) and `gen_ai.client.operation.duration` (histogram, seconds), by agent and model |
//! | `chat` | `gen_ai.client.inference.usage.cache_read.input_tokens` and `gen_ai.client.inference.usage.cache_write.input_tokens` (counters): of the input tokens, those read from and written to the provider's prompt cache, by agent and model |
//! | `chat` | `troupe.spend.cost` (counter, millionths of the prices' currency): what the call cost, as the agent's budget counted it, by agent and model, when the model has a price |
//! | `chat` | `troupe.rate_limit.wait` (histogram, seconds): how long a call under a shared rate limit waited for it; `troupe.rate_limit.holds` (counter): the `Retry-After` answers that held the limit's every caller; by model |
//! | `execute_tool` | `gen_ai.client.operation.duration`, by agent and tool |
//! | `compaction` | `troupe.compactions` and `troupe.compaction.tokens_freed` (counters), by agent and trigger |
//! | `restart` | `troupe.agent.restarts` (counter), by agent, when the agent runs again |
//!
//! Names follow the OpenTelemetry GenAI metric conventions where they exist; the rest are in
//! [`semconv`]. Attributes are names (agents, models, tools, triggers, `error.type`), never
//! message content.

use std::collections::HashMap;
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use troupe_protocol::trace::semconv;

/// The spans metrics are read from.
const MEASURED_SPANS: &[&str] = &["chat", "execute_tool", "compaction", "restart"];

/// The span fields metrics use as attributes or values; others are not kept.
const KEPT_FIELDS: &[&str] = &[
    semconv::OPERATION_NAME,
    semconv::AGENT_NAME,
    semconv::REQUEST_MODEL,
    semconv::TOOL_NAME,
    semconv::ERROR_TYPE,
    semconv::TRIGGER,
    semconv::USAGE_INPUT_TOKENS,
    semconv::USAGE_OUTPUT_TOKENS,
    semconv::USAGE_CACHE_READ_INPUT_TOKENS,
    semconv::USAGE_CACHE_CREATION_INPUT_TOKENS,
    semconv::SPEND_COST_MICROS,
    semconv::RATE_LIMIT_WAITED_MS,
    semconv::RATE_LIMIT_HOLDS,
    semconv::COMPACTION_TOKENS_BEFORE,
    semconv::COMPACTION_TOKENS_AFTER,
    semconv::RESTARTED,
];

/// Whether [`MetricsLayer`] needs to see spans of this callsite.
pub fn is_measured(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.is_span()
        && metadata.target().starts_with("troupe")
        && MEASURED_SPANS.contains(&metadata.name())
}

/// The instruments metrics are recorded into.
#[derive(Debug, Clone)]
struct Instruments {
    token_usage: Histogram<u64>,
    cache_read_tokens: Counter<u64>,
    cache_write_tokens: Counter<u64>,
    operation_duration: Histogram<f64>,
    compactions: Counter<u64>,
    tokens_freed: Counter<u64>,
    restarts: Counter<u64>,
    spend_cost: Counter<u64>,
    rate_limit_wait: Histogram<f64>,
    rate_limit_holds: Counter<u64>,
}

impl Instruments {
    fn new(meter: &Meter) -> Self {
        Instruments {
            token_usage: meter
                .u64_histogram(semconv::METRIC_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Tokens used per model call")
                .build(),
            cache_read_tokens: meter
                .u64_counter(semconv::METRIC_USAGE_CACHE_READ_INPUT_TOKENS)
                .with_unit("{token}")
                .with_description("Input tokens read from the provider's prompt cache")
                .build(),
            cache_write_tokens: meter
                .u64_counter(semconv::METRIC_USAGE_CACHE_WRITE_INPUT_TOKENS)
                .with_unit("{token}")
                .with_description("Input tokens written to the provider's prompt cache")
                .build(),
            operation_duration: meter
                .f64_histogram(semconv::METRIC_OPERATION_DURATION)
                .with_unit("s")
                .with_description("Duration of model calls and tool calls")
                .build(),
            compactions: meter
                .u64_counter(semconv::METRIC_COMPACTIONS)
                .with_description("Compactions run")
                .build(),
            tokens_freed: meter
                .u64_counter(semconv::METRIC_COMPACTION_TOKENS_FREED)
                .with_unit("{token}")
                .with_description("Tokens freed by compactions")
                .build(),
            restarts: meter
                .u64_counter(semconv::METRIC_AGENT_RESTARTS)
                .with_description("Agents restarted by their supervisor")
                .build(),
            spend_cost: meter
                .u64_counter(semconv::METRIC_SPEND_COST)
                .with_unit("{microcurrency}")
                .with_description("Cost of model calls, in millionths of the prices' currency")
                .build(),
            rate_limit_wait: meter
                .f64_histogram(semconv::METRIC_RATE_LIMIT_WAIT)
                .with_unit("s")
                .with_description("Time model calls waited for a shared rate limit")
                .build(),
            rate_limit_holds: meter
                .u64_counter(semconv::METRIC_RATE_LIMIT_HOLDS)
                .with_description("Retry-After answers that held every caller of a rate limit")
                .build(),
        }
    }
}

/// A `tracing` layer that turns closed troupe spans into metrics (see the module docs). Filter
/// it with [`is_measured`] so it sees no other spans.
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    instruments: Instruments,
}

impl MetricsLayer {
    /// A layer recording into instruments made by `meter`.
    pub fn new(meter: &Meter) -> Self {
        MetricsLayer {
            instruments: Instruments::new(meter),
        }
    }
}

/// What a measured span recorded so far, kept in its extensions.
#[derive(Debug)]
struct Measured {
    opened: Instant,
    text: HashMap<&'static str, String>,
    numbers: HashMap<&'static str, u64>,
}

impl Measured {
    fn text(&self, name: &str) -> Option<&str> {
        self.text.get(name).map(String::as_str)
    }

    fn number(&self, name: &str) -> Option<u64> {
        self.numbers.get(name).copied()
    }

    /// `KeyValue`s for those of `names` the span recorded.
    fn attributes(&self, names: &[&'static str]) -> Vec<KeyValue> {
        names
            .iter()
            .filter_map(|&name| Some(KeyValue::new(name, self.text(name)?.to_string())))
            .collect()
    }
}

impl Visit for Measured {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if let Some(name) = kept(field) {
            self.numbers.insert(name, value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let (Some(name), Ok(value)) = (kept(field), u64::try_from(value)) {
            self.numbers.insert(name, value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.record_str(field, if value { "true" } else { "false" });
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(name) = kept(field) {
            self.text.insert(name, value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if let Some(name) = kept(field) {
            self.text.insert(name, format!("{value:?}"));
        }
    }
}

fn kept(field: &Field) -> Option<&'static str> {
    KEPT_FIELDS
        .iter()
        .copied()
        .find(|&name| name == field.name())
}

impl<S> Layer<S> for MetricsLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut measured = Measured {
            opened: Instant::now(),
            text: HashMap::new(),
            numbers: HashMap::new(),
        };
        attrs.record(&mut measured);
        span.extensions_mut().insert(measured);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(measured) = span.extensions_mut().get_mut::<Measured>() {
            values.record(measured);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(measured) = span.extensions_mut().remove::<Measured>() else {
            return;
        };
        self.record(span.name(), &measured);
    }
}

impl MetricsLayer {
    /// A `chat` span's shared rate limit, by model: the limit is the endpoint's, whichever
    /// agent called (a call under none records no wait).
    fn record_rate_limit(&self, span: &Measured) {
        let Some(waited_ms) = span.number(semconv::RATE_LIMIT_WAITED_MS) else {
            return;
        };
        let attributes = span.attributes(&[semconv::REQUEST_MODEL]);
        let i = &self.instruments;
        i.rate_limit_wait
            .record(waited_ms as f64 / 1000.0, &attributes);
        if let Some(holds) = span.number(semconv::RATE_LIMIT_HOLDS) {
            i.rate_limit_holds.add(holds, &attributes);
        }
    }

    fn record(&self, span_name: &str, span: &Measured) {
        let i = &self.instruments;
        match span_name {
            "chat" => {
                let mut attributes = span.attributes(&[
                    semconv::OPERATION_NAME,
                    semconv::AGENT_NAME,
                    semconv::REQUEST_MODEL,
                ]);
                for (field, token_type) in [
                    (semconv::USAGE_INPUT_TOKENS, "input"),
                    (semconv::USAGE_OUTPUT_TOKENS, "output"),
                ] {
                    if let Some(tokens) = span.number(field) {
                        attributes.push(KeyValue::new(semconv::TOKEN_TYPE, token_type));
                        i.token_usage.record(tokens, &attributes);
                        attributes.pop();
                    }
                }
                // Counters beside the histogram, not more `gen_ai.token.type`s: cached tokens
                // are input tokens already, and a sum over the types would count them twice.
                for (field, counter) in [
                    (semconv::USAGE_CACHE_READ_INPUT_TOKENS, &i.cache_read_tokens),
                    (
                        semconv::USAGE_CACHE_CREATION_INPUT_TOKENS,
                        &i.cache_write_tokens,
                    ),
                ] {
                    if let Some(tokens) = span.number(field) {
                        counter.add(tokens, &attributes);
                    }
                }
                if let Some(cost) = span.number(semconv::SPEND_COST_MICROS) {
                    i.spend_cost.add(cost, &attributes);
                }
                self.record_rate_limit(span);
                attributes.extend(span.attributes(&[semconv::ERROR_TYPE]));
                i.operation_duration
                    .record(span.opened.elapsed().as_secs_f64(), &attributes);
            }
            "execute_tool" => {
                let attributes = span.attributes(&[
                    semconv::OPERATION_NAME,
                    semconv::AGENT_NAME,
                    semconv::TOOL_NAME,
                    semconv::ERROR_TYPE,
                ]);
                i.operation_duration
                    .record(span.opened.elapsed().as_secs_f64(), &attributes);
            }
            "compaction" => {
                // A compaction that failed before its report recorded no token counts.
                let (Some(before), Some(after)) = (
                    span.number(semconv::COMPACTION_TOKENS_BEFORE),
                    span.number(semconv::COMPACTION_TOKENS_AFTER),
                ) else {
                    return;
                };
                let attributes = span.attributes(&[semconv::AGENT_NAME, semconv::TRIGGER]);
                i.compactions.add(1, &attributes);
                i.tokens_freed
                    .add(before.saturating_sub(after), &attributes);
            }
            "restart" if span.text(semconv::RESTARTED) == Some("true") => {
                i.restarts.add(1, &span.attributes(&[semconv::AGENT_NAME]));
            }
            _ => {}
        }
    }
}
