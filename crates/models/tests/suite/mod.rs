mod grammar;
mod model_anthropic;
mod model_anthropic_live;
#[cfg(feature = "local")]
mod model_local;
#[cfg(feature = "local")]
mod model_local_exit;
#[cfg(feature = "local")]
mod model_local_team;
#[cfg(feature = "local")]
mod model_local_typed;
mod model_openai;
mod model_openai_stream;
mod model_replay;
mod model_stream_limits;
mod support;
