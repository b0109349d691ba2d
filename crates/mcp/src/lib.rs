//! troupe-mcp: tools from any [Model Context Protocol](https://modelcontextprotocol.io) server
//! in a [`troupe_tools::ToolRegistry`], through the official Rust SDK (`rmcp`).
//!
//! [`register_mcp`] (or [`RegisterMcp::register_mcp`] on a registry) starts a server as a child
//! process (or connects to one over streamable HTTP, [`McpServerConfig::http`]), initializes
//! it, lists its tools and offers each as `SERVER__tool` with the server's JSON Schema
//! passed through to the model. Calls go through the registry's dispatch
//! like native tools: bad arguments are refused before the server sees them; the server's
//! `isError`, a protocol error, a timeout (the registry's), an oversized output (the registry's
//! cap) and a server that exited all become tool results the model can act on. A server that
//! exited is started again on the next call, at most [`McpServerConfig::max_restarts`] times.
//! A message from a server over 16 MiB is dropped and the call answers that the result was too
//! large; a `tools/list` is bounded (1 000 pages, 10 000 tools, 32 MiB of definitions).
//!
//! A stdio server runs in a process group of its own, killed (with whatever the server started)
//! when the last registry holding its tools is dropped, on [`McpServer::shutdown`], and when
//! troupe's runtime shuts down.
//!
//! The tools stay the server's (a [`troupe_tools::ToolSource`] in the registry): when the
//! server sends `notifications/tools/list_changed`, they are listed again in the background and
//! every registry holding them (clones included) offers the new list — an agent sees it on its
//! next model turn, and a tool that is gone answers as an unknown tool naming the tools there
//! are. They are also listed again when the server is started again, after a call the server
//! refused or answered with an error (how servers answer a tool they no longer have, which
//! catches a server that drops a tool without notifying), and on [`McpServer::refresh`]. A tool
//! keeps its registry name while the server lists it; a new one is named like the first ones,
//! never taking a name the registry's other tools had at registration. A newly listed tool whose
//! schema is not an object is left out (with a warning) rather than failing the whole list.
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
//! println!("offered {:?}", time.tool_names()); // ["time__get_current_time", …]
//! # Ok(()) }
//! ```

#![deny(unreachable_pub)]

mod config;
mod connection;
mod content;
mod error;
mod frames;
mod http_client;
mod line_scan;
mod list_pages;
mod names;
mod process;
mod register;
mod server;
mod stderr_tail;
mod tool;
mod tool_list;

pub use config::{DEFAULT_INIT_TIMEOUT, DEFAULT_MAX_RESTARTS, McpServerConfig};
pub use error::McpError;
pub use names::{MAX_SERVER_NAME, server_name_problem};
pub use register::{McpServer, RegisterMcp, register_mcp};
pub use server::RegistryServer;
