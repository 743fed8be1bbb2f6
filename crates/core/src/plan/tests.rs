//! Planning, decision by decision.

use serde_json::{Value, json};
use toolbridge_wire::responses::Tool;

use super::*;

fn tools(value: Value) -> Vec<Tool> {
    serde_json::from_value(value).unwrap()
}

fn glm() -> ToolCapabilities {
    ToolCapabilities {
        strict: false,
        choice_none: false,
        choice_required: false,
        choice_named: false,
        web_search: Some(NativeWebSearch::GlmTool),
        file_search: Some(NativeFileSearch::GlmRetrieval),
        mcp: Some(NativeMcp::GlmMcp),
        ..ToolCapabilities::default()
    }
}

fn decisions(plan: &ToolPlan) -> Vec<(String, Decision, &'static str, Option<String>)> {
    plan.entries
        .iter()
        .map(|e| {
            (
                e.param.clone(),
                e.decision,
                e.reason,
                e.provider_name.clone(),
            )
        })
        .collect()
}

fn every_tool_type() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
        {"type": "namespace", "name": "multi_agent_v1", "tools": [{"type": "function", "name": "spawn_agent"}]},
        {"type": "local_shell"},
        {"type": "shell"},
        {"type": "apply_patch"},
        {"type": "web_search"},
        {"type": "file_search", "vector_store_ids": ["kb_1"]},
        {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/mcp"},
        {"type": "tool_search", "execution": "client"},
        {"type": "image_generation"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "computer_use_preview"}
    ])
}

#[test]
fn every_tool_type_on_a_functions_only_provider() {
    let plan = plan(
        &tools(every_tool_type()),
        None,
        &ToolCapabilities::default(),
    )
    .unwrap();
    let n = |s: &str| Some(s.to_owned());
    assert_eq!(
        decisions(&plan),
        vec![
            (
                "tools[0]".into(),
                Decision::Native,
                reasons::FUNCTION,
                n("exec_command")
            ),
            (
                "tools[1]".into(),
                Decision::Degraded,
                reasons::CUSTOM_AS_FUNCTION,
                n("apply_patch")
            ),
            (
                "tools[2].tools[0]".into(),
                Decision::Degraded,
                reasons::NAMESPACE_FLATTENED,
                n("multi_agent_v1__spawn_agent")
            ),
            (
                "tools[3]".into(),
                Decision::Degraded,
                reasons::LOCAL_SHELL_AS_FUNCTION,
                n("local_shell")
            ),
            (
                "tools[4]".into(),
                Decision::Degraded,
                reasons::SHELL_AS_FUNCTION,
                n("shell")
            ),
            // The custom apply_patch kept its valid name first; the built-in one is renamed.
            (
                "tools[5]".into(),
                Decision::Degraded,
                reasons::APPLY_PATCH_AS_FUNCTION,
                n("apply_patch_2")
            ),
            (
                "tools[6]".into(),
                Decision::Ignored,
                reasons::NO_PROVIDER_SUPPORT,
                None
            ),
            (
                "tools[7]".into(),
                Decision::Ignored,
                reasons::NO_PROVIDER_SUPPORT,
                None
            ),
            (
                "tools[8]".into(),
                Decision::Ignored,
                reasons::NO_PROVIDER_SUPPORT,
                None
            ),
            (
                "tools[9]".into(),
                Decision::Degraded,
                reasons::TOOL_SEARCH_AS_FUNCTION,
                n("tool_search")
            ),
            // Declared with the search, for the tools it will find.
            (
                "tools[9].call_found_tool".into(),
                Decision::Degraded,
                reasons::CALL_FOUND,
                n("call_found_tool")
            ),
            (
                "tools[10]".into(),
                Decision::Ignored,
                reasons::NO_PROVIDER_SUPPORT,
                None
            ),
            (
                "tools[11]".into(),
                Decision::Ignored,
                reasons::NO_PROVIDER_SUPPORT,
                None
            ),
            (
                "tools[12]".into(),
                Decision::Ignored,
                reasons::NO_PROVIDER_SUPPORT,
                None
            ),
        ]
    );
    assert_eq!(plan.upstream.len(), 8);
    assert!(
        plan.upstream
            .iter()
            .all(|t| matches!(t, UpstreamTool::Function { .. }))
    );
    let ignored = plan
        .diagnostics
        .iter()
        .filter(|d| d.code == "tool_ignored")
        .count();
    assert_eq!(ignored, 6);
}

