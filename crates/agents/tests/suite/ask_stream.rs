//! `Team::ask_stream`: a request's events as they happen — text deltas, tool calls — then its
//! answer; a dropped stream cancels the turn; a slow reader holds the model back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use troupe_agents::{AgentSpec, spawn_agent};
use troupe_models::{ScriptedModel, ScriptedReply};
use troupe_protocol::{
    ChatModel, ChatRequest, ChatStream, Event, ModelDelta, ModelError, ModelInfo,
};
use troupe_runtime::{AskItem, DELTA_ROOM, Team, TeamConfig};

use super::support::tools::shout_tools;

async fn drain(mut stream: troupe_runtime::AskStream) -> Vec<AskItem> {
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item.unwrap());
    }
    items
}

#[tokio::test]
async fn a_streamed_request_yields_its_text_and_tool_calls_then_the_answer() {
    let answer = "The word is LOUD, as you asked.";
    let model = Arc::new(ScriptedModel::new(
        "script",
        [
            ScriptedReply::call("shout", r#"{"word": "loud"}"#),
            ScriptedReply::text(answer),
        ],
    ));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(&team, AgentSpec::new("caller", model).tools(shout_tools()))
        .await
        .unwrap();

    let items = drain(team.ask_stream("caller", "shout loud")).await;
    assert_eq!(items.last(), Some(&AskItem::Answer(answer.to_string())));
    let deltas: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            AskItem::Event(Event::ModelDelta { agent, text }) if agent == "caller" => {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect();
    assert!(deltas.len() >= 2, "{deltas:?}");
    assert_eq!(deltas.concat(), answer);
    let position = |wanted: fn(&Event) -> bool| {
        items
            .iter()
            .position(|i| matches!(i, AskItem::Event(e) if wanted(e)))
            .unwrap_or_else(|| panic!("missing event in {items:?}"))
    };
    let started = position(|e| matches!(e, Event::ToolCallStarted { tool, .. } if tool == "shout"));
    let finished = position(|e| matches!(e, Event::ToolCallFinished { .. }));
    let first_delta = position(|e| matches!(e, Event::ModelDelta { .. }));
    let request_finished = position(|e| matches!(e, Event::RequestFinished { .. }));
    assert!(started < finished && finished < first_delta && first_delta < request_finished);
    team.shutdown().await;
}

/// A model whose first answer sends one delta and then never finishes; later calls answer
/// `fine` at once.
struct StallsOnce {
    calls: AtomicUsize,
}

#[async_trait]
impl ChatModel for StallsOnce {
    fn info(&self) -> ModelInfo {
        ScriptedModel::new("stalls-once", []).info()
    }

    async fn chat_stream(&self, request: ChatRequest) -> Result<ChatStream, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) > 0 {
            return ScriptedModel::new("stalls-once", [ScriptedReply::text("fine")])
                .chat_stream(request)
                .await;
        }
        let first = futures::stream::iter([Ok(ModelDelta::Text("Thinking".into()))]);
        Ok(Box::pin(first.chain(futures::stream::pending())))
    }
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_request_and_rolls_the_conversation_back() {
    let team = Team::start(TeamConfig::default()).await.unwrap();
    let model = Arc::new(StallsOnce {
        calls: AtomicUsize::new(0),
    });
    spawn_agent(&team, AgentSpec::new("slow", model))
        .await
        .unwrap();
    let mut events = team.subscribe();

    let mut stream = team.ask_stream("slow", "take your time");
    loop {
        match stream.next().await.unwrap().unwrap() {
            AskItem::Event(Event::ModelDelta { text, .. }) => {
                assert_eq!(text, "Thinking");
                break;
            }
            AskItem::Event(_) => {}
            AskItem::Answer(a) => panic!("answered {a}"),
            other => panic!("{other:?}"),
        }
    }
    drop(stream);

    // The abandoned request ends as cancelled, and the agent takes the next one.
    let cancelled = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let record = events.recv().await.unwrap();
            if let Event::RequestFinished { error, .. } = record.event {
                return error;
            }
        }
    })
    .await
    .expect("the abandoned request never ended");
    assert!(cancelled.unwrap().contains("cancelled"));
    assert_eq!(team.ask("slow", "now quickly").await.unwrap(), "fine");
    let texts: Vec<String> = team
        .checkpoint("slow")
        .unwrap()
        .conversation
        .messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["now quickly", "fine"]);
    team.shutdown().await;
}

