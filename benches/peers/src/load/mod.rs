//! The load benchmark's parts (`benches/load.rs` drives them): N concurrent requests of a
//! two-tool agent, each framework against the same OpenAI-wire server on loopback.
//!
//! One request: the user asks for the weather and the time in a city → the server streams two
//! tool calls (`weather`, `local_time`) → the agent runs both → the server streams the final
//! answer. Two model calls per request, each answered after the server's fixed delay, so a
//! request can take no less than twice that delay; what a framework adds is the rest.
//!
//! - [`server`]: the server (stateless: it answers from the request's messages);
//! - one module per framework, each with the same three steps — `start` (what every request
//!   shares, then one request, whose arrival at the server ends the cold start), `prepare`
//!   (the conversations of the measured requests, untimed) and `request` (one request, start
//!   to final answer);
//! - [`measure`]: what a process measures of itself (CPU time, peak RSS).

pub mod autoagents_load;
pub mod measure;
pub mod ractor_load;
pub mod rig_load;
pub mod server;
pub mod troupe_load;

use serde::{Deserialize, Serialize};

/// The agent's instructions, in every framework.
pub const SYSTEM_PROMPT: &str = "You answer questions about the weather and the time of a city.";
/// The user's message of every request.
pub const USER_MESSAGE: &str = "What is the weather in Paris, and what time is it there?";
/// The first tool: the weather of a city.
pub const WEATHER_TOOL: &str = "weather";
/// The second tool: the local time of a city.
pub const TIME_TOOL: &str = "local_time";
/// The arguments the server calls both tools with.
pub const TOOL_ARGUMENTS: &str = r#"{"city":"Paris"}"#;
/// The server's final answer, streamed in pieces.
pub const FINAL_ANSWER: &str =
    "In Paris it is sunny and 21 °C, and the local time is 14:05. Enjoy the afternoon!";
/// The model name every client sends.
pub const MODEL: &str = "load-model";

/// The tools' arguments, as every framework deserializes them.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CityArgs {
    /// The city to look up.
    pub city: String,
}

/// The `weather` tool: the same pure function in every framework.
pub fn weather(city: &str) -> String {
    format!("sunny, 21 °C in {city}")
}

/// The `local_time` tool.
pub fn local_time(city: &str) -> String {
    format!("14:05 in {city}")
}

/// Run a tool by name on its JSON arguments (the hand-written agents' dispatch).
pub fn run_tool(name: &str, arguments: &str) -> String {
    match (name, serde_json::from_str::<CityArgs>(arguments)) {
        (WEATHER_TOOL, Ok(args)) => weather(&args.city),
        (TIME_TOOL, Ok(args)) => local_time(&args.city),
        (_, Err(e)) => format!("bad arguments: {e}"),
        _ => format!("no tool named {name}"),
    }
}

/// The JSON Schema of both tools' parameters (for the frameworks that take it by hand).
pub fn city_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": { "city": { "type": "string", "description": "The city to look up." } },
        "required": ["city"],
    })
}

/// The frameworks measured, by the names the JSON rows carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Framework {
    /// troupe with nothing but the agents: no event reader, trace file, budget or session log.
    #[serde(rename = "troupe-lean")]
    TroupeLean,
    /// troupe with its guarantees on: an event reader, the JSONL trace file, a budget per
    /// agent, and a session log per agent with a commit (and an fsync) per step.
    #[serde(rename = "troupe-full")]
    TroupeFull,
    /// rig 0.44 (`rig-agent`'s `Agent` over rig-core's OpenAI Chat Completions model).
    #[serde(rename = "rig")]
    Rig,
    /// AutoAgents 0.4 (a `ReActAgent` in a `DirectAgent` per request, as its benchmark builds).
    #[serde(rename = "autoagents")]
    AutoAgents,
    /// raw ractor: an actor per conversation running the loop by hand over reqwest.
    #[serde(rename = "ractor")]
    Ractor,
}

impl Framework {
    /// Every framework, in the order a table lists them.
    pub const ALL: [Framework; 5] = [
        Framework::TroupeLean,
        Framework::TroupeFull,
        Framework::Rig,
        Framework::AutoAgents,
        Framework::Ractor,
    ];

    /// The row name.
    pub fn name(self) -> &'static str {
        match self {
            Framework::TroupeLean => "troupe-lean",
            Framework::TroupeFull => "troupe-full",
            Framework::Rig => "rig",
            Framework::AutoAgents => "autoagents",
            Framework::Ractor => "ractor",
        }
    }

    /// The framework named `name`.
    pub fn parse(name: &str) -> Option<Framework> {
        Framework::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What one child process measured of one framework at one point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildReport {
    /// Requests that got the final answer.
    pub ok: usize,
    /// Requests that failed, with the first error.
    pub failed: usize,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// From the first request's start to the last one's answer, seconds.
    pub wall_s: f64,
    /// Each request's latency, milliseconds, sorted.
    pub latencies_ms: Vec<f64>,
    /// User + system CPU of the process while the requests ran, seconds.
    pub cpu_s: f64,
    /// The process's peak resident set (VmHWM), MiB.
    pub peak_rss_mb: f64,
}

/// One row of the result: a framework at a point, the median of its rounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// [`Framework::name`].
    pub framework: String,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// The server's delay before each answer, milliseconds.
    pub delay_ms: u64,
    /// Requests answered per second of wall time.
    pub req_per_s: f64,
    /// Median latency less the two model calls' delays, milliseconds.
    pub p50_added_ms: f64,
    /// 99th-percentile latency less the two delays, milliseconds.
    pub p99_added_ms: f64,
    /// Peak RSS of the framework's process, MiB.
    pub peak_rss_mb: f64,
    /// CPU seconds the framework's process spent per request.
    pub cpu_s_per_req: f64,
    /// From spawning the process to its first request reaching the server, milliseconds.
    pub cold_start_ms: f64,
    /// Rounds measured (the figures are their medians).
    pub rounds: usize,
    /// Requests that failed, summed over the rounds.
    pub failed: usize,
}

/// The `q`-quantile (0..=1) of sorted `values`, nearest rank; 0 for none.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of `values` (0 for none).
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), 2.5);
    }

    #[test]
    fn framework_names_round_trip() {
        for f in Framework::ALL {
            assert_eq!(Framework::parse(f.name()), Some(f));
        }
    }
}
