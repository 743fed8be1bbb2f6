//! The tool registry: registration, lookup, listing, and the one guarded execution path.
//!
//! [`ToolRegistry::execute`] is the only way the library runs a tool: it looks the name up (an
//! unknown name gets close-match suggestions), validates the arguments against the tool's JSON
//! Schema with a validator compiled once at registration, then runs the tool bounded by the
//! context's deadline and cancellation and checks the size of its output. There is no unvalidated
//! "direct" path, which is one of the flaws of the system this library replaces.
//!
//! [`FnTool`] (in `fn_tool`) adapts an async closure into a [`Tool`]; the checks every call
//! passes live in `guard`. This module does not define any built-in
//! tool: those live in their own module and are added with [`ToolRegistry::register_all`].
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use toolbridge_tools::{FnTool, ToolContext, ToolRegistry};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), toolbridge_tools::ToolError> {
//! let mut registry = ToolRegistry::empty();
//! registry.register(Arc::new(FnTool::new(
//!     "add",
//!     "Adds two integers.",
//!     json!({
//!         "type": "object",
//!         "properties": { "a": { "type": "integer" }, "b": { "type": "integer" } },
//!         "required": ["a", "b"],
//!         "additionalProperties": false
//!     }),
//!     |args, _ctx| async move {
//!         let a = args["a"].as_i64().unwrap_or_default();
//!         let b = args["b"].as_i64().unwrap_or_default();
//!         Ok(json!(a + b))
//!     },
//! )))?;
//!
//! let ctx = ToolContext::default();
//! assert_eq!(registry.execute("add", json!({"a": 1, "b": 1}), &ctx).await?, json!(2));
//!
//! // Arguments are always checked against the schema, with the failing JSON pointer.
//! let err = registry.execute("add", json!({"a": 1, "b": "one"}), &ctx).await.unwrap_err();
//! assert_eq!(err.code(), "invalid_arguments");
//!
//! // An unknown name suggests close matches.
//! let err = registry.execute("Add", json!({}), &ctx).await.unwrap_err();
//! assert_eq!(
//!     err,
//!     toolbridge_tools::ToolError::UnknownTool { name: "Add".into(), suggestions: vec!["add".into()] }
//! );
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::suggest::close_matches;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

mod fn_tool;
mod guard;
#[cfg(test)]
mod tests;

pub use fn_tool::FnTool;
use guard::run_bounded;
pub(crate) use guard::{
    check_arguments, check_output_size, compile_parameters, pointer_or_root, wait_cancelled,
};

/// The longest tool name accepted.
pub const MAX_NAME_LEN: usize = 64;

/// Checks a tool name against `[A-Za-z0-9_-]{1,64}`.
pub fn validate_name(name: &str) -> Result<(), ToolError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ToolError::InvalidName(name.to_owned()))
    }
}

/// What [`ToolRegistry::list`] says about one tool: enough to offer it to a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    /// The registered name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON Schema of the arguments object.
    pub parameters: Value,
    /// The tool's capability tags.
    pub capabilities: Vec<String>,
    /// The tool's category, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// A registered tool with its schema and the validator compiled from it.
#[derive(Clone)]
struct Entry {
    tool: Arc<dyn Tool>,
    parameters: Value,
    validator: Arc<jsonschema::Validator>,
}

