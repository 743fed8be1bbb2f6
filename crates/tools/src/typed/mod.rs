//! The typed tool source: a tool defined once by a Rust type, a sealed registry, and per-stage
//! read-only views that turn a model's raw arguments into a typed value.
//!
//! A [`ModelToolRegistry`] collects tools, each defined by an input type `I` (its JSON Schema is
//! derived from `I` with [`schemars`], so the schema and the parser cannot drift apart) and a
//! resolver `Fn(I) -> O`. [`ModelToolRegistry::seal`] checks ids and compiles every schema once,
//! giving an immutable [`SealedToolRegistry`] ([`SealedToolRegistry::extend`] adds tools known
//! later, such as one request's, without compiling the others again). [`SealedToolRegistry::select`] projects the subset
//! one stage may use as a [`ToolSelection`]. Both implement [`ModelToolSource`], whose `resolve`
//! validates the raw JSON against the schema, parses it into `I`, runs the resolver, and returns
//! a typed error instead of panicking:
//!
//! | failure | [`ToolError`] | code |
//! |---|---|---|
//! | the id is not registered | [`ToolError::UnknownTool`] (close matches) | `unknown_tool` |
//! | registered, not in this stage's selection | [`ToolError::NotInStage`] | `not_in_stage` |
//! | the input does not match the schema or type | [`ToolError::InvalidArguments`] (JSON pointer) | `invalid_arguments` |
//!
//! A tool's schema may also be written by hand with its own parse function
//! ([`define_schema`], [`ModelToolRegistry::schema_tool`], in `schema`); it is compiled and
//! checked the same way. A [`ModelSelection`] keeps the [`NativeCall`] that carried it (id,
//! provider-side name, argument length). The model transport (`transport`,
//! [`create_model_transport`]) reads a provider's function call in the Chat, Anthropic or Gemini
//! shape, maps its name through a [`NameMap`] and resolves it for a stage. The sealed registry
//! and a selection are [`crate::ToolProvider`]s (in `provider`), so the planner can plan over
//! them; [`ModelToolRegistry::with_capabilities`] and [`ModelToolRegistry::with_category`] tag
//! the tool added last.
//!
//! This module does not execute anything: resolving gives a value (often an enum of actions) that
//! the stage then acts on. Executable tools live in [`crate::registry`].
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//! use toolbridge_tools::typed::{ModelSelection, ModelToolRegistry, ModelToolSource};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Greet {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Status {}
//!
//! #[derive(Debug, PartialEq)]
//! enum Action {
//!     Greet(String),
//!     Status,
//! }
//!
//! let tools = ModelToolRegistry::new()
//!     .tool("greet", "Greets someone.", |g: Greet| Action::Greet(g.name))
//!     .tool("status", "Reports the status.", |_: Status| Action::Status)
//!     .seal()?;
//!
//! let recognise = tools.select(["greet"])?;
//! let action = recognise.resolve(&ModelSelection::new("greet", json!({"name": "Ada"})), "recognise")?;
//! assert_eq!(action, Action::Greet("Ada".into()));
//!
//! // Registered, but not offered to this stage.
//! let err = recognise.resolve(&ModelSelection::new("status", json!({})), "recognise").unwrap_err();
//! assert_eq!(err.code(), "not_in_stage");
//!
//! // Wrong input: the error carries the JSON pointer of the failing value.
//! let err = recognise.resolve(&ModelSelection::new("greet", json!({"name": 7})), "recognise").unwrap_err();
//! assert!(matches!(err, toolbridge_tools::ToolError::InvalidArguments { ref path, .. } if path == "/name"));
//! # Ok::<(), toolbridge_tools::ToolError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

pub use schemars;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::registry::{check_arguments, compile_parameters, pointer_or_root, validate_name};
use crate::suggest::close_matches;
use crate::tool::ToolError;

mod provider;
mod schema;
mod selection;
mod transport;

pub use schema::{InputSchema, define_schema};
pub use selection::ToolSelection;
pub use transport::{Dialect, ModelTransport, NameMap, create_model_transport};

type Resolver<O> = dyn Fn(Value) -> Result<O, ToolError> + Send + Sync;

/// One typed tool: an id, a description, the schema derived from its input type, and the parser
/// plus resolver for that type.
pub struct TypedTool<O> {
    id: String,
    description: String,
    parameters: Value,
    capabilities: Vec<String>,
    category: Option<String>,
    validator: jsonschema::Validator,
    resolve: Box<Resolver<O>>,
}

