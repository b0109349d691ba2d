//! The engine room of the `troupe` command line, kept out of the `troupe` library's surface.
//!
//! Programs build teams with the `troupe` facade; this crate holds what only the binary (and its
//! tests, examples and benches) needs:
//! - [`config`]: `troupe.toml` — models, agents, tools — parsed, validated, and built into a team;
//! - [`transcript_file`]: reading and writing transcript files (JSON array or JSONL) exactly;
//! - [`transcript_ops`]: `troupe compact`, `expand`, `replay` and the recall measurement, over files;
//! - [`trace_tree`]: `troupe trace`, the terminal tree of a JSONL trace file;
//! - [`atomic_write`]: replace a file so a crash leaves the old one or the new one, never half.
//!
//! It is not published, and its items change with the CLI.

// Every `pub` item is reachable from the crate root (see the facade's lib.rs).
#![deny(unreachable_pub)]

pub mod atomic_write;
pub mod config;
pub mod trace_tree;
pub mod transcript_file;
pub mod transcript_ops;
