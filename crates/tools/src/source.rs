//! [`ToolSource`]: a set of tools that changes while registries hold it (the tools of an MCP
//! server, which may add and remove tools at any time).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::json_tool::JsonTool;

/// Tools whose list can change after registration. Register it with
/// [`crate::ToolRegistry::register_source`]: every registry (and every clone of one) holding
/// the source offers the tools it lists *now* — in [`crate::ToolRegistry::definitions`], so a
/// model sees a change on its next turn, and in [`crate::ToolRegistry::dispatch`], so a tool
/// that is gone answers as an unknown tool. Calls go through the registry's one dispatch path
/// like any other tool's (arguments checked against the schema, timeouts, output cap).
///
/// A tool the registry cannot offer (an invalid name, a schema that is not an object, a name
/// another tool of the registry already has) is left out; registered tools always win over a
/// source's, and an earlier source over a later one.
pub trait ToolSource: Send + Sync + 'static {
    /// What the tools come from, for messages (e.g. "MCP server `time`").
    fn label(&self) -> &str;

    /// The tools offered now, in order. Called for every definitions list and every call, so
    /// it should be a cheap snapshot of a list kept up to date elsewhere.
    fn tools(&self) -> Arc<[Arc<dyn JsonTool>]>;
}

/// A shared [`JsonTool`] is a [`JsonTool`], so a source's tools can be called through the same
/// erased path as registered ones.
#[async_trait]
impl<T: JsonTool + ?Sized> JsonTool for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn description(&self) -> &str {
        (**self).description()
    }

    fn parameters(&self) -> &Value {
        (**self).parameters()
    }

    fn timeout(&self) -> Option<Duration> {
        (**self).timeout()
    }

    async fn call(&self, ctx: &ToolContext, args: Map<String, Value>) -> Result<String, ToolError> {
        (**self).call(ctx, args).await
    }
}

/// Which of a source's tools one registry offers: all but those removed from it, or only those
/// kept by [`crate::ToolRegistry::retain`] (tools the source lists later are not among them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SourceFilter {
    AllBut(BTreeSet<String>),
    Only(BTreeSet<String>),
}

impl Default for SourceFilter {
    fn default() -> Self {
        SourceFilter::AllBut(BTreeSet::new())
    }
}

impl SourceFilter {
    pub(crate) fn allows(&self, name: &str) -> bool {
        match self {
            SourceFilter::AllBut(removed) => !removed.contains(name),
            SourceFilter::Only(kept) => kept.contains(name),
        }
    }

    /// Stop offering `name`.
    pub(crate) fn remove(&mut self, name: &str) {
        match self {
            SourceFilter::AllBut(removed) => {
                removed.insert(name.to_string());
            }
            SourceFilter::Only(kept) => {
                kept.remove(name);
            }
        }
    }

    /// Offer what either filter offers (a registry merged with another holding the source).
    pub(crate) fn union(&self, other: &SourceFilter) -> SourceFilter {
        use SourceFilter::{AllBut, Only};
        match (self, other) {
            (AllBut(a), AllBut(b)) => AllBut(a.intersection(b).cloned().collect()),
            (AllBut(removed), Only(kept)) | (Only(kept), AllBut(removed)) => {
                AllBut(removed.difference(kept).cloned().collect())
            }
            (Only(a), Only(b)) => Only(a.union(b).cloned().collect()),
        }
    }
}
