mod config;
mod support;
mod telemetry;
mod trace_tree;
