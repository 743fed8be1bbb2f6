//! Degraded calls of a planned native Responses upstream, restored in the relayed stream: a
//! `function_call` whose name the plan gave a degraded tool comes back as the item the client
//! declared — a `custom` tool's `custom_tool_call` (input unwrapped), a `local_shell_call`,
//! `shell_call` or `apply_patch_call`, a flattened namespace member's `function_call` with
//! `namespace` and `name`, a call through `call_found_tool` as the found tool's `function_call`. Only those items and their events are rewritten; every other event,
//! item and field passes untouched.
//!
//! A namespace member streams as it comes (only its names change). A call whose item type
//! changes is held from its `output_item.added` to its `output_item.done` — its arguments are
//! a function's, not the declared item's — and then shown whole: `output_item.added`, for a
//! custom tool one `custom_tool_call_input.delta` and `.done`, and `output_item.done`.
//!
//! Not here: the relay's own state machine (`relay`), and restoration itself
//! (`toolbridge_core::restore`).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};
use toolbridge_core::canonical::CallKind;
use toolbridge_core::plan::{Identity, NameMap, ToolPlan, UpstreamTool};
use toolbridge_core::restore::restore;

/// The restoration of one planned response's calls.
#[derive(Debug, Clone)]
pub struct Restorer {
    names: NameMap,
    /// Provider names that went upstream as functions standing for another declared form.
    degraded: HashSet<String>,
    /// Held calls by output index.
    held: HashMap<u64, Map<String, Value>>,
}

impl Restorer {
    /// The restorer of `plan`; `None` when no tool went upstream in another form (nothing to
    /// restore: the relay is a pure passthrough).
    pub fn new(plan: &ToolPlan) -> Option<Self> {
        if plan.passes_tools_as_declared() {
            return None;
        }
        let degraded: HashSet<String> = plan
            .upstream
            .iter()
            .filter_map(|u| match u {
                UpstreamTool::Function { name, .. } => Some(name.clone()),
                UpstreamTool::Native(_) => None,
            })
            .filter(|name| {
                !matches!(
                    plan.names.identity(name),
                    None | Some(Identity::Function {
                        namespace: None,
                        ..
                    })
                )
            })
            .collect();
        (!degraded.is_empty()).then(|| Self {
            names: plan.names.clone(),
            degraded,
            held: HashMap::new(),
        })
    }

    fn identity_of(&self, item: &Map<String, Value>) -> Option<&Identity> {
        if item.get("type").and_then(Value::as_str) != Some("function_call") {
            return None;
        }
        let name = item.get("name").and_then(Value::as_str)?;
        if !self.degraded.contains(name) {
            return None;
        }
        self.names.identity(name)
    }