impl<O> fmt::Debug for TypedTool<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedTool")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl<O> TypedTool<O> {
    /// The id the model selects the tool by.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What the tool does, for the model.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of the input (derived from the input type, or written by hand).
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// The capability tags set with [`ModelToolRegistry::with_capabilities`].
    pub fn capabilities(&self) -> &[String] {
        &self.capabilities
    }

    /// The category set with [`ModelToolRegistry::with_category`].
    pub fn category(&self) -> Option<&str> {
        self.category.as_deref()
    }

    fn resolve_input(&self, input: &Value) -> Result<O, ToolError> {
        check_arguments(&self.validator, input)?;
        (self.resolve)(input.clone())
    }
}

/// A tool waiting for [`ModelToolRegistry::seal`]: the schema is derived but not yet compiled.
struct PendingTool<O> {
    id: String,
    description: String,
    parameters: Value,
    capabilities: Vec<String>,
    category: Option<String>,
    resolve: Box<Resolver<O>>,
}

/// Collects typed tools; [`ModelToolRegistry::seal`] makes it immutable.
pub struct ModelToolRegistry<O> {
    pending: Vec<PendingTool<O>>,
}

impl<O> fmt::Debug for ModelToolRegistry<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.pending.iter().map(|p| &p.id))
            .finish()
    }
}

impl<O> Default for ModelToolRegistry<O> {
    fn default() -> Self {
        Self {
            pending: Vec::new(),
        }
    }
}

impl<O: 'static> ModelToolRegistry<O> {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool whose arguments are an `I` (schema derived from `I`) and whose selection
    /// resolves to `resolve(input)`. Ids and schemas are checked by [`ModelToolRegistry::seal`].
    pub fn tool<I, F>(
        self,
        id: impl Into<String>,
        description: impl Into<String>,
        resolve: F,
    ) -> Self
    where
        I: DeserializeOwned + JsonSchema,
        F: Fn(I) -> O + Send + Sync + 'static,
    {
        let parameters = schemars::schema_for!(I).to_value();
        let parse = move |input: Value| -> Result<O, ToolError> {
            let typed: I = serde_path_to_error::deserialize(input).map_err(|err| {
                ToolError::InvalidArguments {
                    path: pointer_from_path(err.path()),
                    message: err.inner().to_string(),
                }
            })?;
            Ok(resolve(typed))
        };
        self.push(id.into(), description.into(), parameters, Box::new(parse))
    }

    fn push(
        mut self,
        id: String,
        description: String,
        parameters: Value,
        resolve: Box<Resolver<O>>,
    ) -> Self {
        self.pending.push(PendingTool {
            id,
            description,
            parameters,
            capabilities: Vec::new(),
            category: None,
            resolve,
        });
        self
    }

    /// Sets the capability tags (for the planner) of the tool added last.
    pub fn with_capabilities<S: Into<String>>(mut self, tags: impl IntoIterator<Item = S>) -> Self {
        if let Some(last) = self.pending.last_mut() {
            last.capabilities = tags.into_iter().map(Into::into).collect();
        }
        self
    }

    /// Sets the category of the tool added last.
    pub fn with_category(mut self, category: impl Into<String>) -> Self {
        if let Some(last) = self.pending.last_mut() {
            last.category = Some(category.into());
        }
        self
    }

    /// Checks every id (`[A-Za-z0-9_-]{1,64}`, no duplicates) and compiles every schema once;
    /// the result cannot change any more.
    pub fn seal(self) -> Result<SealedToolRegistry<O>, ToolError> {
        self.seal_onto(BTreeMap::new())
    }

    /// Seals the pending tools into `tools` (tools already sealed, shared).
    fn seal_onto(
        self,
        mut tools: BTreeMap<String, Arc<TypedTool<O>>>,
    ) -> Result<SealedToolRegistry<O>, ToolError> {
        for pending in self.pending {
            validate_name(&pending.id)?;
            if tools.contains_key(&pending.id) {
                return Err(ToolError::Duplicate(pending.id));
            }
            let validator = compile_parameters(&pending.id, &pending.parameters)?;
            tools.insert(
                pending.id.clone(),
                Arc::new(TypedTool {
                    id: pending.id,
                    description: pending.description,
                    parameters: pending.parameters,
                    capabilities: pending.capabilities,
                    category: pending.category,
                    validator,
                    resolve: pending.resolve,
                }),
            );
        }
        Ok(SealedToolRegistry {
            tools: Arc::new(tools),
        })
    }
}

/// The selection a model made: which tool, and its arguments exactly as the model produced them.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSelection {
    /// The id of the selected tool.
    pub tool_id: String,
    /// The raw arguments, before schema validation and parsing.
    pub input: Value,
    /// The native function call that carried the selection, when the provider used one.
    pub call: Option<NativeCall>,
}

