//! One agent turn three ways — troupe, rig, a hand-written ractor actor — over the same
//! in-process scripted model and the same tool, so a benchmark of them measures only what each
//! runtime adds around the model and the tool.
//!
//! The turn: a user message → the model answers with one call of `weather` → the tool's result
//! → the model's final answer. No I/O anywhere.

pub mod load;
pub mod ractor_turn;
pub mod rig_turn;
pub mod troupe_turn;

/// The user's message of every turn.
pub const USER_MESSAGE: &str = "What is the weather in Paris?";
/// The one tool's name.
pub const TOOL_NAME: &str = "weather";
/// The arguments the model calls the tool with.
pub const TOOL_ARGUMENTS: &str = r#"{"city":"Paris"}"#;
/// The model's final answer.
pub const FINAL_ANSWER: &str = "It is sunny in Paris, 21 °C.";

/// The tool's arguments, as each runtime deserializes them.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct WeatherArgs {
    /// The city to look up.
    pub city: String,
}

/// The tool itself: the same pure function in every runtime.
pub fn weather(args: &WeatherArgs) -> String {
    format!("sunny, 21 °C in {}", args.city)
}
