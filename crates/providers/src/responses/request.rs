//! The request to a native Responses upstream: the client's own, with the gateway's concerns.

use serde_json::{Map, Value, json};
use toolbridge_core::plan::{ToolPlan, UpstreamTool};
use toolbridge_wire::responses::{CreateResponse, Diagnostic};

use super::reasoning::Provenance;
use crate::profile::Profile;

/// The client's request exactly as it came (a JSON object).
#[derive(Debug, Clone)]
pub struct Raw {
    body: Map<String, Value>,
    /// The gateway rebuilt the input (a `previous_response_id` chain, a conversation, item
    /// references, compaction): the typed input is the one to send.
    input_rebuilt: bool,
}

impl Raw {
    pub fn new(body: Map<String, Value>) -> Self {
        let rebuilt_by_gateway =
            |item: &Value| matches!(item["type"].as_str(), Some("item_reference" | "compaction"));
        let input_rebuilt = ["previous_response_id", "conversation"]
            .iter()
            .any(|k| body.get(*k).is_some_and(|v| !v.is_null()))
            || body
                .get("input")
                .and_then(Value::as_array)
                .is_some_and(|items| items.iter().any(rebuilt_by_gateway));
        Self {
            body,
            input_rebuilt,
        }
    }
}

/// What the gateway changes in a passed-through request.
pub struct Passthrough<'a> {
    /// The model name the upstream knows.
    pub upstream_model: &'a str,
    /// The gateway stores the response: ask for reasoning's `encrypted_content`, so a later turn
    /// rebuilt from the store can replay it (the upstream keeps nothing: `store: false`).
    pub keep_reasoning: bool,
    /// Whether an `encrypted_content` blob was sealed by the gateway (reasoning of another
    /// provider, which the upstream cannot open).
    pub sealed_by_gateway: &'a dyn Fn(&str) -> bool,
    /// This upstream's provider and the sealer of the gateway's blobs: reasoning the decoder
    /// sealed for this provider is replayed to it (`None`: every gateway blob is left out).
    pub provenance: Option<Provenance<'a>>,
}

/// The JSON body for the upstream: the client's own (`raw`, else the typed request written
/// out), with the input the gateway rebuilt when it rebuilt it. The gateway owns state, so what it expanded itself
/// (`previous_response_id`, `conversation`) and what it runs itself (`background`) are removed,
/// and `store` is false upstream. Tools are the plan's (every declared tool as declared, minus any
/// the plan left out). The profile's `extra_body` is merged last.
pub fn build(
    req: &CreateResponse,
    raw: Option<&Raw>,
    plan: &ToolPlan,
    profile: &Profile,
    pass: &Passthrough<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Value {
    let typed = || match serde_json::to_value(req) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let mut body = match raw {
        Some(raw) => {
            let mut body = raw.body.clone();
            if raw.input_rebuilt
                && let Some(input) = typed().remove("input")
            {
                body.insert("input".to_owned(), input);
            }
            body
        }
        None => typed(),
    };
    body.insert("model".to_owned(), json!(pass.upstream_model));
    for gateway_owned in ["previous_response_id", "conversation", "background"] {
        body.remove(gateway_owned);
    }
    body.insert("store".to_owned(), Value::Bool(false));
    // The client's own tools when its JSON is at hand and the plan passes every tool as
    // declared; else the plan's, with the history and `tool_choice` in the forms it chose.
    let planned = !plan.passes_tools_as_declared();
    if raw.is_none() || planned {
        let tools: Vec<Value> = plan.upstream.iter().filter_map(render_tool).collect();
        if tools.is_empty() {
            body.remove("tools");
        } else {
            body.insert("tools".to_owned(), Value::Array(tools));
        }
    }
    if planned {
        match &plan.tool_choice {
            Some(choice) if body.contains_key("tool_choice") => {
                body.insert("tool_choice".to_owned(), choice.clone());
            }
            _ => {}
        }
        if let Some(Value::Array(items)) = body.get_mut("input") {
            super::history::encode(items, plan);
        }
    }
    if pass.keep_reasoning {
        ask_for_encrypted_reasoning(&mut body);
    }
    if let Some(Value::Array(items)) = body.get_mut("input") {
        super::reasoning::replay(
            items,
            pass.sealed_by_gateway,
            pass.provenance,
            profile.reasoning_replay,
            diagnostics,
        );
    }
    crate::fields::apply(&mut body, &profile.fields, diagnostics);
    for (key, value) in &profile.extra_body {
        body.insert(key.clone(), value.clone());
    }
    Value::Object(body)
}

/// One planned tool in the Responses shape.
fn render_tool(tool: &UpstreamTool) -> Option<Value> {
    match tool {
        UpstreamTool::Native(native) => crate::native::render(native),
        UpstreamTool::Function {
            name,
            description,
            parameters,
            strict,
        } => {
            let mut f = Map::new();
            f.insert("type".to_owned(), json!("function"));
            f.insert("name".to_owned(), json!(name));
            if let Some(d) = description {
                f.insert("description".to_owned(), json!(d));
            }
            f.insert("parameters".to_owned(), parameters.to_value());
            if let Some(s) = strict {
                f.insert("strict".to_owned(), json!(s));
            }
            Some(Value::Object(f))
        }
    }
}

const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

fn ask_for_encrypted_reasoning(body: &mut Map<String, Value>) {
    let include = body
        .entry("include")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = include
        && !list.iter().any(|v| v == ENCRYPTED_REASONING)
    {
        list.push(json!(ENCRYPTED_REASONING));
    }
}
