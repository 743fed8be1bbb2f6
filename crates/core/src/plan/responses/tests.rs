//! Tests of the plan for a native Responses upstream: what the endpoint takes as declared, what
//! goes as functions (and under which names), and what is refused.

use serde_json::json;

use super::*;

fn tools(v: Value) -> Vec<Tool> {
    serde_json::from_value(v).unwrap()
}

fn codex_tools() -> Vec<Tool> {
    tools(json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}, "defer_loading": false},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
        {"type": "namespace", "name": "mcp__docs", "tools": [{"type": "function", "name": "search"}]},
        {"type": "web_search"},
        {"type": "tool_search", "execution": "client"},
        {"type": "future_tool", "name": "x"}
    ]))
}

fn caps(r: ResponsesTools) -> ToolCapabilities {
    ToolCapabilities {
        max_tools: None,
        responses_native: true,
        responses: r,
        ..ToolCapabilities::default()
    }
}

#[test]
fn an_endpoint_that_takes_everything_gets_the_passthrough_plan() {
    let plan = plan(
        &codex_tools(),
        &[],
        None,
        &caps(ResponsesTools::default()),
        &GatewayOffer::default(),
    )
    .unwrap();
    assert!(plan.passes_tools_as_declared());
    assert!(plan.names.is_empty());
    assert_eq!(plan.upstream.len(), 6);
}

/// A strict endpoint: `custom` and `namespace` degraded, `web_search` its one server tool.
fn strict_endpoint() -> ResponsesTools {
    ResponsesTools {
        custom: ToolTypeDecision::Degraded,
        namespace: ToolTypeDecision::Degraded,
        server_tools: vec!["web_search".to_owned()],
        unknown: ToolTypeDecision::Ignored,
        ..ResponsesTools::default()
    }
}

#[test]
fn a_strict_endpoint_gets_custom_and_namespace_as_functions_and_the_rest_as_declared() {
    let strict = strict_endpoint();
    let choice = json!({"type": "custom", "name": "apply_patch"});
    let plan = plan(
        &codex_tools(),
        &[],
        Some(&choice),
        &caps(strict),
        &GatewayOffer::default(),
    )
    .unwrap();
    assert!(!plan.passes_tools_as_declared());
    let decisions: Vec<(&str, Decision, &str)> = plan
        .entries
        .iter()
        .map(|e| (e.kind.as_str(), e.decision, e.reason))
        .collect();
    assert_eq!(
        decisions,
        [
            ("function", Decision::Native, reasons::RESPONSES_NATIVE),
            ("custom", Decision::Degraded, reasons::CUSTOM_AS_FUNCTION),
            ("function", Decision::Degraded, reasons::NAMESPACE_FLATTENED),
            ("web_search", Decision::Native, reasons::RESPONSES_NATIVE),
            // The client-run form, which the endpoint does not run: its function.
            (
                "tool_search",
                Decision::Degraded,
                reasons::TOOL_SEARCH_AS_FUNCTION
            ),
            ("function", Decision::Degraded, reasons::CALL_FOUND),
            (
                "future_tool",
                Decision::Ignored,
                reasons::NO_PROVIDER_SUPPORT
            ),
        ]
    );
    // The function goes as declared, unknown fields and all.
    let UpstreamTool::Native(NativeTool::AsDeclared(first)) = &plan.upstream[0] else {
        panic!("{:?}", plan.upstream[0]);
    };
    assert_eq!(first["defer_loading"], false);
    let identity = |name: &str| plan.names.identity(name).cloned();
    assert_eq!(
        identity("mcp__docs__search"),
        Some(Identity::Function {
            namespace: Some("mcp__docs".to_owned()),
            name: "search".to_owned()
        })
    );
    assert_eq!(
        identity("apply_patch"),
        Some(Identity::Custom {
            namespace: None,
            name: "apply_patch".to_owned()
        })
    );
    assert_eq!(
        plan.tool_choice,
        Some(json!({"type": "function", "name": "apply_patch"}))
    );
}

#[test]
fn allowed_tools_name_the_functions_degraded_tools_went_as() {
    let strict = strict_endpoint();
    let choice = json!({"type": "allowed_tools", "mode": "required", "tools": [
        {"type": "function", "name": "exec_command"},
        {"type": "custom", "name": "apply_patch"},
        {"type": "namespace", "name": "mcp__docs"},
        {"type": "tool_search"},
        {"type": "web_search"}
    ]});
    let plan = plan(
        &codex_tools(),
        &[],
        Some(&choice),
        &caps(strict),
        &GatewayOffer::default(),
    )
    .unwrap();
    assert_eq!(
        plan.tool_choice,
        Some(
            json!({"type": "allowed_tools", "mode": "required", "tools": [
                {"type": "function", "name": "exec_command"},
                {"type": "function", "name": "apply_patch"},
                {"type": "function", "name": "mcp__docs__search"},
                {"type": "function", "name": "tool_search"},
                {"type": "web_search"}
            ]})
        )
    );
}

#[test]
fn tools_a_search_found_are_planned_only_with_the_degraded_tool_search() {
    let strict = ResponsesTools {
        namespace: ToolTypeDecision::Degraded,
        server_tools: vec!["web_search".to_owned()],
        ..ResponsesTools::default()
    };
    let found = [ContextTool {
        param: "input[2].tools[0]".to_owned(),
        tool: serde_json::from_value(json!({"type": "namespace", "name": "mcp__docs",
            "tools": [{"type": "function", "name": "search"}]}))
        .unwrap(),
        source: ContextSource::Found,
    }];
    let searching = tools(json!([
        {"type": "namespace", "name": "ns2", "tools": [{"type": "function", "name": "x"}]},
        {"type": "tool_search", "execution": "client"}
    ]));
    let plan_of = |declared: &[Tool]| {
        let plan = plan(
            declared,
            &found,
            None,
            &caps(strict.clone()),
            &GatewayOffer::default(),
        )
        .unwrap();
        plan.names
            .provider_names()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let mut names = plan_of(&searching);
    names.sort();
    assert_eq!(
        names,
        [
            "call_found_tool",
            "mcp__docs__search",
            "ns2__x",
            "tool_search"
        ]
    );
    // Without the search function the search items are not rewritten: nothing is lifted.
    let names = plan_of(&searching[..1]);
    assert_eq!(names, ["ns2__x"]);
}

#[test]
fn a_refused_type_is_a_client_error() {
    let refusing = ResponsesTools {
        namespace: ToolTypeDecision::Rejected,
        ..ResponsesTools::default()
    };
    let err = plan(
        &codex_tools(),
        &[],
        None,
        &caps(refusing),
        &GatewayOffer::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "unsupported_tool");
}
