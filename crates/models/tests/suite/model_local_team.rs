//! The embedded model serving a team (#32): a KV sequence per conversation and requests decoded
//! together, on the real default weights. Each test has an engine of its own (its own
//! `max_context`; engines are shared per path and options), so what its cache holds is its own
//! doing.

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use troupe_protocol::{
    ChatMessage, ChatModel, ChatRequest, FinishReason, ModelDelta, ToolChoice, ToolDefinition,
};

use super::support::local::{LIGHTHOUSE, engine};

fn turn(agent: &str, messages: &[ChatMessage], max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages: messages.iter().cloned().map(Into::into).collect(),
        tool_choice: ToolChoice::None,
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        agent: Some(agent.to_string()),
        ..ChatRequest::default()
    }
}

/// Two agents take turns, each with its own long conversation: each turn decodes only what is
/// new to that agent's conversation, not the other agent's history again (one shared sequence
/// decoded each whole prompt again, ~400 tokens a turn here).
#[tokio::test]
async fn model_local_agents_taking_turns_decode_only_what_is_new_to_each() {
    let model = engine(4000, 4).await;
    let mut conversations: Vec<Vec<ChatMessage>> = ["Ada", "Bo"]
        .iter()
        .map(|name| {
            vec![ChatMessage::system(format!(
                "You are {name}. Answer from this story only.\n\n{LIGHTHOUSE}"
            ))]
        })
        .collect();
    let questions = ["Who kept the lighthouse?", "How many fishermen survived?"];
    let mut previous_prompt = [0u64; 2];
    for (round, question) in questions.iter().enumerate() {
        for (i, agent) in ["ada", "bo"].iter().enumerate() {
            conversations[i].push(ChatMessage::user(*question));
            let before = model.prompt_tokens_decoded();
            let answer = model
                .chat(turn(agent, &conversations[i], 12))
                .await
                .unwrap();
            let decoded = model.prompt_tokens_decoded() - before;
            let prompt = answer.usage.input_tokens;
            let new = prompt - previous_prompt[i];
            eprintln!("round {round} {agent}: prompt {prompt}, new {new}, decoded {decoded}");
            assert!(prompt > 300, "{prompt}");
            if round > 0 {
                // The last prompt token is decoded again for its logits.
                assert!(
                    decoded <= new + 1,
                    "{agent} decoded {decoded} of {new} new tokens"
                );
            }
            previous_prompt[i] = prompt;
            conversations[i].push(answer.message);
        }
    }
}

/// A reader that does not read pauses only its own answer: another request is answered
/// meanwhile (one job at a time, it would wait for the paused one forever).
#[tokio::test]
async fn model_local_a_slow_reader_pauses_only_its_own_answer() {
    let model = engine(4100, 4).await;
    let story = ChatRequest {
        messages: vec![
            ChatMessage::system(format!("Retell this story in detail.\n\n{LIGHTHOUSE}")).into(),
            ChatMessage::user("Retell the story, paragraph by paragraph.").into(),
        ],
        max_tokens: Some(200),
        temperature: Some(0.0),
        agent: Some("slow".into()),
        ..ChatRequest::default()
    };
    let mut unread = model.chat_stream(story).await.unwrap();
    let other = turn("quick", &[ChatMessage::user("Say hello.")], 8);
    // A bound against a hang, not a timing goal.
    let answer = tokio::time::timeout(Duration::from_secs(300), model.chat(other))
        .await
        .expect("the other request waited for the unread answer")
        .unwrap();
    assert!(!answer.message.text().is_empty());
    // The unread answer was still going (it had more text than its channel holds) and is whole.
    let mut deltas = 1;
    let mut finish = None;
    while let Some(delta) = unread.next().await {
        match delta.unwrap() {
            ModelDelta::Text(_) => deltas += 1,
            ModelDelta::Finished(reason) => finish = Some(reason),
            _ => {}
        }
    }
    assert!(
        deltas > 40,
        "the answer ended before its reader paused it: {deltas} deltas"
    );
    assert!(finish.is_some());
}

/// Two requests that do not fit the cells together: the one that joined last steps back, waits
/// for the other and is answered; neither fails.
#[tokio::test]
async fn model_local_requests_that_do_not_fit_together_are_served_one_after_the_other() {
    let model = engine(512, 4).await;
    let ask = |agent: &str, instruction: &str| ChatRequest {
        messages: vec![
            ChatMessage::system(format!("{instruction}\n\n{LIGHTHOUSE}")).into(),
            ChatMessage::user("Who kept the lighthouse?").into(),
        ],
        max_tokens: Some(16),
        temperature: Some(0.0),
        agent: Some(agent.to_string()),
        ..ChatRequest::default()
    };
    let first = ask("one", "Answer from this story only.");
    let second = ask("two", "Read the story, then answer.");
    let total = model.count_tokens(LIGHTHOUSE).unwrap() * 2;
    assert!(total > 512, "the two prompts fit together: {total}");
    let (first, second) = tokio::join!(model.chat(first), model.chat(second));
    for answer in [first.unwrap(), second.unwrap()] {
        assert!(answer.usage.output_tokens > 0);
    }
}

/// Tool calls decoded together each follow their own grammar: two calls to different tools
/// with different argument schemas at once both parse and match their schema.
#[tokio::test]
async fn model_local_tool_calls_decoded_together_each_follow_their_own_grammar() {
    let model = engine(4200, 4).await;
    let weather = ToolDefinition {
        name: "get_weather".into(),
        description: "Current weather for a city.".into(),
        parameters: json!({"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    };
    let alarm = ToolDefinition {
        name: "set_alarm".into(),
        description: "Set an alarm.".into(),
        parameters: json!({"type": "object",
            "properties": {"hour": {"type": "integer"}, "loud": {"type": "boolean"}},
            "required": ["hour", "loud"]}),
    };
    let call = |agent: &str, tool: &ToolDefinition, question: &str| ChatRequest {
        messages: vec![ChatMessage::user(question).into()],
        tools: vec![tool.clone()],
        tool_choice: ToolChoice::Named(tool.name.clone()),
        agent: Some(agent.to_string()),
        ..ChatRequest::default()
    };
    let (a, b) = tokio::join!(
        model.chat(call("a", &weather, "What's the weather in Paris?")),
        model.chat(call("b", &alarm, "Wake me at seven, loudly.")),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    for (response, name) in [(&a, "get_weather"), (&b, "set_alarm")] {
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
        assert_eq!(response.message.calls()[0].function.name, name);
    }
    let args = |r: &troupe_protocol::ChatResponse| -> serde_json::Value {
        serde_json::from_str(&r.message.calls()[0].function.arguments).unwrap()
    };
    assert!(args(&a)["city"].is_string(), "{:?}", args(&a));
    assert!(args(&b)["hour"].is_i64(), "{:?}", args(&b));
    assert!(args(&b)["loud"].is_boolean(), "{:?}", args(&b));
}
