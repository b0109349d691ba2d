//! Tools made from async closures, so a custom tool needs no trait impl.

use std::future::Future;
use std::marker::PhantomData;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::tool::Tool;

/// A [`Tool`] whose behaviour is a closure taking the context (by value) and the arguments.
pub(crate) struct FnTool<A, O, F> {
    name: String,
    description: String,
    f: F,
    // `fn(A) -> O` keeps the tool Send + Sync whatever A and O are.
    _types: PhantomData<fn(A) -> O>,
}

impl<A, O, F> FnTool<A, O, F> {
    pub(crate) fn new(name: &str, description: &str, f: F) -> Self {
        FnTool {
            name: name.to_string(),
            description: description.to_string(),
            f,
            _types: PhantomData,
        }
    }
}

#[async_trait]
impl<A, O, F, Fut> Tool for FnTool<A, O, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
{
    type Args = A;
    type Output = O;

    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, ctx: &ToolContext, args: A) -> Result<O, ToolError> {
        (self.f)(ctx.clone(), args).await
    }
}
