//! Spans at the collector: their attributes, one trace per request, no secrets, content only
//! when recorded, setup errors.

use super::*;

#[test]
fn spans_reach_the_collector_with_genai_attributes_and_no_secrets() {
    let collector = start_collector();
    let export = emit_run(&collector.config(false));
    export.flush().unwrap();

    let requests = collector.requests();
    assert!(!requests.is_empty(), "the collector received nothing");
    for (_, body) in &requests {
        let raw = String::from_utf8_lossy(body);
        for secret in [API_KEY, BEARER_TOKEN, "SECRET1234567890"] {
            assert!(!raw.contains(secret), "`{secret}` reached the collector");
        }
        assert!(
            !raw.contains(CONTENT),
            "message content reached the collector"
        );
    }

    let spans = collector.spans();
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    assert!(
        !names.contains(&"connect"),
        "the filter let through {names:?}"
    );
    assert_eq!(spans.len(), 3, "{names:?}");
    assert!(spans.iter().all(|(service, _)| service == "troupe"));

    let agent = find(&spans, "invoke_agent");
    let chat = find(&spans, "chat");
    let tool = find(&spans, "execute_tool");
    // One trace, the runtime's, with the agent as the parent of its model call and tool call.
    assert_eq!(hex(&agent.trace_id), TRACE_ID);
    assert_eq!(chat.trace_id, agent.trace_id);
    assert_eq!(tool.trace_id, agent.trace_id);
    assert!(agent.parent_span_id.is_empty());
    assert_eq!(chat.parent_span_id, agent.span_id);
    assert_eq!(tool.parent_span_id, agent.span_id);
    assert_ne!(chat.span_id, agent.span_id);

    let a = |name: &str| attr(&chat.attributes, name);
    assert_eq!(
        attr(&agent.attributes, "gen_ai.operation.name"),
        Some(AnyValue::StringValue("invoke_agent".into()))
    );
    assert_eq!(
        a("gen_ai.request.model"),
        Some(AnyValue::StringValue("scripted-1".into()))
    );
    assert_eq!(a("gen_ai.usage.input_tokens"), Some(AnyValue::IntValue(42)));
    assert_eq!(a("gen_ai.usage.output_tokens"), Some(AnyValue::IntValue(7)));
    let redacted = Some(AnyValue::StringValue("[redacted]".into()));
    assert_eq!(a("api_key"), redacted);
    assert_eq!(a("authorization"), redacted);
    assert_eq!(
        a("troupe.note"),
        Some(AnyValue::StringValue(
            "retried with Bearer [redacted]".into()
        ))
    );
    assert_eq!(a("gen_ai.input.messages"), None);

    // The warning inside the chat span is a span event, redacted the same way.
    let event = chat.events.first().expect("the warning event");
    assert_eq!(event.name, "rate limited; retrying with key [redacted]");
    assert_eq!(attr(&event.attributes, "api_key"), redacted);

    // `error.type` marks the span failed, as it does in the trace file.
    let status = tool.status.as_ref().expect("a status");
    assert_eq!(status.code, SpanStatus::Error as i32);
    export.shutdown().unwrap();
}

#[test]
fn a_team_run_is_one_trace_in_the_collector() {
    let collector = start_collector();
    let (layer, export) = otlp_layer::<Registry>(&collector.config(false))
        .unwrap()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    let answer = tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_scripted_team())
    });
    assert_eq!(answer, "Crumb & Co.: fresh every morning.");
    export.flush().unwrap();

    let spans = collector.spans();
    let count = |name: &str| spans.iter().filter(|(_, s)| s.name == name).count();
    assert_eq!(count("invoke_agent"), 3, "coordinator, namer, copywriter");
    assert_eq!(count("chat"), 4);
    assert_eq!(count("execute_tool"), 2);
    // The workers' agents run in actors of their own, yet the request is one trace: the
    // runtime's, which every `invoke_agent` span names.
    let traces: std::collections::BTreeSet<String> =
        spans.iter().map(|(_, s)| hex(&s.trace_id)).collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    for (_, agent) in spans.iter().filter(|(_, s)| s.name == "invoke_agent") {
        assert_eq!(
            attr(&agent.attributes, "troupe.trace_id").and_then(|v| str_value(&v)),
            traces.first().cloned()
        );
    }
    for (_, chat) in spans.iter().filter(|(_, s)| s.name == "chat") {
        let parent = spans
            .iter()
            .find(|(_, s)| s.span_id == chat.parent_span_id)
            .map(|(_, s)| s.name.as_str());
        assert_eq!(parent, Some("invoke_agent"));
        assert!(matches!(
            attr(&chat.attributes, "gen_ai.usage.input_tokens"),
            Some(AnyValue::IntValue(n)) if n > 0
        ));
        assert!(matches!(
            attr(&chat.attributes, "gen_ai.usage.output_tokens"),
            Some(AnyValue::IntValue(n)) if n > 0
        ));
    }
    export.shutdown().unwrap();
}

#[test]
fn message_content_is_exported_only_when_recorded() {
    let collector = start_collector();
    let config = TelemetryConfig {
        service_name: Some("bakery-bot".to_string()),
        ..collector.config(true)
    };
    let export = emit_run(&config);
    export.shutdown().unwrap();

    let spans = collector.spans();
    assert!(spans.iter().all(|(service, _)| service == "bakery-bot"));
    let chat = find(&spans, "chat");
    let messages = attr(&chat.attributes, "gen_ai.input.messages")
        .and_then(|v| str_value(&v))
        .expect("content recorded");
    assert!(messages.contains(CONTENT), "{messages}");
    // Secrets stay out even when content is recorded.
    for (_, body) in collector.requests() {
        let raw = String::from_utf8_lossy(&body);
        assert!(!raw.contains(API_KEY) && !raw.contains(BEARER_TOKEN));
    }
}