    /// One upstream event (`kind` its type), rewritten: the events to forward in its place.
    pub fn on_event(
        &mut self,
        kind: &str,
        mut event: Map<String, Value>,
    ) -> Vec<Map<String, Value>> {
        let index = event.get("output_index").and_then(Value::as_u64);
        match kind {
            "response.output_item.added" => {
                let Some(item) = event.get("item").and_then(Value::as_object).cloned() else {
                    return vec![event];
                };
                match self.identity_of(&item) {
                    Some(Identity::Function { .. }) => {
                        event.insert("item".to_owned(), Value::Object(self.item(&item)));
                        vec![event]
                    }
                    Some(_) => {
                        if let Some(index) = index {
                            self.held.insert(index, item);
                        }
                        Vec::new()
                    }
                    None => vec![event],
                }
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done"
                if index.is_some_and(|i| self.held.contains_key(&i)) =>
            {
                Vec::new()
            }
            "response.function_call_arguments.done" => {
                // A namespace member's `done` names the member.
                if let Some(Value::String(name)) = event.get("name")
                    && self.degraded.contains(name)
                    && let Some(Identity::Function { name: member, .. }) = self.names.identity(name)
                {
                    let member = member.clone();
                    event.insert("name".to_owned(), json!(member));
                }
                vec![event]
            }
            "response.output_item.done" => {
                let Some(item) = event.get("item").and_then(Value::as_object).cloned() else {
                    return vec![event];
                };
                let held = index.and_then(|i| self.held.remove(&i));
                if self.identity_of(&item).is_none() {
                    return vec![event];
                }
                let restored = self.item(&item);
                if held.is_none() {
                    event.insert("item".to_owned(), Value::Object(restored));
                    return vec![event];
                }
                self.shown_whole(index.unwrap_or(0), restored)
            }
            _ => vec![event],
        }
    }

    /// The events of a held call, shown whole once complete.
    fn shown_whole(&self, index: u64, done: Map<String, Value>) -> Vec<Map<String, Value>> {
        let mut added = done.clone();
        added.insert("status".to_owned(), json!("in_progress"));
        let item_id = done.get("id").cloned().unwrap_or(Value::Null);
        // A custom tool's input, or the arguments of a call made through `call_found_tool`,
        // as one delta and its done event between the item's two.
        let streamed = [
            ("input", "response.custom_tool_call_input"),
            ("arguments", "response.function_call_arguments"),
        ]
        .into_iter()
        .find_map(|(field, events)| match added.get_mut(field) {
            Some(Value::String(text)) => Some((field, events, std::mem::take(text))),
            _ => None,
        });
        let mut out = Vec::with_capacity(4);
        out.push(event(
            "response.output_item.added",
            index,
            json!({"item": added}),
        ));
        if let Some((field, events, text)) = streamed {
            out.push(event(
                &format!("{events}.delta"),
                index,
                json!({"item_id": item_id, "delta": text}),
            ));
            let mut done = json!({"item_id": item_id});
            done[field] = json!(text);
            out.push(event(&format!("{events}.done"), index, done));
        }
        out.push(event(
            "response.output_item.done",
            index,
            json!({"item": done}),
        ));
        out
    }

    /// A finished response's output items, each degraded call restored.
    pub fn restore_output(&self, response: &mut Value) {
        let Some(Value::Array(items)) = response.get_mut("output") else {
            return;
        };
        for item in items.iter_mut() {
            if let Value::Object(map) = item
                && self.identity_of(map).is_some()
            {
                *map = self.item(map);
            }
        }
    }

    /// One complete `function_call` item as the item its tool was declared as.
    fn item(&self, item: &Map<String, Value>) -> Map<String, Value> {
        let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
        let arguments = item
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (kind, _) = restore(&self.names, name, arguments);
        let mut out = Map::new();
        let keep = |key: &str, out: &mut Map<String, Value>| {
            if let Some(v) = item.get(key) {
                out.insert(key.to_owned(), v.clone());
            }
        };
        match kind {
            CallKind::Function {
                namespace,
                name,
                arguments,
            } => {
                // The item as it came, named as declared (and, for a call through
                // `call_found_tool`, with the found tool's own arguments).
                let mut same = item.clone();
                same.insert("name".to_owned(), json!(name));
                same.insert("arguments".to_owned(), json!(arguments));
                if let Some(ns) = namespace {
                    same.insert("namespace".to_owned(), json!(ns));
                }
                return same;
            }
            CallKind::Custom {
                namespace,
                name,
                input,
            } => {
                out.insert("type".to_owned(), json!("custom_tool_call"));
                keep("id", &mut out);
                keep("call_id", &mut out);
                out.insert("name".to_owned(), json!(name));
                if let Some(ns) = namespace {
                    out.insert("namespace".to_owned(), json!(ns));
                }
                out.insert("input".to_owned(), json!(input));
            }
            CallKind::LocalShell { action } | CallKind::Shell { action } => {
                let kind = if matches!(self.names.identity(name), Some(Identity::LocalShell)) {
                    "local_shell_call"
                } else {
                    "shell_call"
                };
                out.insert("type".to_owned(), json!(kind));
                keep("id", &mut out);
                keep("call_id", &mut out);
                out.insert("action".to_owned(), action);
            }
            CallKind::ApplyPatch { operation } => {
                out.insert("type".to_owned(), json!("apply_patch_call"));
                keep("id", &mut out);
                keep("call_id", &mut out);
                out.insert("operation".to_owned(), operation);
            }
            CallKind::ToolSearch { arguments } => {
                out.insert("type".to_owned(), json!("tool_search_call"));
                keep("id", &mut out);
                keep("call_id", &mut out);
                out.insert("execution".to_owned(), json!("client"));
                out.insert("arguments".to_owned(), arguments);
            }
            CallKind::Gateway { .. } => return item.clone(),
        }
        keep("status", &mut out);
        out
    }
}

fn event(kind: &str, index: u64, fields: Value) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("type".to_owned(), json!(kind));
    out.insert("output_index".to_owned(), json!(index));
    if let Value::Object(fields) = fields {
        out.extend(fields);
    }
    out
}
