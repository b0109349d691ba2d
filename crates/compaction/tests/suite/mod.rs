//! Integration test modules.

mod artifacts;
mod corpus;
mod entry_point;
mod folding;
mod mechanical;
mod primitives;
mod properties;
mod summaries;
mod support;
