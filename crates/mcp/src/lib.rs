//! troupe-mcp: tools from any [Model Context Protocol](https://modelcontextprotocol.io) server
//! in a [`troupe_tools::ToolRegistry`], through the official Rust SDK (`rmcp`).
//!
//! [`register_mcp`] (or [`RegisterMcp::register_mcp`] on a registry) starts a server as a child
//! process (or connects to one over streamable HTTP, [`McpServerConfig::http`]), initializes
//! it, lists its tools and registers each as `SERVER__tool` with the server's JSON Schema
//! passed through to the model. Calls go through the registry's dispatch
//! like native tools: bad arguments are refused before the server sees them; the server's
//! `isError`, a protocol error, a timeout (the registry's), an oversized output (the registry's
//! cap) and a server that exited all become tool results the model can act on. A server that
//! exited is started again on the next call, at most [`McpServerConfig::max_restarts`] times.
//! A server's `notifications/tools/list_changed` is not acted on: the tools are those listed at
//! registration.
//!
//! The other way round, [`RegistryServer`] serves a registry's tools to any MCP client over
//! stdio (`troupe mcp serve` serves troupe's compressor this way).
//!
//! ```no_run
//! # async fn demo() -> Result<(), troupe_mcp::McpError> {
//! use troupe_mcp::{McpServerConfig, RegisterMcp};
//! use troupe_tools::ToolRegistry;
//!
//! let mut tools = ToolRegistry::new();
//! let server = McpServerConfig::stdio("uvx").arg("mcp-server-time");
//! let time = tools.register_mcp("time", server).await?;
//! println!("registered {:?}", time.tool_names()); // ["time__get_current_time", …]
//! # Ok(()) }
//! ```

#![deny(unreachable_pub)]

mod config;
mod connection;
mod content;
mod error;
mod names;
mod register;
mod server;
mod stderr_tail;
mod tool;

pub use config::{DEFAULT_INIT_TIMEOUT, DEFAULT_MAX_RESTARTS, McpServerConfig};
pub use error::McpError;
pub use register::{McpServer, RegisterMcp, register_mcp};
pub use server::RegistryServer;