#[tokio::test]
async fn a_reader_that_does_not_read_holds_the_model_back_at_the_room_it_has() {
    let long = "word ".repeat(DELTA_ROOM * 2);
    let model = Arc::new(ScriptedModel::new("script", [ScriptedReply::text(&long)]));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(&team, AgentSpec::new("talker", model))
        .await
        .unwrap();
    let mut bus = team.subscribe();

    let stream = team.ask_stream("talker", "talk");
    // Deltas published on the bus while nobody reads the stream: exactly the room, then none.
    let mut published = 0;
    while published < DELTA_ROOM {
        if let Event::ModelDelta { .. } = bus.recv().await.unwrap().event {
            published += 1;
        }
    }
    let more = tokio::time::timeout(Duration::from_millis(300), async {
        loop {
            if let Event::ModelDelta { .. } = bus.recv().await.unwrap().event {
                return;
            }
        }
    })
    .await;
    assert!(more.is_err(), "the model ran past the reader's room");

    // Reading lets it go on to the end.
    let items = drain(stream).await;
    let text: String = items
        .iter()
        .filter_map(|i| match i {
            AskItem::Event(Event::ModelDelta { text, .. }) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, long);
    assert_eq!(items.last(), Some(&AskItem::Answer(long.clone())));
    team.shutdown().await;
}

#[tokio::test]
async fn an_unwatched_ask_still_publishes_its_deltas_for_observers() {
    let model = Arc::new(ScriptedModel::new(
        "script",
        [ScriptedReply::text("hello there")],
    ));
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(&team, AgentSpec::new("greeter", model))
        .await
        .unwrap();
    let mut bus = team.subscribe();
    assert_eq!(team.ask("greeter", "hi").await.unwrap(), "hello there");
    let mut text = String::new();
    while let Ok(record) = bus.try_recv() {
        if let Event::ModelDelta { agent, text: t } = record.event {
            assert_eq!(agent, "greeter");
            text.push_str(&t);
        }
    }
    assert_eq!(text, "hello there");
    team.shutdown().await;
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_running_tools_token() {
    use tokio_util::sync::CancellationToken;
    use troupe_tools::{NoArgs, ToolError, ToolRegistry};

    let (started, has_started) = tokio::sync::oneshot::channel::<CancellationToken>();
    let started = std::sync::Mutex::new(Some(started));
    let mut tools = ToolRegistry::new();
    tools
        .register_fn_with_context("hang", "Never finishes.", move |ctx, _: NoArgs| {
            if let Some(started) = started.lock().unwrap().take() {
                let _ = started.send(ctx.cancel.clone());
            }
            async move {
                std::future::pending::<()>().await;
                Ok::<_, ToolError>("unreachable")
            }
        })
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new("script", [ScriptedReply::call("hang", "{}")]).with_fallback("fine"),
    );
    let team = Team::start(TeamConfig::default()).await.unwrap();
    spawn_agent(&team, AgentSpec::new("waiter", model).tools(tools))
        .await
        .unwrap();

    let stream = team.ask_stream("waiter", "wait for it");
    // Polled by the team, not by this stream: the tool runs while nobody reads.
    let token = tokio::time::timeout(Duration::from_secs(10), has_started)
        .await
        .expect("the tool never ran")
        .unwrap();
    assert!(!token.is_cancelled());
    drop(stream);
    tokio::time::timeout(Duration::from_secs(10), token.cancelled())
        .await
        .expect("the abandoned turn left its tool's token uncancelled");
    team.shutdown().await;
}
