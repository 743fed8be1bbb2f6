//! `tool_search` and the conversation's own tools in the plan: the degraded search function,
//! the tools a `tool_search_output` found and an `additional_tools` item's, planned, named and
//! restored like declared tools, within the provider's tool limit.

use serde_json::{Value, json};
use toolbridge_wire::responses::{CreateResponse, Tool};

use super::*;
use crate::canonical::{CallKind, Turn};
use crate::request::{Limits, normalize};
use crate::restore::restore;

fn request(body: Value) -> CanonicalRequest {
    let req: CreateResponse = serde_json::from_value(body).unwrap();
    normalize(&req, &Limits::default()).unwrap()
}

fn search_tool() -> Value {
    json!({"type": "tool_search", "execution": "client", "description": "Search the deferred tools.",
           "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}})
}

/// Codex's exchange: the model searched, Codex answered with the MCP server's namespace.
fn searched(call_id: &str, tools: Value) -> Vec<Value> {
    vec![
        json!({"type": "tool_search_call", "call_id": call_id, "execution": "client", "arguments": {"query": "add numbers"}, "status": "completed"}),
        json!({"type": "tool_search_output", "call_id": call_id, "execution": "client", "status": "completed", "tools": tools}),
    ]
}

fn probe_namespace() -> Value {
    json!([{"type": "namespace", "name": "mcp__probe", "description": "Tools in the mcp__probe namespace.",
            "tools": [{"type": "function", "name": "add_numbers", "description": "Add two integers.", "strict": false, "defer_loading": true,
                       "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}]}])
}

/// Found tools declared beside the others, as before `call_found_tool`.
fn declaring() -> ToolCapabilities {
    ToolCapabilities {
        found_tools: FoundTools::Declared,
        ..ToolCapabilities::default()
    }
}

fn upstream_names(plan: &ToolPlan) -> Vec<String> {
    plan.upstream
        .iter()
        .filter_map(|t| match t {
            UpstreamTool::Function { name, .. } => Some(name.clone()),
            UpstreamTool::Native(_) => None,
        })
        .collect()
}

#[test]
fn a_client_tool_search_goes_as_a_function_and_its_call_comes_back_as_tool_search_call() {
    let plan = plan(
        &[serde_json::from_value(search_tool()).unwrap()],
        None,
        &ToolCapabilities::default(),
    )
    .unwrap();
    let entry = &plan.entries[0];
    assert_eq!(
        (entry.decision, entry.reason, entry.provider_name.as_deref()),
        (
            Decision::Degraded,
            reasons::TOOL_SEARCH_AS_FUNCTION,
            Some("tool_search")
        )
    );
    let UpstreamTool::Function {
        description,
        parameters,
        ..
    } = &plan.upstream[0]
    else {
        panic!("a function: {:?}", plan.upstream);
    };
    // The client's own schema and description, with the guidance after it.
    assert_eq!(parameters.value()["required"], json!(["query"]));
    let description = description.as_deref().unwrap();
    assert!(description.starts_with("Search the deferred tools."));
    assert!(description.contains(TOOL_SEARCH_DISPATCHED_DESCRIPTION));
    let (call, diagnostic) = restore(&plan.names, "tool_search", r#"{"query":"add numbers"}"#);
    assert_eq!(
        call,
        CallKind::ToolSearch {
            arguments: json!({"query": "add numbers"})
        }
    );
    assert!(diagnostic.is_none());
    // Arguments that are not an object become the query.
    let (call, _) = restore(&plan.names, "tool_search", "add numbers");
    assert_eq!(
        call,
        CallKind::ToolSearch {
            arguments: json!({"query": "add numbers"})
        }
    );
}

#[test]
fn the_profile_decides_tool_search_like_any_client_run_type() {
    let mut caps = ToolCapabilities::default();
    caps.tool_types.tool_search = ToolTypeDecision::Native;
    let tools = [serde_json::from_value(search_tool()).unwrap()];
    let native = plan(&tools, None, &caps).unwrap();
    assert_eq!(native.entries[0].decision, Decision::Native);
    assert_eq!(native.entries[0].reason, reasons::NATIVE_TOOL_SEARCH);
    caps.tool_types.tool_search = ToolTypeDecision::Rejected;
    assert!(matches!(
        plan(&tools, None, &caps),
        Err(Error::UnsupportedTool { .. })
    ));
    // The hosted form (the server searches) is not the client's tool; the tools it would have
    // searched are offered directly, and that is said.
    let hosted: Vec<Tool> = serde_json::from_value(json!([
        {"type": "tool_search"},
        {"type": "function", "name": "rare", "defer_loading": true, "parameters": {"type": "object"}}
    ]))
    .unwrap();
    let plan = plan(&hosted, None, &ToolCapabilities::default()).unwrap();
    assert_eq!(plan.entries[0].decision, Decision::Ignored);
    assert_eq!(upstream_names(&plan), ["rare"]);
    assert!(
        plan.diagnostics
            .iter()
            .any(|d| d.code == "param_dropped"
                && d.param.as_deref() == Some("tools[1].defer_loading"))
    );
}

#[test]
fn found_tools_are_planned_after_the_declared_ones_and_restored_with_their_namespace() {
    let mut input = vec![json!({"role": "user", "content": "add 2 and 3"})];
    input.extend(searched("call_ts_1", probe_namespace()));
    let req = request(json!({"model": "m", "input": input, "tools": [search_tool()]}));
    assert_eq!(req.context_tools.len(), 1);
    assert!(req.diagnostics.iter().all(|d| d.code != "item_dropped"));
    // The search is replayed as the degraded call and its result names what can be called.
    let Turn::Assistant(turn) = &req.turns[1] else {
        panic!("{:?}", req.turns)
    };
    assert_eq!(
        turn.tool_calls[0].kind,
        CallKind::ToolSearch {
            arguments: json!({"query": "add numbers"})
        }
    );
    let Turn::ToolResult { call_id, output } = &req.turns[2] else {
        panic!("{:?}", req.turns)
    };
    assert_eq!(call_id, "call_ts_1");
    let crate::canonical::ToolOutput::Text(output) = output else {
        panic!("{output:?}")
    };
    assert!(
        output.contains("- mcp__probe__add_numbers: Add two integers."),
        "{output}"
    );

    let plan = plan_request(&req, &declaring(), &GatewayOffer::default()).unwrap();
    assert_eq!(
        upstream_names(&plan),
        ["tool_search", "mcp__probe__add_numbers"]
    );
    let found = &plan.entries[1];
    assert_eq!(found.param, "input[2].tools[0].tools[0]");
    assert_eq!(found.reason, reasons::NAMESPACE_FLATTENED);
    let (call, diagnostic) = restore(&plan.names, "mcp__probe__add_numbers", r#"{"a":2,"b":3}"#);
    assert!(diagnostic.is_none());
    assert_eq!(
        call,
        CallKind::Function {
            namespace: Some("mcp__probe".into()),
            name: "add_numbers".into(),
            arguments: r#"{"a":2,"b":3}"#.into()
        }
    );
}

#[test]
fn a_tool_found_twice_is_planned_once_and_a_declared_tool_wins_over_a_found_one() {
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(searched("call_ts_1", probe_namespace()));
    input.extend(searched(
        "call_ts_2",
        json!([probe_namespace()[0].clone(), {"type": "function", "name": "lookup", "parameters": {"type": "object"}}]),
    ));
    let req = request(json!({"model": "m", "input": input, "tools": [
        search_tool(),
        {"type": "function", "name": "lookup", "description": "declared", "parameters": {"type": "object"}}
    ]}));
    let plan = plan_request(&req, &declaring(), &GatewayOffer::default()).unwrap();
    assert_eq!(
        upstream_names(&plan),
        ["tool_search", "lookup", "mcp__probe__add_numbers"]
    );
    let UpstreamTool::Function { description, .. } = &plan.upstream[1] else {
        panic!()
    };
    assert_eq!(description.as_deref(), Some("declared"));
}

#[test]
fn found_tools_past_the_limit_leave_out_the_oldest_with_a_diagnostic() {
    let one =
        |name: &str| json!([{"type": "function", "name": name, "parameters": {"type": "object"}}]);
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(searched("call_ts_1", one("old_tool")));
    input.extend(searched("call_ts_2", one("new_tool")));
    let req = request(json!({"model": "m", "input": input, "tools": [search_tool()]}));
    let caps = ToolCapabilities {
        max_tools: Some(2),
        ..declaring()
    };
    let plan = plan_request(&req, &caps, &GatewayOffer::default()).unwrap();
    assert_eq!(upstream_names(&plan), ["tool_search", "new_tool"]);
    let old = plan
        .entries
        .iter()
        .find(|e| e.param == "input[2].tools[0]")
        .unwrap();
    assert_eq!(
        (old.decision, old.reason),
        (Decision::Ignored, OVER_TOOL_LIMIT)
    );
    assert!(plan.diagnostics.iter().any(|d| d.code == "tool_ignored"
        && d.param.as_deref() == Some("input[2].tools[0]")
        && d.message.contains("at most 2 tools")));
    // Declared tools alone over the limit stay the client's error.
    let caps = ToolCapabilities {
        max_tools: Some(0),
        ..ToolCapabilities::default()
    };
    assert!(matches!(
        plan_request(&req, &caps, &GatewayOffer::default()),
        Err(Error::TooManyTools { .. })
    ));
}

#[test]
fn additional_tools_are_planned_like_declared_tools() {
    let req = request(json!({"model": "m", "input": [
        {"type": "additional_tools", "role": "developer", "tools": [
            {"type": "namespace", "name": "functions", "tools": [
                {"type": "custom", "name": "exec", "description": "Run JavaScript.", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
                {"type": "function", "name": "wait", "parameters": {"type": "object", "properties": {"ms": {"type": "integer"}}}}
            ]},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
        ]},
        {"role": "user", "content": "go"}
    ]}));
    assert!(
        req.diagnostics.iter().all(|d| d.code != "item_dropped"),
        "{:?}",
        req.diagnostics
    );
    let plan = plan_request(&req, &ToolCapabilities::default(), &GatewayOffer::default()).unwrap();
    assert_eq!(
        upstream_names(&plan),
        ["functions__exec", "functions__wait", "apply_patch"]
    );
    let (call, _) = restore(&plan.names, "functions__exec", r#"{"input":"1+1"}"#);
    assert_eq!(
        call,
        CallKind::Custom {
            namespace: Some("functions".into()),
            name: "exec".into(),
            input: "1+1".into()
        }
    );
    let (call, _) = restore(&plan.names, "apply_patch", r#"{"input":"*** Begin Patch"}"#);
    assert!(matches!(
        call,
        CallKind::Custom {
            namespace: None,
            ..
        }
    ));
}

#[test]
fn a_found_tool_with_an_unusable_schema_is_left_out_not_the_request() {
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(searched(
        "call_ts_1",
        json!([{"type": "function", "name": "broken", "parameters": {"type": "string"}},
               {"type": "function", "name": "fine", "parameters": {"type": "object"}}]),
    ));
    let req = request(json!({"model": "m", "input": input, "tools": [search_tool()]}));
    assert_eq!(req.context_tools.len(), 1);
    assert!(
        req.diagnostics
            .iter()
            .any(|d| d.code == "tool_ignored" && d.param.as_deref() == Some("input[2].tools[0]"))
    );
}

#[test]
fn found_tools_are_called_through_call_found_tool_and_the_tool_list_never_changes() {
    let first = request(json!({"model": "m", "input": "add 2 and 3", "tools": [search_tool()]}));
    let mut input = vec![json!({"role": "user", "content": "add 2 and 3"})];
    input.extend(searched("call_ts_1", probe_namespace()));
    let later = request(json!({"model": "m", "input": input, "tools": [search_tool()]}));
    let caps = ToolCapabilities::default();
    let before = plan_request(&first, &caps, &GatewayOffer::default()).unwrap();
    let after = plan_request(&later, &caps, &GatewayOffer::default()).unwrap();
    // The same tools, the same bytes, before and after the search found one.
    assert_eq!(upstream_names(&before), ["tool_search", "call_found_tool"]);
    assert_eq!(before.upstream, after.upstream);
    let found = after
        .entries
        .iter()
        .find(|e| e.param == "input[2].tools[0].tools[0]")
        .unwrap();
    assert_eq!(
        (found.reason, found.provider_name.as_deref()),
        (reasons::FOUND_DISPATCHED, Some("mcp__probe__add_numbers"))
    );
    let identity = Identity::Function {
        namespace: Some("mcp__probe".into()),
        name: "add_numbers".into(),
    };
    assert_eq!(
        after.dispatched(&identity),
        Some(("call_found_tool", "mcp__probe__add_numbers"))
    );
    // The search's result carries what a declaration would have: the parameters.
    let Turn::ToolResult { output, .. } = &later.turns[2] else {
        panic!("{:?}", later.turns)
    };
    let crate::canonical::ToolOutput::Text(output) = output else {
        panic!("{output:?}")
    };
    assert!(
        output.contains(r#"parameters: {"type":"object","properties":{"a":{"type":"integer"}"#),
        "{output}"
    );
    // A call through the dispatcher comes back as the found tool's own call.
    let (call, diagnostic) = restore(
        &after.names,
        "call_found_tool",
        r#"{"name": "mcp__probe__add_numbers", "arguments": {"a": 2, "b": 3}}"#,
    );
    assert!(diagnostic.is_none());
    assert_eq!(
        call,
        CallKind::Function {
            namespace: Some("mcp__probe".into()),
            name: "add_numbers".into(),
            arguments: r#"{"a":2,"b":3}"#.into()
        }
    );
    // A name the search did not find (or the dispatcher itself) is not restored silently.
    for bad in [
        r#"{"name": "nope", "arguments": {}}"#,
        r#"{"name": "call_found_tool", "arguments": {}}"#,
        "not json",
    ] {
        let (call, diagnostic) = restore(&after.names, "call_found_tool", bad);
        assert!(
            matches!(call, CallKind::Function { ref name, .. } if name == "call_found_tool"),
            "{call:?}"
        );
        assert_eq!(diagnostic.unwrap().code, "call_not_restored");
    }
}
