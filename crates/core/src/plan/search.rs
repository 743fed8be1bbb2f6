//! `tool_search` in the plan. The client-run form (`execution: "client"`, Codex's: the client
//! answers with a `tool_search_output` holding the tools it found) goes to a provider without
//! tool search as a function, by the profile's `tool_types.tool_search` (degraded by default);
//! its calls are restored as `tool_search_call` items. The hosted form (no `execution`, the
//! server searches the tools marked `defer_loading`) is served by the gateway when it runs tools
//! (`GatewayOffer::tool_search`: the declared `tool_search` and the deferred tools get the
//! `gateway` decision and nothing upstream; the gateway's own `tool_search` function is among
//! the offer's tools), and otherwise left out like any hosted tool the provider lacks.
//!
//! Not here: lifting the found tools into later rounds (`context`) and restoring the call
//! (`restore`).

use serde_json::{Map, Value, json};
use toolbridge_wire::responses::{Diagnostic, Tool};

use super::candidates::{Candidate, unsupported};
use super::{
    Decision, FoundTools, Identity, PlanEntry, ToolCapabilities, UpstreamTool, reasons, tool_types,
};
use crate::Error;
use crate::canonical::{ContextSource, ContextTool};
use crate::diagnostics::{TOOL_DEGRADED, diag};

/// What the degraded function tells the model, after the client's own description.
pub const TOOL_SEARCH_DESCRIPTION: &str = "Search for more tools (for example those of connected MCP servers and plugins) when none of the functions you have fits the task. Describe the capability you need in `query`. The tools found become callable functions in your next step; call them directly then.";

/// What the degraded function tells the model when found tools are called through
/// [`CALL_FOUND_TOOL`] ([`FoundTools::Dispatched`]).
pub const TOOL_SEARCH_DISPATCHED_DESCRIPTION: &str = "Search for more tools (for example those of connected MCP servers and plugins) when none of the functions you have fits the task. Describe the capability you need in `query`. The result lists each tool found with its parameters; call one through `call_found_tool` with its `name` and its `arguments`.";

/// The function through which found tools are called ([`FoundTools::Dispatched`]).
pub const CALL_FOUND_TOOL: &str = "call_found_tool";

/// What `call_found_tool` tells the model.
const CALL_FOUND_DESCRIPTION: &str = "Calls a tool that `tool_search` found. `name` is the tool's name exactly as the search result lists it; `arguments` are its arguments, as the parameters listed with it say.";

/// The parameters of the degraded function: the client's own when they are an object schema,
/// else a `query` string (and an optional `limit`).
pub fn tool_search_parameters(declared: Option<&Value>) -> Value {
    if let Some(own) = own_parameters(declared) {
        return own.clone();
    }
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the tool you need should do, in a few words (e.g. \"add two numbers\", \"read a GitHub issue\")."},
            "limit": {"type": "integer", "description": "The most tools to return.", "minimum": 1}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

/// The client's own parameters of a `tool_search`, when they are an object schema.
fn own_parameters(declared: Option<&Value>) -> Option<&Value> {
    declared.filter(|p| p.get("type") == Some(&json!("object")))
}

/// [`tool_search_parameters`] as JSON text; the default one written once per process.
fn tool_search_parameters_json(declared: Option<&Value>) -> toolbridge_wire::RawJson {
    static DEFAULT: std::sync::LazyLock<toolbridge_wire::RawJson> =
        std::sync::LazyLock::new(|| tool_search_parameters(None).into());
    match own_parameters(declared) {
        Some(own) => own.clone().into(),
        None => DEFAULT.clone(),
    }
}

/// True for a declared `tool_search` in the hosted form (no `execution: "client"`).
pub fn is_hosted_search(tool: &Tool) -> bool {
    matches!(tool, Tool::Other(map)
        if map.get("type").and_then(Value::as_str) == Some("tool_search")
            && map.get("execution").and_then(Value::as_str) != Some("client"))
}

/// True for a tool marked `defer_loading: true`: a function or custom tool, or a namespace
/// marked itself or whose members all are.
pub fn is_deferred(tool: &Tool) -> bool {
    let marked = |extra: &Map<String, Value>| extra.get("defer_loading") == Some(&json!(true));
    match tool {
        Tool::Function(f) => marked(&f.extra),
        Tool::Custom(c) => marked(&c.extra),
        Tool::Namespace(ns) => {
            marked(&ns.extra) || (!ns.tools.is_empty() && ns.tools.iter().all(is_deferred))
        }
        Tool::Other(map) => marked(map),
    }
}

/// When the gateway serves the hosted `tool_search`: the candidate of the declared
/// `tool_search` or of a deferred tool (the `gateway` decision, nothing upstream); `None` for
/// any other tool.
pub(super) fn hosted_candidate(param: &str, tool: &Tool) -> Option<Candidate> {
    let (name, reason) = if is_hosted_search(tool) {
        (None, reasons::GATEWAY_TOOL_SEARCH)
    } else if is_deferred(tool) {
        let name = match tool {
            Tool::Function(f) => Some(f.name.clone()),
            Tool::Custom(c) => Some(c.name.clone()),
            Tool::Namespace(ns) => Some(ns.name.clone()),
            Tool::Other(map) => map.get("name").and_then(Value::as_str).map(str::to_owned),
        };
        (name, reasons::DEFERRED)
    } else {
        return None;
    };
    Some(Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: tool.kind().to_owned(),
            name,
            decision: Decision::Gateway,
            reason,
            provider_name: None,
        },
        identity: None,
        upstream: None,
    })
}

