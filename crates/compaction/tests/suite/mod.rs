//! Integration test modules.

mod artifacts;
mod corpus;
mod count_bounds;
mod entry_point;
mod exact_counts;
mod folding;
mod mechanical;
mod min_gain;
mod names_kept;
mod pins;
mod primitives;
mod properties;
mod restore_check;
mod stub_names;
mod summaries;
mod summary_call;
mod support;
mod unreachable;
