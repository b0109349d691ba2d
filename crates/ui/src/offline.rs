//! A finished run, read-only: its trace file's spans told again as the events they stand for,
//! folded by the same reducer as a live team's.

use std::path::Path;

use serde_json::{Map, Value};
use troupe_protocol::trace::semconv;
use troupe_protocol::trace::{SpanLine, TraceLine, read_trace_bytes};
use troupe_protocol::{
    CompactionMode, CompactionReceipt, CompactionReport, Event, EventRecord, TraceId,
};

use crate::config::UiConfig;
use crate::error::UiError;
use crate::feed::Feed;
use crate::server::UiServer;
use crate::source::Source;
use crate::view::View;

/// Serve a finished run's trace file (`TROUPE_TRACE=FILE`) read-only: its agents, their model
/// and tool calls and compactions, as the live view would have shown them. The file is read by
/// the one reader `troupe trace` uses ([`troupe_protocol::trace::read_trace_bytes`]): a line
/// that is not a record is skipped and counted, never the end of the view. Returned beside the
/// server: what to tell the person about such lines (`PATH:LINE: …`, empty when every line
/// read as it stood). Lines that are records but not spans (events) have no place in the view.
///
/// # Errors
/// [`UiError::Trace`] when the file cannot be read; otherwise as [`crate::serve`].
pub async fn serve_trace(
    path: &Path,
    config: UiConfig,
) -> Result<(UiServer, Vec<String>), UiError> {
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|source| UiError::Trace {
            path: path.to_path_buf(),
            source,
        })?;
    let read = read_trace_bytes(&bytes);
    let records = events_of(&read.lines);
    let feed = Feed::new(
        View::new(config.marks, config.history.max(records.len()), true),
        config.viewer_queue,
    );
    for record in records {
        feed.update(|view| view.apply(record));
    }
    let server = UiServer::start(&config, feed, None, Source::Finished(None)).await?;
    Ok((server, read.warnings(path)))
}

/// The events a trace file's spans stand for, in time order.
pub(crate) fn events_of(lines: &[TraceLine]) -> Vec<EventRecord> {
    let mut timed: Vec<(u64, Option<TraceId>, Event)> = Vec::new();
    for line in lines {
        let TraceLine::Span(span) = line else {
            continue;
        };
        let trace = span.trace_id.parse::<TraceId>().ok();
        let (start, end) = (
            span.start_time_unix_nano / 1_000_000,
            span.end_time_unix_nano / 1_000_000,
        );
        for (at, event) in [(start, started(span)), (end, finished(span))] {
            if let Some(event) = event {
                timed.push((at, trace, event));
            }
        }
    }
    // Stable: a span's start stays before its end at the same millisecond.
    timed.sort_by_key(|(at, _, _)| *at);
    timed
        .into_iter()
        .zip(1..)
        .map(|((at_ms, trace_id, event), seq)| EventRecord {
            seq,
            at_ms,
            trace_id,
            event,
        })
        .collect()
}

