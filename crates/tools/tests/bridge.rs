//! The bridge: named calls validated and executed, unknown names answered with `unknown_tool`
//! and close matches, the planner fallback only when enabled, and evidence on every execution.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use serde_json::json;
use toolbridge_tools::planner::{
    Bridge, CapabilityDef, EvidenceStore, MemoryEvidenceStore, Planner, Route, ValueType,
};
use toolbridge_tools::{FnTool, Tool, ToolContext, ToolError, ToolRegistry};

/// A toy calculator that sums `a+b+…`; anything else is a tool failure.
fn calculator() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "calculator",
        "Sums integers written as `a+b`.",
        json!({
            "type": "object",
            "properties": {"expression": {"type": "string", "minLength": 1}},
            "required": ["expression"],
            "additionalProperties": false
        }),
        |args, _ctx| async move {
            let expression = args["expression"].as_str().unwrap_or_default();
            let mut sum = 0_i64;
            for part in expression.split('+') {
                sum += part
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| ToolError::Failed(format!("cannot read `{part}`")))?;
            }
            Ok(json!(sum))
        },
    ))
}

fn echo() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "echo",
        "Echoes its text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args, _ctx| async move { Ok(args["text"].clone()) },
    ))
}

struct Setup {
    store: Arc<MemoryEvidenceStore>,
    planner: Arc<Planner>,
}

fn setup() -> Setup {
    let registry = Arc::new(ToolRegistry::with_tools([calculator(), echo()]).unwrap());
    let store = Arc::new(MemoryEvidenceStore::default());
    let planner = Planner::builder(registry)
        .capability(
            CapabilityDef::new("math", ["calculator"])
                .text_argument("expression")
                .input("expression", ValueType::String)
                .output(ValueType::Number),
        )
        .evidence(store.clone())
        .build()
        .unwrap();
    Setup {
        store,
        planner: Arc::new(planner),
    }
}

#[tokio::test]
async fn a_named_call_is_validated_executed_and_recorded() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), false);
    let outcome = bridge
        .execute(
            "calculator",
            json!({"expression": "1+1"}),
            &ToolContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.output, json!(2));
    assert_eq!(outcome.tool, "calculator");
    assert_eq!(outcome.route, Route::Direct);
    let records = s.store.recent("calculator", 10).await.unwrap();
    assert_eq!(records.len(), 1);
    assert!(records[0].success);
}

#[tokio::test]
async fn invalid_arguments_on_the_direct_path_are_rejected_and_not_recorded() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), true);
    for args in [
        json!({}),
        json!({"expression": 2}),
        json!({"expression": ""}),
        json!({"expression": "1", "x": 1}),
    ] {
        let err = bridge
            .execute("calculator", args.clone(), &ToolContext::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "invalid_arguments", "{args}");
    }
    assert_eq!(s.store.len("calculator"), 0);
}

#[tokio::test]
async fn a_failing_tool_is_recorded_as_a_failure() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), false);
    let err = bridge
        .execute(
            "calculator",
            json!({"expression": "1+x"}),
            &ToolContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "tool_failed");
    let records = s.store.recent("calculator", 10).await.unwrap();
    assert_eq!(records.len(), 1);
    assert!(!records[0].success);
    assert_eq!(records[0].error_code.as_deref(), Some("tool_failed"));
}

#[tokio::test]
async fn an_unknown_name_without_fallback_is_unknown_tool_with_close_matches() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), false);
    // "calculate" would plan to math, but the fallback is disabled.
    let err = bridge
        .execute(
            "calculate",
            json!({"expression": "1+1"}),
            &ToolContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "calculate".into(),
            suggestions: vec!["calculator".into()]
        }
    );
    assert_eq!(s.store.len("calculator"), 0);
}

#[tokio::test]
async fn a_bridge_without_a_planner_never_falls_back() {
    let registry = Arc::new(ToolRegistry::with_tools([calculator()]).unwrap());
    let store = Arc::new(MemoryEvidenceStore::default());
    let bridge = Bridge::new(registry, store.clone());
    let err = bridge
        .execute(
            "Calculator",
            json!({"expression": "1"}),
            &ToolContext::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "Calculator".into(),
            suggestions: vec!["calculator".into()]
        }
    );
    let err = bridge
        .execute_intent("compute 1+1", &ToolContext::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_configuration");
    // Direct calls still record evidence.
    bridge
        .execute(
            "calculator",
            json!({"expression": "1"}),
            &ToolContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(store.len("calculator"), 1);
}

#[tokio::test]
async fn an_unknown_name_with_fallback_is_planned_and_recorded() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), true);
    let outcome = bridge
        .execute(
            "calculate",
            json!({"expression": "2+3"}),
            &ToolContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.output, json!(5));
    assert_eq!(outcome.tool, "calculator");
    assert_eq!(
        outcome.route,
        Route::Planned {
            capability: "math".into()
        }
    );
    let records = s.store.recent("calculator", 10).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].capability.as_deref(), Some("math"));
}

#[tokio::test]
async fn the_fallback_still_validates_the_arguments() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), true);
    let err = bridge
        .execute("compute", json!({"expr": "2+3"}), &ToolContext::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    assert_eq!(s.store.len("calculator"), 0);
}

#[tokio::test]
async fn a_fallback_that_finds_nothing_is_still_unknown_tool() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), true);
    // "address_book" must not be read as "add".
    let err = bridge
        .execute("address_book", json!({}), &ToolContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "address_book".into(),
            suggestions: vec![]
        }
    );
}

#[tokio::test]
async fn an_intent_is_planned_from_text_in_english_and_chinese() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), false);
    let ctx = ToolContext::default();
    let outcome = bridge.execute_intent("compute 1+1", &ctx).await.unwrap();
    assert_eq!(outcome.output, json!(2));
    let outcome = bridge.execute_intent("计算 20+22", &ctx).await.unwrap();
    assert_eq!(outcome.output, json!(42));
    assert_eq!(s.store.len("calculator"), 2);
    let err = bridge
        .execute_intent("what is my address", &ctx)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::NoCapability {
            intent: "what is my address".into()
        }
    );
}

#[tokio::test]
async fn an_intent_plan_error_is_the_tools_own_error() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), false);
    let err = bridge
        .execute_intent("calculate one plus one", &ToolContext::default())
        .await
        .unwrap_err();
    // "plus" is a math term too, so the expression left is "one one".
    assert_eq!(err, ToolError::Failed("cannot read `one one`".into()));
    assert_eq!(s.store.len("calculator"), 1);
}

#[tokio::test]
async fn plans_run_through_the_bridge_record_every_step() {
    let s = setup();
    let bridge = Bridge::with_planner(s.planner.clone(), false);
    let plan = toolbridge_tools::planner::ExecutionPlan::new(vec![
        s.planner
            .step("sum", "math", json!({"expression": "40+2"}))
            .await
            .unwrap(),
        toolbridge_tools::planner::PlanStep::new(
            "say",
            "echo",
            json!({"text": "$steps.sum.output"}),
        ),
    ])
    .unwrap();
    // echo wants a string; the sum is a number: the schema catches it at run time.
    let err = bridge
        .run_plan(&plan, &ToolContext::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::StepFailed { ref step, .. } if step == "say"));
    assert_eq!(s.store.len("calculator"), 1);
    assert_eq!(
        s.store.len("echo"),
        0,
        "a rejected call is not an execution"
    );
}
