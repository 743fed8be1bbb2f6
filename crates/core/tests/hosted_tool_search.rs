//! The pure half of the hosted `tool_search`: with the gateway's offer, the declared
//! `tool_search` and the tools marked `defer_loading` get the `gateway` decision and nothing
//! upstream (the gateway's own `tool_search` function goes instead); without it the hosted
//! search is ignored and the deferred tools go upstream as declared.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use toolbridge_core::plan::{
    Decision, GatewayOffer, GatewayTool, ToolCapabilities, UpstreamTool, plan_with, reasons,
    tool_search_parameters,
};
use toolbridge_wire::responses::Tool;

fn tools() -> Vec<Tool> {
    serde_json::from_value(json!([
        {"type": "function", "name": "weather", "parameters": {"type": "object"}},
        {"type": "namespace", "name": "github", "tools": [
            {"type": "function", "name": "get_issue", "defer_loading": true, "parameters": {"type": "object"}}
        ]},
        {"type": "function", "name": "add", "defer_loading": true, "parameters": {"type": "object"}},
        {"type": "tool_search"}
    ]))
    .unwrap()
}

fn upstream_names(upstream: &[UpstreamTool]) -> Vec<String> {
    upstream
        .iter()
        .map(|t| match t {
            UpstreamTool::Function { name, .. } => name.clone(),
            other => panic!("not a function: {other:?}"),
        })
        .collect()
}

#[test]
fn served_hosted_search_keeps_deferred_tools_out_of_the_upstream_list() {
    let offer = GatewayOffer {
        tools: vec![GatewayTool {
            server: "toolbridge".to_owned(),
            name: "tool_search".to_owned(),
            description: None,
            parameters: tool_search_parameters(None),
        }],
        tool_search: true,
        ..GatewayOffer::default()
    };
    let plan = plan_with(&tools(), None, &ToolCapabilities::default(), &offer).unwrap();
    assert_eq!(upstream_names(&plan.upstream), ["weather", "tool_search"]);
    let reason = |param: &str| {
        let e = plan.entries.iter().find(|e| e.param == param).unwrap();
        (e.decision, e.reason)
    };
    assert_eq!(reason("tools[1]"), (Decision::Gateway, reasons::DEFERRED));
    assert_eq!(reason("tools[2]"), (Decision::Gateway, reasons::DEFERRED));
    assert_eq!(
        reason("tools[3]"),
        (Decision::Gateway, reasons::GATEWAY_TOOL_SEARCH)
    );
}

#[test]
fn without_the_offer_deferred_tools_go_upstream_as_declared() {
    let plan = plan_with(
        &tools(),
        None,
        &ToolCapabilities::default(),
        &GatewayOffer::default(),
    )
    .unwrap();
    assert_eq!(
        upstream_names(&plan.upstream),
        ["weather", "github__get_issue", "add"]
    );
}
