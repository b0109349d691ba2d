//! Integration test modules.

mod corpus;
mod entry_point;
mod folding;
mod primitives;
mod properties;
mod summaries;
mod support;
