mod cli;
mod config;
mod session;
mod support;
mod telemetry;
mod trace_tree;