fn text(attrs: &Map<String, Value>, key: &str) -> Option<String> {
    match attrs.get(key)? {
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn number(attrs: &Map<String, Value>, key: &str) -> Option<f64> {
    match attrs.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn count(attrs: &Map<String, Value>, key: &str) -> usize {
    number(attrs, key).map_or(0, |n| n as usize)
}

fn operation(span: &SpanLine) -> &str {
    span.attributes
        .get(semconv::OPERATION_NAME)
        .and_then(Value::as_str)
        .unwrap_or(&span.name)
}

fn agent(span: &SpanLine) -> Option<String> {
    text(&span.attributes, semconv::AGENT_NAME)
}

fn error(span: &SpanLine) -> Option<String> {
    (span.status == "error")
        .then(|| text(&span.attributes, semconv::ERROR_TYPE).unwrap_or_else(|| "error".to_string()))
}

fn started(span: &SpanLine) -> Option<Event> {
    let a = &span.attributes;
    let agent = agent(span)?;
    Some(match operation(span) {
        "invoke_agent" => Event::RequestStarted { agent },
        "chat" => Event::ModelCallStarted {
            agent,
            model: text(a, semconv::REQUEST_MODEL).unwrap_or_default(),
            messages: 0,
        },
        "execute_tool" => Event::ToolCallStarted {
            agent,
            tool: text(a, semconv::TOOL_NAME).unwrap_or_default(),
            call_id: text(a, semconv::TOOL_CALL_ID).unwrap_or_default(),
        },
        "compaction" => Event::CompactionStarted {
            agent,
            tokens: count(a, semconv::COMPACTION_TOKENS_BEFORE),
            trigger: a
                .get(semconv::TRIGGER)
                .and_then(|t| serde_json::from_value(t.clone()).ok())
                .unwrap_or_default(),
            mode: mode(a),
        },
        _ => return None,
    })
}

fn mode(a: &Map<String, Value>) -> CompactionMode {
    a.get(semconv::COMPACTION_MODE)
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or(CompactionMode::Blocking)
}

fn finished(span: &SpanLine) -> Option<Event> {
    let a = &span.attributes;
    let agent = agent(span)?;
    Some(match operation(span) {
        "invoke_agent" => Event::RequestFinished {
            agent,
            error: error(span),
        },
        "chat" => Event::ModelCallFinished {
            agent,
            model: text(a, semconv::REQUEST_MODEL).unwrap_or_default(),
            input_tokens: count(a, semconv::USAGE_INPUT_TOKENS) as u64,
            output_tokens: count(a, semconv::USAGE_OUTPUT_TOKENS) as u64,
            ms: span.duration_ms as u64,
            error: error(span),
        },
        "execute_tool" => Event::ToolCallFinished {
            agent,
            tool: text(a, semconv::TOOL_NAME).unwrap_or_default(),
            call_id: text(a, semconv::TOOL_CALL_ID).unwrap_or_default(),
            is_error: span.status == "error",
            ms: span.duration_ms as u64,
        },
        "compaction" => match error(span) {
            Some(reason) => Event::CompactionFailed {
                agent,
                reason,
                mode: mode(a),
            },
            None => Event::CompactionFinished {
                agent,
                report: Box::new(report(span)),
                mode: mode(a),
            },
        },
        _ => return None,
    })
}

/// What of a compaction's report its span kept.
fn report(span: &SpanLine) -> CompactionReport {
    let a = &span.attributes;
    let receipt = a
        .contains_key(semconv::COMPACTION_RECEIPT_NET_SAVING)
        .then(|| CompactionReceipt {
            tokens_before: count(a, semconv::COMPACTION_TOKENS_BEFORE),
            tokens_after: count(a, semconv::COMPACTION_TOKENS_AFTER),
            cached_prefix_kept: count(a, semconv::COMPACTION_RECEIPT_CACHED_PREFIX_KEPT),
            rebilled_tokens: count(a, semconv::COMPACTION_RECEIPT_TOKENS_REBILLED),
            summarizer_billed: number(a, semconv::COMPACTION_RECEIPT_SUMMARIZER_BILLED)
                .unwrap_or(0.0),
            expected_turns: number(a, semconv::COMPACTION_RECEIPT_EXPECTED_TURNS).unwrap_or(0.0),
            net_saving: number(a, semconv::COMPACTION_RECEIPT_NET_SAVING).unwrap_or(0.0),
            pricing: text(a, semconv::COMPACTION_RECEIPT_PRICING).unwrap_or_default(),
        });
    CompactionReport {
        tokens_before: count(a, semconv::COMPACTION_TOKENS_BEFORE),
        tokens_after: count(a, semconv::COMPACTION_TOKENS_AFTER),
        target_tokens: count(a, semconv::COMPACTION_TARGET),
        reason: text(a, semconv::COMPACTION_REASON).unwrap_or_default(),
        duration_ms: span.duration_ms,
        receipt,
        ..CompactionReport::default()
    }
}