/// Tools by name. Register while building, then share it (typically in an `Arc`) and call
/// [`ToolRegistry::execute`].
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Entry>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRegistry {
    /// A registry with no tools.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Registers a tool: the name must be valid and unused, and its parameter schema must be an
    /// object schema (`"type": "object"`) that compiles. The validator is compiled here, once.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), ToolError> {
        let name = tool.name().to_owned();
        validate_name(&name)?;
        if self.tools.contains_key(&name) {
            return Err(ToolError::Duplicate(name));
        }
        let parameters = tool.parameters();
        let validator = compile_parameters(&name, &parameters)?;
        self.tools.insert(
            name,
            Entry {
                tool,
                parameters,
                validator: Arc::new(validator),
            },
        );
        Ok(())
    }

    /// Registers every tool, stopping at the first error (tools before it stay registered).
    ///
    /// This is the hook a set of built-in tools uses: `registry.register_all(builtins)`.
    pub fn register_all(
        &mut self,
        tools: impl IntoIterator<Item = Arc<dyn Tool>>,
    ) -> Result<(), ToolError> {
        tools.into_iter().try_for_each(|tool| self.register(tool))
    }

    /// A registry holding exactly these tools.
    pub fn with_tools(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<Self, ToolError> {
        let mut registry = Self::empty();
        registry.register_all(tools)?;
        Ok(registry)
    }

    /// A registry with the built-ins that need no configuration (calculator, hash, strings, ids,
    /// regex, json). The configured ones (web, files, pdf) come from
    /// [`crate::builtins::configured`].
    ///
    /// ```
    /// # tokio_test_block_on(async {
    /// use serde_json::json;
    /// use toolbridge_tools::{ToolContext, ToolRegistry};
    ///
    /// let registry = ToolRegistry::with_builtins().unwrap();
    /// let out = registry
    ///     .execute("calculator", json!({"expression": "1+1"}), &ToolContext::default())
    ///     .await
    ///     .unwrap();
    /// assert_eq!(out["result"], 2);
    /// # });
    /// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    /// # }
    /// ```
    pub fn with_builtins() -> Result<Self, ToolError> {
        Self::with_tools(crate::builtins::all())
    }

    /// Removes a tool and returns it; an unknown name is an error with suggestions.
    pub fn unregister(&mut self, name: &str) -> Result<Arc<dyn Tool>, ToolError> {
        match self.tools.remove(name) {
            Some(entry) => Ok(entry.tool),
            None => Err(self.unknown(name)),
        }
    }

    /// The tool registered under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name).map(|entry| Arc::clone(&entry.tool))
    }

    /// True when a tool is registered under `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Every tool's name, description, parameters, capabilities and category, sorted by name.
    pub fn list(&self) -> Vec<ToolInfo> {
        self.tools
            .iter()
            .map(|(name, entry)| ToolInfo {
                name: name.clone(),
                description: entry.tool.description().to_owned(),
                parameters: entry.parameters.clone(),
                capabilities: entry
                    .tool
                    .capabilities()
                    .iter()
                    .map(|c| (*c).to_owned())
                    .collect(),
                category: entry.tool.category().map(str::to_owned),
            })
            .collect()
    }

    /// The structured error for a name that is not registered, with close matches.
    pub fn unknown(&self, name: &str) -> ToolError {
        ToolError::UnknownTool {
            name: name.to_owned(),
            suggestions: close_matches(name, self.names()),
        }
    }

    /// Checks `args` against the schema of tool `name` without running it.
    pub fn validate(&self, name: &str, args: &Value) -> Result<(), ToolError> {
        let entry = self.tools.get(name).ok_or_else(|| self.unknown(name))?;
        check_arguments(&entry.validator, args)
    }

    /// Looks the tool up, validates `args` against its schema, and runs it under `ctx`: the
    /// deadline ([`ToolError::Timeout`]), cancellation ([`ToolError::Cancelled`]) and output
    /// limit ([`ToolError::OutputTooLarge`]) are enforced here, whatever the tool does.
    pub async fn execute(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.execute_observed(name, args, ctx).await.result
    }

    /// [`ToolRegistry::execute`], also saying whether and for how long the tool itself ran, so
    /// that callers can record evidence only for real executions.
    pub async fn execute_observed(&self, name: &str, args: Value, ctx: &ToolContext) -> Observed {
        let entry = match self.tools.get(name) {
            Some(entry) => entry,
            None => return Observed::rejected(self.unknown(name)),
        };
        if let Err(err) = check_arguments(&entry.validator, &args) {
            return Observed::rejected(err);
        }
        let started = Instant::now();
        let result = run_bounded(entry.tool.as_ref(), args, ctx).await;
        Observed {
            result,
            ran_for: Some(started.elapsed()),
        }
    }
}

/// The outcome of [`ToolRegistry::execute_observed`].
#[derive(Debug)]
pub struct Observed {
    /// The tool's output or the error.
    pub result: Result<ToolOutput, ToolError>,
    /// `Some` when the tool was started (arguments were valid), with the time it took; `None`
    /// when the call was rejected before (unknown name, invalid arguments).
    pub ran_for: Option<Duration>,
}

impl Observed {
    fn rejected(err: ToolError) -> Self {
        Self {
            result: Err(err),
            ran_for: None,
        }
    }
}