/// The provider's function call behind a [`ModelSelection`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeCall {
    /// The call id as the provider gave it (empty when the dialect has none, as older Gemini).
    pub id: String,
    /// The tool name as the provider saw it (before the name map).
    pub name: String,
    /// The length of the raw arguments text, in characters.
    pub argument_chars: usize,
}

impl ModelSelection {
    /// A selection of `tool_id` with raw `input`, not carried by a native call.
    pub fn new(tool_id: impl Into<String>, input: Value) -> Self {
        Self {
            tool_id: tool_id.into(),
            input,
            call: None,
        }
    }

    /// The same selection, carried by `call`.
    pub fn with_call(mut self, call: NativeCall) -> Self {
        self.call = Some(call);
        self
    }
}

/// What a stage needs from a source of tools: list them, and resolve one selection.
pub trait ModelToolSource<O> {
    /// The tools this source offers, sorted by id.
    fn tools(&self) -> Vec<&TypedTool<O>>;

    /// Validates and parses the selection's input and resolves it; `stage` names the stage for
    /// errors. Never panics on any input.
    fn resolve(&self, selection: &ModelSelection, stage: &str) -> Result<O, ToolError>;
}

/// An immutable set of typed tools. Cheap to clone (shared).
pub struct SealedToolRegistry<O> {
    tools: Arc<BTreeMap<String, Arc<TypedTool<O>>>>,
}

impl<O> Clone for SealedToolRegistry<O> {
    fn clone(&self) -> Self {
        Self {
            tools: Arc::clone(&self.tools),
        }
    }
}

impl<O> Default for SealedToolRegistry<O> {
    /// No tools.
    fn default() -> Self {
        Self {
            tools: Arc::new(BTreeMap::new()),
        }
    }
}

impl<O> fmt::Debug for SealedToolRegistry<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.tools.keys()).finish()
    }
}

impl<O> SealedToolRegistry<O> {
    /// Every id, sorted.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// The tool with this id.
    pub fn get(&self, id: &str) -> Option<&TypedTool<O>> {
        self.tools.get(id).map(|tool| &**tool)
    }

    /// A new sealed registry: these tools (shared, not compiled again) and `more`'s, checked
    /// and compiled as [`ModelToolRegistry::seal`] does (an id already here is
    /// [`ToolError::Duplicate`]). For tools known only later, such as one request's own.
    pub fn extend(&self, more: ModelToolRegistry<O>) -> Result<Self, ToolError>
    where
        O: 'static,
    {
        more.seal_onto(self.tools.as_ref().clone())
    }

    /// A read-only view of the tools one stage may use. Every id must be registered; an unknown
    /// id is an [`ToolError::UnknownTool`] error with suggestions.
    pub fn select<S: AsRef<str>>(
        &self,
        ids: impl IntoIterator<Item = S>,
    ) -> Result<ToolSelection<O>, ToolError> {
        let mut allowed = BTreeSet::new();
        for id in ids {
            let id = id.as_ref();
            if !self.tools.contains_key(id) {
                return Err(self.unknown(id));
            }
            allowed.insert(id.to_owned());
        }
        Ok(ToolSelection {
            registry: self.clone(),
            allowed,
        })
    }

    fn unknown(&self, id: &str) -> ToolError {
        ToolError::UnknownTool {
            name: id.to_owned(),
            suggestions: close_matches(id, self.ids()),
        }
    }

    fn lookup(&self, id: &str) -> Result<&TypedTool<O>, ToolError> {
        self.get(id).ok_or_else(|| self.unknown(id))
    }
}

impl<O> ModelToolSource<O> for SealedToolRegistry<O> {
    fn tools(&self) -> Vec<&TypedTool<O>> {
        self.tools.values().map(|tool| &**tool).collect()
    }

    fn resolve(&self, selection: &ModelSelection, _stage: &str) -> Result<O, ToolError> {
        self.lookup(&selection.tool_id)?
            .resolve_input(&selection.input)
    }
}

/// Turns serde_path_to_error's path into a JSON pointer (RFC 6901 escaping).
fn pointer_from_path(path: &serde_path_to_error::Path) -> String {
    let mut pointer = String::new();
    for segment in path {
        pointer.push('/');
        match segment {
            serde_path_to_error::Segment::Seq { index } => pointer.push_str(&index.to_string()),
            serde_path_to_error::Segment::Map { key } => {
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            serde_path_to_error::Segment::Enum { variant } => pointer.push_str(variant),
            serde_path_to_error::Segment::Unknown => pointer.push('?'),
        }
    }
    pointer_or_root(pointer)
}
