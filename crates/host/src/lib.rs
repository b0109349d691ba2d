//! troupe-host: what a troupe process sets up once for talking to the outside, shared by every
//! crate that holds a key or opens an HTTPS connection (the runtime, the tools, the model
//! providers, MCP over HTTP, the binary) without making any of them depend on the actor runtime.
//!
//! - [`credentials`]: credentials moved out of the environment; every key lookup goes through
//!   [`credentials::var`].
//! - [`tls`]: aws-lc-rs, the one crypto provider every HTTPS client uses.
//! - [`sse`]: server-sent events decoded from a body's bytes within caps, the one decoder of the
//!   model providers' streamed answers and A2A agents' streams.
//! - [`serve`] (feature `serve`): the one way troupe serves HTTP — the A2A server and the live
//!   view — with the timeouts and bounds that keep one client from holding a server.
//!
//! No actors; no network of its own but the listener [`serve`] is handed.

// Every `pub` item is reachable from the crate root: a public item with no public path is a
// mistake (it should be `pub(crate)`), and one path per item keeps the surface readable.
#![deny(unreachable_pub)]

pub mod credentials;
#[cfg(feature = "serve")]
pub mod serve;
pub mod sse;
pub mod tls;
