//! Decomposition: a request that asks for several things in order plans as several steps bound
//! output to input, executes through the real built-ins, and ambiguity is reported.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use serde_json::json;
use sha2::{Digest, Sha256};
use toolbridge_tools::planner::{
    Bridge, CapabilityDef, IntentAnalyzer, Planner, RuleBasedAnalyzer, ValueType, split_request,
};
use toolbridge_tools::{FnTool, ToolContext, ToolError, ToolRegistry};

fn planner() -> Planner {
    let registry = Arc::new(ToolRegistry::with_builtins().expect("built-ins register"));
    Planner::builder(registry)
        .capability(
            CapabilityDef::new("math", ["calculator"])
                .text_argument("expression")
                .input("expression", ValueType::String)
                .output(ValueType::Object)
                .result_at("/text"),
        )
        .capability(
            CapabilityDef::new("hash", ["hash"])
                .text_argument("input")
                .term_argument("operation")
                .input("input", ValueType::String)
                .output(ValueType::Object),
        )
        .build()
        .expect("capabilities check against the registry")
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn plans_and_runs_two_bound_steps(request: &str) {
    let planner = planner();
    let planned = planner.plan_request(request).await.expect("plans");
    let steps = planned.plan.steps();
    assert_eq!(steps.len(), 2, "{request}: {steps:?}");
    assert_eq!(steps[0].id, "step1");
    assert_eq!(steps[0].tool, "calculator");
    assert_eq!(steps[0].args, json!({"expression": "17+25"}));
    assert_eq!(steps[1].tool, "hash");
    assert_eq!(
        steps[1].args,
        json!({"input": "$steps.step1.output/text", "operation": "sha256"})
    );
    assert_eq!(planned.parts[1].bound_to.as_deref(), Some("step1"));
    assert_eq!(planned.parts[0].capability, "math");
    assert_eq!(planned.parts[1].capability, "hash");

    let run = planner
        .executor()
        .run(&planned.plan, &ToolContext::default())
        .await
        .expect("runs");
    assert_eq!(run.order, ["step1", "step2"]);
    assert_eq!(run.outputs["step1"]["text"], json!("42"));
    assert_eq!(run.output["result"], json!(sha256_hex("42")));
}

#[tokio::test]
async fn compute_then_sha256_the_result_plans_two_bound_steps_and_hashes_42() {
    plans_and_runs_two_bound_steps("compute 17+25 then sha256 the result").await;
}

#[tokio::test]
async fn the_chinese_request_plans_and_hashes_the_same() {
    plans_and_runs_two_bound_steps("计算 17+25，然后对结果做 sha256 哈希").await;
}

#[tokio::test]
async fn the_bridge_runs_a_decomposed_intent_and_answers_with_the_last_step() {
    let bridge = Bridge::with_planner(Arc::new(planner()), true);
    let outcome = bridge
        .execute_intent(
            "calculate 6*7 and then give me the sha256 of the result",
            &ToolContext::default(),
        )
        .await
        .expect("runs");
    assert_eq!(outcome.tool, "hash");
    assert_eq!(outcome.output["result"], json!(sha256_hex("42")));
}

#[tokio::test]
async fn an_independent_second_part_keeps_its_own_text_and_runs_after_the_first() {
    let planned = planner()
        .plan_request("compute 2+2, then sha256 hello")
        .await
        .expect("plans");
    let steps = planned.plan.steps();
    assert_eq!(
        steps[1].args,
        json!({"input": "hello", "operation": "sha256"})
    );
    assert_eq!(steps[1].depends_on, ["step1"]);
    assert_eq!(planned.parts[1].bound_to, None);
}

#[tokio::test]
async fn a_single_intent_keeps_its_one_step_plan() {
    let planned = planner()
        .plan_intent("compute 1+1", None)
        .await
        .expect("plans");
    assert_eq!(planned.plan.steps().len(), 1);
    assert_eq!(planned.plan.steps()[0].id, "intent");
    assert_eq!(planned.plan.steps()[0].args, json!({"expression": "1+1"}));
}

#[tokio::test]
async fn an_ambiguous_part_is_reported_not_guessed() {
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    let tool = |name: &'static str| {
        Arc::new(FnTool::new(
            name,
            "test tool",
            schema.clone(),
            |_, _| async { Ok(json!(null)) },
        ))
    };
    let mut registry = ToolRegistry::empty();
    registry.register(tool("calc")).expect("registers");
    registry.register(tool("finder")).expect("registers");
    registry.register(tool("reader")).expect("registers");
    let planner = Planner::builder(Arc::new(registry))
        .capability(CapabilityDef::new("math", ["calc"]).text_argument("text"))
        .capability(CapabilityDef::new("web_search", ["finder"]).text_argument("text"))
        .capability(CapabilityDef::new("file", ["reader"]).text_argument("text"))
        .build()
        .expect("builds");
    let err = planner
        .plan_request("compute 1+1 then search the file")
        .await
        .expect_err("ambiguous");
    assert_eq!(err.code(), "ambiguous_intent");
    assert_eq!(
        err,
        ToolError::AmbiguousIntent {
            part: 2,
            text: "search the file".into(),
            candidates: vec!["web_search".into(), "file".into()],
        }
    );
    // A part that asks for nothing known names that part.
    let err = planner
        .plan_request("compute 1+1 then paint the fence")
        .await
        .expect_err("nothing known");
    assert_eq!(
        err,
        ToolError::NoCapability {
            intent: "paint the fence".into()
        }
    );
}

#[test]
fn connectives_split_on_whole_words_and_chinese_terms_only() {
    let texts = |text: &str| -> Vec<String> {
        split_request(text)
            .iter()
            .map(|p| text[p.span.clone()].to_owned())
            .collect()
    };
    assert_eq!(texts("add 17 and 25"), ["add 17 and 25"]);
    assert_eq!(
        texts("hash the authentication token"),
        ["hash the authentication token"]
    );
    assert_eq!(
        texts("uppercase abc, and then reverse it"),
        ["uppercase abc", "reverse it"]
    );
    assert_eq!(texts("计算 1+1 再 计算 2+2"), ["计算 1+1", "计算 2+2"]);
    let parts = split_request("compute 2+3 using the result hash");
    assert_eq!(parts.len(), 2);
    assert!(!parts[0].uses_previous);
    assert!(parts[1].uses_previous, "the connective hands the result on");
    // The trait's default decomposition is the same split.
    let analyzer = RuleBasedAnalyzer::with_default_rules();
    assert_eq!(analyzer.decompose("a then b"), split_request("a then b"));
}
