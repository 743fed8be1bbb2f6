//! [`FnTool`]: a [`Tool`] made from an async closure, for tools that need no type of their own.

use std::fmt;
use std::future::Future;

use serde_json::Value;

use crate::tool::{BoxFuture, Tool, ToolContext, ToolError, ToolOutput};

type BoxedFn =
    dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync;

/// A [`Tool`] made from an async closure `|args, ctx| async move { … }`.
///
/// The closure receives the validated arguments and its own clone of the [`ToolContext`].
pub struct FnTool {
    name: String,
    description: String,
    parameters: Value,
    capabilities: Vec<&'static str>,
    category: Option<String>,
    run: Box<BoxedFn>,
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

impl FnTool {
    /// A tool named `name` whose arguments follow `parameters` (a JSON Schema object) and that
    /// runs `run`. The name and schema are checked when the tool is registered.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        run: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            capabilities: Vec::new(),
            category: None,
            run: Box::new(move |args, ctx| Box::pin(run(args, ctx))),
        }
    }

    /// Sets the capability tags the planner can match (`math`, `hash`, …).
    pub fn with_capabilities(mut self, capabilities: &[&'static str]) -> Self {
        self.capabilities = capabilities.to_vec();
        self
    }

    /// Sets the tool's category.
    pub fn with_category(mut self, category: impl Into<String>) -> Self {
        self.category = Some(category.into());
        self
    }
}

impl Tool for FnTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn capabilities(&self) -> &[&str] {
        &self.capabilities
    }

    fn category(&self) -> Option<&str> {
        self.category.as_deref()
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        (self.run)(args, ctx.clone())
    }
}
