mod chat;
mod cli;
mod config;
mod readme;
mod session;
mod support;
mod telemetry;
mod trace_tree;
