//! The turn in raw ractor: one actor that runs the loop by hand — call the model function, run
//! the tool function, call the model again, reply.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::{FINAL_ANSWER, TOOL_ARGUMENTS, TOOL_NAME, WeatherArgs, weather};

/// One message of the hand-kept conversation.
#[derive(Debug, Clone)]
pub enum Turn {
    /// The system prompt.
    System(String),
    /// The user's message.
    User(String),
    /// The model's tool call: name and JSON arguments.
    Call(String, String),
    /// The tool's result.
    Result(String),
    /// The model's final answer.
    Answer(String),
}

/// What the model function answers.
pub enum ModelReply {
    /// Call this tool with these JSON arguments.
    Call(String, String),
    /// The final answer.
    Text(String),
}

/// The scripted model as a plain function: a tool call first, the answer once a result is in.
pub async fn model(conversation: &[Turn]) -> ModelReply {
    match conversation.last() {
        Some(Turn::Result(_)) => ModelReply::Text(FINAL_ANSWER.to_string()),
        _ => ModelReply::Call(TOOL_NAME.to_string(), TOOL_ARGUMENTS.to_string()),
    }
}

/// The tool, dispatched by name with its JSON arguments parsed.
pub async fn run_tool(name: &str, arguments: &str) -> String {
    match (name, serde_json::from_str::<WeatherArgs>(arguments)) {
        (TOOL_NAME, Ok(args)) => weather(&args),
        (TOOL_NAME, Err(e)) => format!("bad arguments: {e}"),
        _ => format!("no tool named {name}"),
    }
}

/// The actor's one message: a user message and where to send the final answer.
pub enum AgentMsg {
    /// Run a turn.
    Ask(String, RpcReplyPort<String>),
}

impl ractor::Message for AgentMsg {}

/// The hand-written agent actor.
pub struct HandAgent;

impl Actor for HandAgent {
    type Msg = AgentMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        _args: (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<AgentMsg>,
        message: AgentMsg,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let AgentMsg::Ask(text, reply) = message;
        let mut conversation = vec![
            Turn::System("You answer questions about the weather.".to_string()),
            Turn::User(text),
        ];
        let answer = loop {
            match model(&conversation).await {
                ModelReply::Text(text) => break text,
                ModelReply::Call(name, arguments) => {
                    let result = run_tool(&name, &arguments).await;
                    conversation.push(Turn::Call(name, arguments));
                    conversation.push(Turn::Result(result));
                }
            }
        };
        conversation.push(Turn::Answer(answer.clone()));
        let _ = reply.send(answer);
        Ok(())
    }
}

/// Spawn the actor.
pub async fn spawn() -> ActorRef<AgentMsg> {
    Actor::spawn(None, HandAgent, ()).await.expect("spawned").0
}

/// One turn: ask the actor and wait for its final answer.
pub async fn turn(agent: &ActorRef<AgentMsg>, text: &str) -> String {
    ractor::call!(agent, AgentMsg::Ask, text.to_string()).expect("an answer")
}