#[test]
fn every_tool_type_on_glm_uses_its_native_tools() {
    let plan = plan(&tools(every_tool_type()), None, &glm()).unwrap();
    let natives: Vec<&NativeTool> = plan
        .upstream
        .iter()
        .filter_map(|t| match t {
            UpstreamTool::Native(v) => Some(v),
            UpstreamTool::Function { .. } => None,
        })
        .collect();
    // Neutral decisions: the Chat dialect renders them as GLM's JSON (its `chat::native` tests).
    assert_eq!(
        natives,
        [
            &NativeTool::WebSearch(NativeSearch {
                form: NativeWebSearch::GlmTool,
                allowed_domains: Vec::new(),
                user_location: None,
            }),
            &NativeTool::Retrieval {
                form: NativeFileSearch::GlmRetrieval,
                knowledge_id: "kb_1".to_owned(),
            },
            &NativeTool::Mcp(NativeMcpServer {
                form: NativeMcp::GlmMcp,
                server_label: Some(json!("docs")),
                server_url: "https://mcp.example/mcp".to_owned(),
                allowed_tools: None,
                headers: None,
            }),
        ]
    );
    assert_eq!(plan.entries[6].decision, Decision::Native);
    assert_eq!(plan.entries[6].reason, reasons::NATIVE_WEB_SEARCH);
}

#[test]
fn web_search_the_client_disabled_stays_out_even_where_native() {
    let plan = plan(
        &tools(json!([{"type": "web_search", "external_web_access": false}])),
        None,
        &glm(),
    )
    .unwrap();
    assert_eq!(plan.entries[0].decision, Decision::Ignored);
    assert_eq!(plan.entries[0].reason, reasons::WEB_ACCESS_DISABLED);
    assert!(plan.upstream.is_empty());
}

#[test]
fn qwen_search_is_a_request_flag() {
    let caps = ToolCapabilities {
        web_search: Some(NativeWebSearch::QwenFlag),
        ..ToolCapabilities::default()
    };
    let plan = plan(&tools(json!([{"type": "web_search"}])), None, &caps).unwrap();
    assert_eq!(plan.request_flags.get("enable_search"), Some(&json!(true)));
    assert!(plan.upstream.is_empty());
    assert_eq!(plan.entries[0].decision, Decision::Native);
}

#[test]
fn a_reject_policy_refuses_what_it_cannot_take() {
    let caps = ToolCapabilities {
        unsupported: UnsupportedPolicy::Reject,
        ..ToolCapabilities::default()
    };
    let err = plan(
        &tools(json!([{"type": "function", "name": "f"}, {"type": "image_generation"}])),
        None,
        &caps,
    )
    .unwrap_err();
    assert_eq!(err.code(), "unsupported_tool");
    assert_eq!(err.param(), Some("tools[1]"));
}

#[test]
fn an_unknown_tool_type_is_refused_with_its_index() {
    let err = plan(
        &tools(json!([{"type": "function", "name": "f"}, {"type": "teleport"}])),
        None,
        &ToolCapabilities::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "unsupported_tool_type");
    assert_eq!(err.param(), Some("tools[1]"));
    assert!(err.to_string().contains("teleport"));
}

/// The provider name of every entry, in declaration order.
fn provider_names(plan: &ToolPlan) -> Vec<String> {
    plan.entries
        .iter()
        .map(|e| e.provider_name.clone().unwrap())
        .collect()
}

#[test]
fn sanitised_names_collide_into_numbered_suffixes() {
    let plan = plan(
        &tools(json!([
            {"type": "function", "name": "a.b"},
            {"type": "function", "name": "a_b"},
            {"type": "function", "name": "a b"},
        ])),
        None,
        &ToolCapabilities::default(),
    )
    .unwrap();
    let names = provider_names(&plan);
    // The already valid name keeps itself; the others queue behind it.
    assert_eq!(names, ["a_b_2", "a_b", "a_b_3"]);
    for (entry, name) in plan.entries.iter().zip(&names) {
        let identity = plan.names.identity(name).unwrap();
        assert_eq!(
            format!("{}", identity.declared_name()),
            entry.name.clone().unwrap()
        );
    }
}

