//! The requests in raw ractor: what a team writes by hand on the actor library — an actor per
//! conversation whose handler runs the agent loop itself over reqwest (the request body built
//! with `serde_json`, the server-sent events split and parsed by hand, tool calls assembled from
//! their deltas), each request a `call!` to its actor. No events, traces, budgets or logs.

use futures::StreamExt;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Value, json};

use super::{
    FINAL_ANSWER, MODEL, SYSTEM_PROMPT, TIME_TOOL, USER_MESSAGE, WEATHER_TOOL, city_schema,
    run_tool,
};

/// What the server streamed back: text, and tool calls (id, name, arguments).
#[derive(Default)]
struct Answer {
    text: String,
    calls: Vec<(String, String, String)>,
}

/// Stream one chat completion and assemble its deltas.
async fn complete(
    client: &reqwest::Client,
    url: &str,
    messages: &[Value],
) -> Result<Answer, String> {
    let tool = |name: &str, description: &str| {
        json!({"type": "function", "function": {
            "name": name, "description": description, "parameters": city_schema()}})
    };
    let body = json!({
        "model": MODEL,
        "messages": messages,
        "tools": [tool(WEATHER_TOOL, "The weather in a city."),
                  tool(TIME_TOOL, "The local time in a city.")],
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let response = client
        .post(url)
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("status {}", response.status()));
    }
    let mut answer = Answer::default();
    let mut buffer: Vec<u8> = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(bytes) = body.next().await {
        buffer.extend_from_slice(&bytes.map_err(|e| e.to_string())?);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buffer.drain(..end + 2).collect();
            let event = std::str::from_utf8(&event).map_err(|e| e.to_string())?;
            for data in event.lines().filter_map(|l| l.strip_prefix("data: ")) {
                if data == "[DONE]" {
                    return Ok(answer);
                }
                let chunk: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
                apply_delta(&mut answer, &chunk["choices"][0]["delta"]);
            }
        }
    }
    Ok(answer)
}

fn apply_delta(answer: &mut Answer, delta: &Value) {
    if let Some(text) = delta["content"].as_str() {
        answer.text.push_str(text);
    }
    for call in delta["tool_calls"].as_array().into_iter().flatten() {
        let index = call["index"].as_u64().unwrap_or(0) as usize;
        if answer.calls.len() <= index {
            answer.calls.resize(index + 1, Default::default());
        }
        let slot = &mut answer.calls[index];
        if let Some(id) = call["id"].as_str() {
            slot.0 = id.to_string();
        }
        if let Some(name) = call["function"]["name"].as_str() {
            slot.1.push_str(name);
        }
        if let Some(arguments) = call["function"]["arguments"].as_str() {
            slot.2.push_str(arguments);
        }
    }
}

/// The actor's one message: a user message and where the final answer goes.
pub struct Ask(pub String, pub RpcReplyPort<Result<String, String>>);

impl ractor::Message for Ask {}

/// One conversation's actor.
struct Conversation;

/// What every conversation actor shares: the HTTP client and the endpoint.
#[derive(Clone)]
struct Endpoint {
    client: reqwest::Client,
    url: String,
}

impl Actor for Conversation {
    type Msg = Ask;
    type State = Endpoint;
    type Arguments = Endpoint;

    async fn pre_start(
        &self,
        _myself: ActorRef<Ask>,
        endpoint: Endpoint,
    ) -> Result<Endpoint, ActorProcessingErr> {
        Ok(endpoint)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Ask>,
        Ask(text, reply): Ask,
        endpoint: &mut Endpoint,
    ) -> Result<(), ActorProcessingErr> {
        let mut messages = vec![
            json!({"role": "system", "content": SYSTEM_PROMPT}),
            json!({"role": "user", "content": text}),
        ];
        let result = async {
            for _ in 0..4 {
                let answer = complete(&endpoint.client, &endpoint.url, &messages).await?;
                if answer.calls.is_empty() {
                    return Ok(answer.text);
                }
                messages.push(json!({"role": "assistant", "content": null,
                    "tool_calls": answer.calls.iter().map(|(id, name, arguments)| json!({
                        "id": id, "type": "function",
                        "function": {"name": name, "arguments": arguments}})).collect::<Vec<_>>()}));
                for (id, name, arguments) in &answer.calls {
                    messages.push(json!({"role": "tool", "tool_call_id": id,
                                         "content": run_tool(name, arguments)}));
                }
            }
            Err("no final answer after 4 model calls".to_string())
        }
        .await;
        let _ = reply.send(result);
        Ok(())
    }
}

/// The client and the conversations' actors (the first one's spawned at start).
pub struct RactorLoad {
    endpoint: Endpoint,
    actors: Vec<ActorRef<Ask>>,
}

impl RactorLoad {
    /// The client and conversation 0's actor.
    pub async fn start(base_url: &str) -> Self {
        let endpoint = Endpoint {
            client: reqwest::Client::new(),
            url: format!("{base_url}/chat/completions"),
        };
        let mut load = RactorLoad {
            endpoint,
            actors: Vec::new(),
        };
        load.prepare(0).await;
        load
    }

    /// One actor per measured request (`1..=n`; `0` spawns conversation 0's alone).
    pub async fn prepare(&mut self, n: usize) {
        let count = if self.actors.is_empty() { n + 1 } else { n };
        for _ in 0..count {
            let (actor, _) = Actor::spawn(None, Conversation, self.endpoint.clone())
                .await
                .expect("spawned");
            self.actors.push(actor);
        }
    }

    /// Request `i`: ask conversation `i`'s actor.
    pub async fn request(&self, i: usize) -> Result<(), String> {
        let answer = ractor::call!(self.actors[i], Ask, USER_MESSAGE.to_string())
            .map_err(|e| e.to_string())??;
        if answer == FINAL_ANSWER {
            Ok(())
        } else {
            Err(format!("unexpected answer: {answer}"))
        }
    }

    /// Stop every actor.
    pub fn shutdown(&self) {
        for actor in &self.actors {
            actor.stop(None);
        }
    }
}
