//! Tools the suites give their agents.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_tools::{ToolError, ToolRegistry};

#[derive(Deserialize, JsonSchema)]
struct Word {
    word: String,
}

/// A registry with one tool, `shout`, that upper-cases a word.
pub(crate) fn shout_tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools
        .register_fn("shout", "Upper-case a word.", |args: Word| async move {
            Ok::<_, ToolError>(args.word.to_uppercase())
        })
        .unwrap();
    tools
}