#[test]
fn configured_non_ascii_punctuation_is_cut_at_a_character_boundary() {
    // A provider profile allowing `é`: a name of them cut to a limit inside a character, and
    // its twin's suffix likewise, keep whole characters instead of panicking.
    let caps = ToolCapabilities {
        name_punctuation: "_-é".to_owned(),
        name_max_len: 5,
        ..ToolCapabilities::default()
    };
    let plan = plan(
        &tools(json!([
            {"type": "function", "name": "éé.é"},
            {"type": "function", "name": "éé,é"},
        ])),
        None,
        &caps,
    )
    .unwrap();
    let names = provider_names(&plan);
    assert_eq!(names, ["éé_", "é_2"]);
}

#[test]
fn long_names_are_cut_to_the_limit_with_room_for_the_suffix() {
    let long = "x".repeat(70);
    let plan = plan(
        &tools(json!([
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": long}]},
            {"type": "function", "name": format!("{long}.y")},
        ])),
        None,
        &ToolCapabilities::default(),
    )
    .unwrap();
    let first = plan.entries[0].provider_name.clone().unwrap();
    let second = plan.entries[1].provider_name.clone().unwrap();
    assert_eq!(first.len(), 64);
    assert!(first.starts_with("ns__x"));
    assert_eq!(second, format!("{}", "x".repeat(64)));
    // A third name sanitising to the same 64 characters gets a suffix within the limit.
    let plan = plan_three(&long);
    let third = plan.entries[2].provider_name.clone().unwrap();
    assert_eq!(third.len(), 64);
    assert!(third.ends_with("_2"), "{third}");
}

fn plan_three(long: &str) -> ToolPlan {
    plan(
        &tools(json!([
            {"type": "function", "name": "ok"},
            {"type": "function", "name": format!("{long}.a")},
            {"type": "function", "name": format!("{long}.b")},
        ])),
        None,
        &ToolCapabilities::default(),
    )
    .unwrap()
}

#[test]
fn the_same_name_for_two_tools_is_a_conflict() {
    let err = plan(
        &tools(json!([
            {"type": "function", "name": "apply_patch"},
            {"type": "custom", "name": "apply_patch"},
        ])),
        None,
        &ToolCapabilities::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "tool_name_conflict");
    assert_eq!(err.param(), Some("tools[1]"));

    let err = plan(
        &tools(json!([{"type": "function", "name": "f"}, {"type": "function", "name": "f"}])),
        None,
        &ToolCapabilities::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "duplicate_tool");
}

#[test]
fn too_many_tools_is_refused_with_count_and_limit() {
    let list: Vec<Value> = (0..5)
        .map(|i| json!({"type": "function", "name": format!("f{i}")}))
        .collect();
    let caps = ToolCapabilities {
        max_tools: Some(4),
        ..ToolCapabilities::default()
    };
    let err = plan(&tools(Value::Array(list)), None, &caps).unwrap_err();
    assert_eq!(err.code(), "too_many_tools");
    assert!(err.to_string().contains('5') && err.to_string().contains('4'));
}

