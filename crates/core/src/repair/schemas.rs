//! [`ToolSchemas`]: every declared tool's check, compiled once per tool set (requests with the
//! same tools share one through [`super::SchemaCache`]).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_wire::RawJson;
use toolbridge_wire::responses::{CustomTool, Diagnostic, Tool};

use super::Outcome;
use super::arguments::{CompiledSchema, repair_arguments};
use super::custom::repair_custom_input;
use super::lark::Grammar;
use crate::canonical::CallKind;
use crate::diagnostics::{CUSTOM_INPUT_UNCHECKED, diag};
use crate::plan::{Identity, schemas};

/// How one tool's calls are checked.
#[derive(Debug, Clone)]
pub enum ToolCheck {
    /// JSON arguments against a compiled schema.
    Arguments(CompiledSchema),
    /// Freeform input against a compiled Lark grammar.
    Grammar(Arc<Grammar>),
    /// A freeform tool without a grammar: any text is its input.
    Freeform,
    /// Nothing can be checked; the reason says why (a schema or grammar that did not compile,
    /// a grammar syntax other than Lark).
    Unchecked(String),
}

/// The checks of a request's declared tools, by identity (what the plan's `NameMap` gives for a
/// provider name).
#[derive(Debug, Clone, Default)]
pub struct ToolSchemas {
    checks: HashMap<Identity, ToolCheck>,
}

impl ToolSchemas {
    /// Compiles the checks of `tools` (namespaces included). A schema or grammar that does not
    /// compile leaves its tool unchecked; it never fails the request.
    pub fn from_tools(tools: &[Tool]) -> Self {
        Self::compile(tools, &mut |definition| {
            Grammar::compile(definition).map(Arc::new)
        })
    }

    /// Compiles like [`Self::from_tools`], taking each Lark grammar from `grammar` (a cache).
    pub(super) fn compile(
        tools: &[Tool],
        grammar: &mut dyn FnMut(&str) -> Result<Arc<Grammar>, String>,
    ) -> Self {
        let mut out = Self::default();
        for tool in tools {
            out.add(None, tool, grammar);
        }
        out
    }

    fn add(
        &mut self,
        namespace: Option<&str>,
        tool: &Tool,
        grammar: &mut dyn FnMut(&str) -> Result<Arc<Grammar>, String>,
    ) {
        let ns = namespace.map(str::to_owned);
        match tool {
            Tool::Function(f) => {
                let empty = json!({"type": "object"});
                let schema = f.parameters.as_ref().map_or(&empty, RawJson::value);
                let identity = Identity::Function {
                    namespace: ns,
                    name: f.name.clone(),
                };
                self.checks
                    .insert(identity, arguments_check(&f.name, schema));
            }
            Tool::Custom(c) => {
                let identity = Identity::Custom {
                    namespace: ns,
                    name: c.name.clone(),
                };
                self.checks.insert(identity, grammar_check(c, grammar));
            }
            Tool::Namespace(n) => {
                for child in &n.tools {
                    self.add(Some(&n.name), child, grammar);
                }
            }
            Tool::Other(_) => {
                let kind = tool.kind();
                if matches!(kind, "local_shell" | "shell" | "apply_patch") {
                    let (identity, _, parameters, _) = schemas::builtin(kind);
                    self.checks
                        .insert(identity, arguments_check(kind, &parameters));
                } else if let Tool::Other(map) = tool
                    && kind == "tool_search"
                {
                    let parameters = crate::plan::tool_search_parameters(map.get("parameters"));
                    self.checks
                        .insert(Identity::ToolSearch, arguments_check(kind, &parameters));
                }
            }
        }
    }

    /// One diagnostic per declared tool whose calls cannot be checked, to report once per
    /// request rather than on every call.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut out: Vec<Diagnostic> = self
            .checks
            .iter()
            .filter_map(|(identity, check)| match check {
                ToolCheck::Unchecked(reason) => Some(diag(
                    CUSTOM_INPUT_UNCHECKED,
                    None,
                    format!(
                        "calls to `{}` are not checked: {reason}",
                        identity.declared_name()
                    ),
                )),
                _ => None,
            })
            .collect();
        out.sort_by(|a, b| a.message.cmp(&b.message));
        out
    }

    /// The check of one tool.
    pub fn get(&self, identity: &Identity) -> Option<&ToolCheck> {
        self.checks.get(identity)
    }

    /// Checks and repairs a call's payload before restoration: function arguments (also the
    /// degraded function form of `local_shell`, `shell` and `apply_patch`) or a custom tool's
    /// raw input (already unwrapped, as `restore::custom_input` gives it). An undeclared tool
    /// only gets its arguments' JSON checked.
    pub fn repair(&self, identity: Option<&Identity>, payload: &str) -> Outcome {
        match identity.and_then(|id| self.checks.get(id)) {
            Some(ToolCheck::Arguments(schema)) => repair_arguments(payload, Some(schema)),
            Some(ToolCheck::Grammar(grammar)) => repair_custom_input(payload, grammar),
            Some(ToolCheck::Freeform) => Outcome::Valid(payload.to_owned()),
            Some(ToolCheck::Unchecked(reason)) => Outcome::Unchecked {
                text: payload.to_owned(),
                reason: reason.clone(),
            },
            None => match identity {
                Some(Identity::Custom { .. }) => Outcome::Unchecked {
                    text: payload.to_owned(),
                    reason: "the tool was not declared".to_owned(),
                },
                _ => repair_arguments(payload, None),
            },
        }
    }

    /// Checks a restored `function_call` or `custom_tool_call` and puts the repaired text in
    /// place; other call kinds are already typed and answer `None`.
    pub fn repair_restored(&self, call: &mut CallKind) -> Option<Outcome> {
        let identity = call.identity();
        let payload = match call {
            CallKind::Function { arguments, .. } => arguments,
            CallKind::Custom { input, .. } => input,
            _ => return None,
        };
        let outcome = self.repair(Some(&identity), payload);
        if let Outcome::Repaired { text, .. } = &outcome {
            payload.clone_from(text);
        }
        Some(outcome)
    }
}

fn arguments_check(name: &str, schema: &Value) -> ToolCheck {
    match CompiledSchema::compile(name, schema) {
        Ok(compiled) => ToolCheck::Arguments(compiled),
        Err(e) => ToolCheck::Unchecked(format!(
            "the parameters schema of `{name}` does not compile: {e}"
        )),
    }
}

fn grammar_check(
    tool: &CustomTool,
    grammar: &mut dyn FnMut(&str) -> Result<Arc<Grammar>, String>,
) -> ToolCheck {
    let Some(format) = tool.format.as_ref().filter(|f| f.kind == "grammar") else {
        return ToolCheck::Freeform;
    };
    match (format.syntax.as_deref(), format.definition.as_deref()) {
        (Some("lark") | None, Some(definition)) => match grammar(definition) {
            Ok(grammar) => ToolCheck::Grammar(grammar),
            Err(e) => ToolCheck::Unchecked(format!(
                "the grammar of `{}` is outside the supported Lark subset: {e}",
                tool.name
            )),
        },
        (Some(other), _) => ToolCheck::Unchecked(format!("`{other}` grammars are not checked")),
        (_, None) => ToolCheck::Unchecked("the grammar has no definition".to_owned()),
    }
}
