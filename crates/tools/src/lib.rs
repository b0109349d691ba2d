//! troupe-tools: the [`Tool`] trait, the [`ToolRegistry`], built-in file tools confined to a
//! workspace root; each file operation goes into the agent's `troupe_protocol::FileLedger`.
//!
//! - A custom tool is a type implementing [`Tool`] or a closure given to
//!   [`ToolRegistry::register_fn`]; its arguments' `schemars` schema becomes the OpenAI function
//!   definition ([`ToolRegistry::definitions`]).
//! - [`ToolRegistry::dispatch`] turns any model-written [`troupe_protocol::ToolCall`] into a
//!   [`ToolResult`]: bad JSON, bad arguments, unknown tools, panics, timeouts and huge outputs
//!   become results that tell the model what to fix, never crashes.
//! - [`builtin`] holds `read_file`, `write_file`, `edit_file`, `list_dir`, `grep` (all confined
//!   to [`ToolContext::root`] by [`workspace`]) and the opt-in `shell` and `http_get`.
//! - [`approval`]: which calls run on their own, wait for a person, or never run
//!   ([`approval::ApprovalPolicy`], which reads arguments with the registry's [`read_arguments`]).
//! - [`sandbox`]: what a command troupe starts for a model may touch, enforced by the kernel
//!   (Landlock, seccomp, namespaces); approvals decide whether a call runs, the sandbox what it
//!   can touch when it does.
//! - Topic modules, whose items have no other path: [`approval`], [`builtin`], [`sandbox`],
//!   [`workspace`] (confinement to the root: [`workspace::WorkspacePath`],
//!   [`workspace::PathError`]), [`schema`]; everything else is at the root, once.

// Every `pub` item is reachable from the crate root: a public item with no public path is a
// mistake (it should be `pub(crate)`), and one path per item keeps the surface readable.
#![deny(unreachable_pub)]

pub mod approval;
mod args;
pub mod builtin;
mod call_events;
mod context;
mod erased;
mod error;
mod fn_tool;
mod json_tool;
pub mod process_group;
mod registry;
mod result;
pub mod sandbox;
pub mod schema;
mod source;
mod suggest;
mod tool;
mod validate;
pub mod workspace;

pub use args::{UnreadableArguments, read_arguments};
pub use call_events::observe_call;
pub use context::ToolContext;
pub use error::{RegistryError, ToolError};
pub use json_tool::JsonTool;
pub use registry::{DEFAULT_TIMEOUT, ToolRegistry};
pub use result::{ToolFailure, ToolOutcome, ToolResult};
pub use source::ToolSource;
pub use tool::{NoArgs, Tool};
