mod approval;
mod ask_stream;
mod budget_pause;
mod budgets;
mod cache_pricing;
mod compaction_from_agents;
mod compaction_hooks;
mod compaction_road;
mod compression;
#[cfg(feature = "local")]
mod compression_local;
mod compressor_abandoned;
mod compressor_schedule;
mod durable_steps;
mod durable_steps_restart;
mod llm_agent;
mod model_anthropic;
mod model_anthropic_live;
#[cfg(feature = "local")]
mod model_local;
#[cfg(feature = "local")]
mod model_local_team;
#[cfg(feature = "local")]
mod model_local_typed;
mod model_openai;
mod model_openai_stream;
mod model_replay;
mod model_stream_limits;
mod pins;
mod precall;
mod rate_limit;
mod recall_tool;
mod session;
mod session_log;
mod session_switch;
mod shutdown_compaction;
mod summary_prefix;
mod summary_trust;
mod support;
mod team_builder;
mod thrash;
mod tool_budget;
mod work_ahead;
mod work_ahead_limit;
