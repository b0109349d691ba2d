mod binary;
mod chat;
mod cli;
mod compact_safety;
mod compact_trace;
mod config;
#[cfg(feature = "otlp")]
mod otlp;
mod readme;
mod recall;
mod redaction;
mod replay;
mod session;
mod support;
mod telemetry;
mod trace_tree;
mod trace_tree_robust;
mod transcript_unknowns;