#[test]
fn a_bad_endpoint_is_a_setup_error_naming_it() {
    let config = TelemetryConfig {
        otlp_endpoint: Some("not a url".to_string()),
        ..TelemetryConfig::default()
    };
    let err = match otlp_layer::<Registry>(&config) {
        Err(err) => err,
        Ok(_) => panic!("a malformed endpoint was accepted"),
    };
    assert!(matches!(err, TelemetryError::Otlp { .. }), "{err:?}");
    assert!(err.to_string().contains("not a url"), "{err}");
}

#[test]
fn no_endpoint_no_layer() {
    let config = TelemetryConfig::default();
    assert!(otlp_layer::<Registry>(&config).unwrap().is_none());
}

#[test]
fn init_from_env_exports_when_the_guard_drops() {
    let collector = start_collector();
    run_init_child(&collector, &[]);

    // Metrics go to `/v1/metrics` under the same base endpoint.
    let key = (
        "gen_ai.client.token.usage".to_string(),
        pairs(&[("gen_ai.token.type", "input")]),
    );
    assert_eq!(
        collector.metrics().get(&key),
        Some(&Point::Histogram { count: 1, sum: 3.0 })
    );
    let spans = collector.spans();
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(spans.iter().all(|(service, _)| service == "from-env"));
    let agent = find(&spans, "invoke_agent");
    let chat = find(&spans, "chat");
    assert_eq!(hex(&agent.trace_id), TRACE_ID);
    assert_eq!(chat.parent_span_id, agent.span_id);
    assert_eq!(
        attr(&agent.attributes, "api_key"),
        Some(AnyValue::StringValue("[redacted]".into()))
    );
}

/// A real team run with content on exports the prompt and the tool arguments on the `chat` and
/// `execute_tool` spans; with it off, neither reaches the collector.
#[test]
fn a_team_run_exports_content_only_when_recorded() {
    for record_content in [true, false] {
        let collector = start_collector();
        let (layer, export) = otlp_layer::<Registry>(&collector.config(record_content))
            .unwrap()
            .unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(run_scripted_team())
        });
        export.shutdown().unwrap();

        let spans = collector.spans();
        let text_of =
            |span: &Span, key: &str| attr(&span.attributes, key).and_then(|v| str_value(&v));
        let prompts: Vec<String> = spans
            .iter()
            .filter(|(_, s)| s.name == "chat")
            .filter_map(|(_, s)| text_of(s, "gen_ai.input.messages"))
            .collect();
        let arguments: Vec<String> = spans
            .iter()
            .filter(|(_, s)| s.name == "execute_tool")
            .filter_map(|(_, s)| text_of(s, "gen_ai.tool.call.arguments"))
            .collect();
        if record_content {
            assert!(
                prompts
                    .iter()
                    .any(|p| p.contains("Name and slogan, please.")),
                "{prompts:?}"
            );
            assert!(
                arguments.iter().any(|a| a.contains("A bakery name?")),
                "{arguments:?}"
            );
            assert!(
                spans.iter().any(
                    |(_, s)| s.name == "chat" && text_of(s, "gen_ai.output.messages").is_some()
                )
            );
        } else {
            assert!(prompts.is_empty() && arguments.is_empty());
            for (_, body) in collector.requests() {
                let raw = String::from_utf8_lossy(&body);
                assert!(!raw.contains("Name and slogan") && !raw.contains("A bakery name?"));
            }
        }
    }
}

#[test]
fn spans_linked_across_nodes_keep_their_link_in_the_collector() {
    use troupe::protocol::trace::semconv;
    let collector = start_collector();
    let (layer, export) = otlp_layer::<Registry>(&collector.config(false))
        .unwrap()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    tracing::subscriber::with_default(subscriber, || {
        // The asking node's span, and (as the other node exports it) the taking one.
        // Targets the default trace filter keeps (`troupe*`), as the real spans have.
        tracing::info_span!(
            target: "troupe_cluster::route",
            "remote_ask",
            { semconv::TRACE_ID } = trace,
            { semconv::SPAN_ID } = "00f067aa0ba902b7"
        )
        .in_scope(|| {});
        tracing::info_span!(
            target: "troupe_cluster::gateway",
            "remote_request",
            { semconv::TRACE_ID } = trace,
            { semconv::REMOTE_PARENT_SPAN_ID } = "00f067aa0ba902b7"
        )
        .in_scope(|| tracing::info_span!(target: "troupe_runtime", "invoke_agent").in_scope(|| {}));
    });
    export.flush().unwrap();
    let spans = collector.spans();
    let asking = find(&spans, "remote_ask");
    let taking = find(&spans, "remote_request");
    let agent = find(&spans, "invoke_agent");
    assert_eq!(hex(&asking.span_id), "00f067aa0ba902b7");
    assert_eq!(hex(&taking.parent_span_id), "00f067aa0ba902b7");
    assert_eq!(agent.parent_span_id, taking.span_id);
    for span in [asking, taking, agent] {
        assert_eq!(hex(&span.trace_id), trace);
    }
    export.shutdown().unwrap();
}
