//! A live view of a troupe team in the browser.
//!
//! [`serve`] puts a page on `127.0.0.1` (a random port by default) fed by the team's event bus
//! over Server-Sent Events: each agent's state, model and context meter, the compactions with
//! their receipts, and the tool calls waiting for approval with their exact arguments and
//! buttons that answer them. [`serve_trace`] and [`serve_session`] open a finished run's trace
//! file or session log read-only.
//!
//! It is the third reader of the one event source, beside the trace file and the OTLP exporter.
//! The page is compiled into the binary (no CDN, no build step). Every request carries the
//! one-time token printed in the URL, requests from another origin are refused, and model or
//! tool text only ever leaves the server inside JSON, which the page renders as text: a model's
//! output is hostile input.

mod actions;
mod agent_view;
mod budgets;
mod config;
mod conversation;
mod error;
mod feed;
mod guard;
mod json;
mod live;
mod offline;
mod page;
mod routes;
mod server;
mod session;
mod shown;
mod source;
mod token;
mod view;
mod waterfall;

pub use agent_view::{AgentState, Marks};
pub use config::UiConfig;
pub use error::UiError;
pub use live::serve;
pub use offline::serve_trace;
pub use server::UiServer;
pub use session::serve_session;