/// The candidate of a declared `tool_search`.
pub(super) fn tool_search(
    param: &str,
    tool: &Tool,
    map: &Map<String, Value>,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    if map.get("execution").and_then(Value::as_str) != Some("client") {
        return unsupported(param, "tool_search", caps, diagnostics).map(|c| vec![c]);
    }
    let identity = Identity::ToolSearch;
    if let Some(decided) =
        tool_types::decide(param, "tool_search", tool, &identity, caps, diagnostics)?
    {
        return Ok(vec![decided]);
    }
    diagnostics.push(diag(
        TOOL_DEGRADED,
        Some(param),
        "`tool_search` is sent as a function; its calls are restored as `tool_search_call` items and the tools found are offered on the next rounds",
    ));
    let parameters = tool_search_parameters_json(map.get("parameters"));
    let ours = match caps.found_tools {
        FoundTools::Declared => TOOL_SEARCH_DESCRIPTION,
        FoundTools::Dispatched => TOOL_SEARCH_DISPATCHED_DESCRIPTION,
    };
    let description = match map.get("description").and_then(Value::as_str) {
        Some(own) if !own.trim().is_empty() => format!("{own}\n\n{ours}"),
        _ => ours.to_owned(),
    };
    Ok(vec![Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: "tool_search".to_owned(),
            name: None,
            decision: Decision::Degraded,
            reason: reasons::TOOL_SEARCH_AS_FUNCTION,
            provider_name: None,
        },
        identity: Some(identity),
        upstream: Some(UpstreamTool::Function {
            name: "tool_search".to_owned(),
            description: Some(description),
            parameters,
            strict: None,
        }),
    }])
}

/// Adds the conversation's tools (`found`, their candidates) to `candidates`. Under
/// [`FoundTools::Dispatched`], when `tool_search` goes as a function, `call_found_tool` is
/// declared right after it (from the first round, found tools or not) and the tools a search
/// found are named but not declared: their calls go through it. Returns the tools so
/// dispatched.
pub(super) fn dispatch(
    candidates: &mut Vec<Candidate>,
    mut found: Vec<Candidate>,
    caps: &ToolCapabilities,
    context: &[ContextTool],
) -> Vec<Identity> {
    let search = candidates.iter().position(|c| {
        c.identity == Some(Identity::ToolSearch)
            && c.entry.reason == reasons::TOOL_SEARCH_AS_FUNCTION
    });
    let Some(at) = search.filter(|_| caps.found_tools == FoundTools::Dispatched) else {
        candidates.append(&mut found);
        return Vec::new();
    };
    let param = format!("{}.{CALL_FOUND_TOOL}", candidates[at].entry.param);
    candidates.insert(at + 1, call_found(param));
    let searched = |param: &str| {
        context.iter().any(|c| {
            c.source == ContextSource::Found
                && param
                    .strip_prefix(c.param.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
    };
    let mut dispatched = Vec::new();
    for c in &mut found {
        let callable = matches!(
            c.identity,
            Some(Identity::Function { .. } | Identity::Custom { .. })
        );
        if callable && searched(&c.entry.param) && c.upstream.take().is_some() {
            c.entry.reason = reasons::FOUND_DISPATCHED;
            dispatched.extend(c.identity.clone());
        }
    }
    candidates.append(&mut found);
    dispatched
}

/// The candidate of `call_found_tool`.
fn call_found(param: String) -> Candidate {
    static PARAMETERS: std::sync::LazyLock<toolbridge_wire::RawJson> = std::sync::LazyLock::new(
        || {
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name, as the search result lists it."},
                    "arguments": {"type": "object", "description": "The tool's arguments."}
                },
                "required": ["name", "arguments"],
                "additionalProperties": false
            })
            .into()
        },
    );
    Candidate {
        entry: PlanEntry {
            param,
            kind: "function".to_owned(),
            name: Some(CALL_FOUND_TOOL.to_owned()),
            decision: Decision::Degraded,
            reason: reasons::CALL_FOUND,
            provider_name: None,
        },
        identity: Some(Identity::CallFound),
        upstream: Some(UpstreamTool::Function {
            name: CALL_FOUND_TOOL.to_owned(),
            description: Some(CALL_FOUND_DESCRIPTION.to_owned()),
            parameters: PARAMETERS.clone(),
            strict: None,
        }),
    }
}