#[test]
fn tool_choice_for_every_support_level() {
    let declared = tools(json!([
        {"type": "function", "name": "read"},
        {"type": "custom", "name": "patch"},
        {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "go"}]},
        {"type": "image_generation"},
    ]));
    let full = ToolCapabilities::default();
    let auto_only = glm();
    type Case<'a> = (
        Value,
        &'a ToolCapabilities,
        Result<Option<Value>, &'a str>,
        bool,
    );
    let cases: Vec<Case> = vec![
        (json!("auto"), &full, Ok(Some(json!("auto"))), false),
        (json!("none"), &full, Ok(Some(json!("none"))), false),
        (json!("none"), &auto_only, Ok(None), true),
        (json!("required"), &full, Ok(Some(json!("required"))), false),
        (json!("required"), &auto_only, Ok(Some(json!("auto"))), true),
        (
            json!({"type": "function", "name": "read"}),
            &full,
            Ok(Some(
                json!({"type": "function", "function": {"name": "read"}}),
            )),
            false,
        ),
        (
            json!({"type": "custom", "name": "patch"}),
            &full,
            Ok(Some(
                json!({"type": "function", "function": {"name": "patch"}}),
            )),
            false,
        ),
        (
            json!({"type": "function", "name": "go", "namespace": "ns"}),
            &full,
            Ok(Some(
                json!({"type": "function", "function": {"name": "ns__go"}}),
            )),
            false,
        ),
        (
            json!({"type": "function", "name": "read"}),
            &auto_only,
            Ok(Some(json!("auto"))),
            true,
        ),
        (
            json!({"type": "function", "name": "nope"}),
            &full,
            Err("tool_choice_unavailable"),
            false,
        ),
        (
            json!({"type": "image_generation"}),
            &full,
            Err("tool_choice_unavailable"),
            false,
        ),
        (json!("sometimes"), &full, Err("invalid_value"), false),
    ];
    for (choice, caps, expected, downgraded) in cases {
        let result = plan(&declared, Some(&choice), caps);
        match expected {
            Ok(tool_choice) => {
                let plan = result.unwrap_or_else(|e| panic!("{choice}: {e}"));
                assert_eq!(plan.tool_choice, tool_choice, "{choice}");
                let has_diag = plan
                    .diagnostics
                    .iter()
                    .any(|d| d.code == "tool_choice_downgraded");
                assert_eq!(has_diag, downgraded, "{choice}");
                if choice == json!("none") && !caps.choice_none {
                    assert!(!plan.send_tools && plan.upstream.is_empty());
                }
            }
            Err(code) => assert_eq!(result.unwrap_err().code(), code, "{choice}"),
        }
    }
}

#[test]
fn allowed_tools_filters_where_the_provider_cannot_restrict() {
    let declared = tools(json!([
        {"type": "function", "name": "a"},
        {"type": "function", "name": "b"},
        {"type": "function", "name": "c"},
    ]));
    let choice = json!({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "b"}]});
    let plan_filtered = plan(&declared, Some(&choice), &ToolCapabilities::default()).unwrap();
    let names: Vec<_> = plan_filtered
        .upstream
        .iter()
        .map(|t| match t {
            UpstreamTool::Function { name, .. } => name.clone(),
            UpstreamTool::Native(_) => String::new(),
        })
        .collect();
    assert_eq!(names, ["b"]);
    assert_eq!(plan_filtered.tool_choice, Some(json!("required")));

    let native = ToolCapabilities {
        choice_allowed_tools: true,
        ..ToolCapabilities::default()
    };
    let plan_native = plan(&declared, Some(&choice), &native).unwrap();
    assert_eq!(plan_native.upstream.len(), 3);
    assert_eq!(
        plan_native.tool_choice,
        Some(
            json!({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "b"}}]}})
        )
    );
}

#[test]
fn allowed_tools_name_degraded_tools_by_the_names_sent_upstream() {
    let declared = tools(json!([
        {"type": "function", "name": "a"},
        {"type": "custom", "name": "apply_patch", "format": {"type": "text"}},
        {"type": "namespace", "name": "mcp__docs", "tools": [{"type": "function", "name": "search"}]},
        {"type": "tool_search", "execution": "client"},
    ]));
    let choice = json!({"type": "allowed_tools", "mode": "auto", "tools": [
        {"type": "custom", "name": "apply_patch"},
        {"type": "function", "namespace": "mcp__docs", "name": "search"},
        {"type": "tool_search"},
    ]});
    let filtered = plan(&declared, Some(&choice), &ToolCapabilities::default()).unwrap();
    let names: Vec<_> = filtered
        .upstream
        .iter()
        .map(|t| match t {
            UpstreamTool::Function { name, .. } => name.clone(),
            UpstreamTool::Native(_) => String::new(),
        })
        .collect();
    assert_eq!(
        names,
        [
            "apply_patch",
            "mcp__docs__search",
            "tool_search",
            "call_found_tool"
        ]
    );
    let native = ToolCapabilities {
        choice_allowed_tools: true,
        ..ToolCapabilities::default()
    };
    let restricted = plan(&declared, Some(&choice), &native).unwrap();
    assert_eq!(
        restricted.tool_choice,
        Some(
            json!({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
                {"type": "function", "function": {"name": "apply_patch"}},
                {"type": "function", "function": {"name": "mcp__docs__search"}},
                {"type": "function", "function": {"name": "tool_search"}},
                {"type": "function", "function": {"name": "call_found_tool"}},
            ]}})
        )
    );
}

#[test]
fn strict_is_kept_only_where_supported() {
    let declared = tools(
        json!([{"type": "function", "name": "f", "strict": true, "parameters": {"type": "object"}}]),
    );
    let plan_with = plan(&declared, None, &ToolCapabilities::default()).unwrap();
    assert!(matches!(
        &plan_with.upstream[0],
        UpstreamTool::Function {
            strict: Some(true),
            ..
        }
    ));
    let plan_without = plan(&declared, None, &glm()).unwrap();
    assert!(matches!(
        &plan_without.upstream[0],
        UpstreamTool::Function { strict: None, .. }
    ));
    assert_eq!(
        plan_without.diagnostics[0].param.as_deref(),
        Some("tools[0].strict")
    );
}

#[test]
fn a_custom_tool_is_described_with_its_grammar() {
    let plan = plan(
        &tools(json!([{"type": "custom", "name": "apply_patch", "description": "Edit files.", "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"}}])),
        None,
        &ToolCapabilities::default(),
    )
    .unwrap();
    let UpstreamTool::Function {
        description,
        parameters,
        ..
    } = &plan.upstream[0]
    else {
        panic!("not a function")
    };
    let description = description.clone().unwrap();
    assert!(description.starts_with("Edit files."));
    assert!(description.contains("lark grammar"));
    assert!(description.contains("start: begin_patch"));
    assert_eq!(parameters.value()["required"], json!(["input"]));
}

/// `tool_types` is data: a provider that takes `custom` and `apply_patch` as declared gets them
/// as declared (named through the plan, so calls restore), one that cannot gets them left out or
/// refused; the types the profile does not change stay degraded.
#[test]
fn tool_types_decide_native_ignored_or_rejected_per_type() {
    let declared = tools(json!([
        {"type": "custom", "name": "apply patch", "description": "Edit."},
        {"type": "apply_patch"},
        {"type": "shell"},
        {"type": "local_shell"}
    ]));
    let caps = ToolCapabilities {
        tool_types: ToolTypes {
            custom: ToolTypeDecision::Native,
            apply_patch: ToolTypeDecision::Native,
            shell: ToolTypeDecision::Ignored,
            ..ToolTypes::default()
        },
        ..ToolCapabilities::default()
    };
    let p = plan(&declared, None, &caps).unwrap();
    assert_eq!(
        decisions(&p),
        [
            (
                "tools[0]".into(),
                Decision::Native,
                reasons::NATIVE_CUSTOM,
                Some("apply_patch".into())
            ),
            (
                "tools[1]".into(),
                Decision::Native,
                reasons::NATIVE_APPLY_PATCH,
                Some("apply_patch_2".into())
            ),
            (
                "tools[2]".into(),
                Decision::Ignored,
                reasons::NO_PROVIDER_SUPPORT,
                None
            ),
            (
                "tools[3]".into(),
                Decision::Degraded,
                reasons::LOCAL_SHELL_AS_FUNCTION,
                Some("local_shell".into())
            ),
        ]
    );
    assert_eq!(
        p.upstream[0],
        UpstreamTool::Native(NativeTool::AsDeclared(
            json!({"type": "custom", "name": "apply_patch", "description": "Edit."})
        ))
    );
    assert_eq!(
        p.upstream[1],
        UpstreamTool::Native(NativeTool::AsDeclared(json!({"type": "apply_patch"})))
    );
    assert!(matches!(&p.upstream[2], UpstreamTool::Function { name, .. } if name == "local_shell"));
    assert_eq!(
        p.names.identity("apply_patch"),
        Some(&Identity::Custom {
            namespace: None,
            name: "apply patch".into()
        })
    );

    let rejecting = ToolCapabilities {
        tool_types: ToolTypes {
            local_shell: ToolTypeDecision::Rejected,
            ..ToolTypes::default()
        },
        ..ToolCapabilities::default()
    };
    let err = plan(&declared, None, &rejecting).unwrap_err();
    assert_eq!(err.code(), "unsupported_tool");
    assert!(err.to_string().contains("tools[3]"), "{err}");
}
