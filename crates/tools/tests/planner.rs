//! The planner: intent rules on tricky words, capabilities checked against the registry, DAG
//! validation, evidence changing a ranking over a recent window, and multi-step execution with
//! output binding.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolbridge_tools::planner::{
    CapabilityDef, EvidenceRecord, EvidenceScorer, EvidenceStore, ExecutionPlan, IntentRule,
    MemoryEvidenceStore, PlanError, PlanStep, Planner, RuleBasedAnalyzer, ToolTraits, ValueType,
};
use toolbridge_tools::{FnTool, Tool, ToolContext, ToolError, ToolRegistry};

fn number_tool(name: &'static str, op: fn(f64, f64) -> f64) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        name,
        "Combines two numbers.",
        json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": false
        }),
        move |args, _ctx| async move {
            let a = args["a"].as_f64().unwrap_or_default();
            let b = args["b"].as_f64().unwrap_or_default();
            Ok(json!(op(a, b)))
        },
    ))
}

fn text_tool(name: &'static str) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        name,
        "Describes its input.",
        json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "value": {}},
            "additionalProperties": false
        }),
        |args, _ctx| async move {
            Ok(
                json!({"described": args.get("value").cloned().unwrap_or(Value::Null), "len": args["text"].as_str().map(str::len)}),
            )
        },
    ))
}

fn fails_tool() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "flaky",
        "Always fails.",
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
        |_, _| async { Err(ToolError::Failed("upstream down".into())) },
    ))
}

fn registry() -> Arc<ToolRegistry> {
    Arc::new(
        ToolRegistry::with_tools([
            number_tool("add", |a, b| a + b),
            number_tool("add_v2", |a, b| a + b),
            number_tool("mul", |a, b| a * b),
            text_tool("describe"),
            fails_tool(),
        ])
        .unwrap(),
    )
}

fn math() -> CapabilityDef {
    CapabilityDef::new("math", ["add", "add_v2"])
        .input("a", ValueType::Number)
        .input("b", ValueType::Number)
        .output(ValueType::Number)
}

fn tops(analyzer: &RuleBasedAnalyzer, text: &str) -> Vec<String> {
    analyzer
        .matches(text)
        .into_iter()
        .map(|m| m.capability)
        .collect()
}

// ---------------------------------------------------------------- intent rules

#[test]
fn english_terms_match_whole_words_only() {
    let analyzer = RuleBasedAnalyzer::with_default_rules();
    // The seed's flaw: first-match substring rules.
    assert!(tops(&analyzer, "what is my email address").is_empty());
    assert!(tops(&analyzer, "the thread pool is busy").is_empty());
    assert!(tops(&analyzer, "an addendum was added").is_empty());
    assert!(tops(&analyzer, "unreadable spreadsheet").is_empty());
    assert_eq!(tops(&analyzer, "add 2 and 3"), ["math"]);
    assert_eq!(tops(&analyzer, "Read the file"), ["file"]);
    assert_eq!(tops(&analyzer, "compute 1+1"), ["math"]);
}

#[test]
fn chinese_terms_match_whole_configured_terms() {
    let analyzer = RuleBasedAnalyzer::with_default_rules();
    assert_eq!(tops(&analyzer, "帮我计算1+1"), ["math"]);
    assert_eq!(tops(&analyzer, "计算"), ["math"]);
    // 计算机 (computer) is a neutral term that shadows 计算 (compute).
    assert!(tops(&analyzer, "计算机科学").is_empty());
    // 地址 (address) and 线程 (thread) are not capabilities.
    assert!(tops(&analyzer, "这是我的地址").is_empty());
    assert!(tops(&analyzer, "多线程读取文件").contains(&"file".to_owned()));
    assert_eq!(tops(&analyzer, "生成sha256哈希"), ["hash"]);
}

#[test]
fn custom_rules_and_neutral_terms_are_honoured() {
    let analyzer = RuleBasedAnalyzer::new(
        [
            IntentRule::new("weather", ["weather", "forecast", "天气"]),
            IntentRule::new("math", ["add"]),
        ],
        ["天气预报员"],
    )
    .unwrap();
    assert_eq!(tops(&analyzer, "Weather forecast, please"), ["weather"]);
    assert_eq!(tops(&analyzer, "明天天气"), ["weather"]);
    assert!(tops(&analyzer, "天气预报员来了").is_empty());
    assert!(tops(&analyzer, "the address").is_empty());
}

// ---------------------------------------------------------------- capabilities

#[test]
fn a_capability_naming_an_unregistered_tool_fails_the_build() {
    let err = Planner::builder(registry())
        .capability(CapabilityDef::new("math", ["add", "calculator"]))
        .build()
        .unwrap_err();
    assert_eq!(err.code(), "invalid_configuration");
    assert!(err.to_string().contains("`calculator`"), "{err}");
}

#[test]
fn an_unregistered_tool_gets_suggestions_in_the_build_error() {
    let err = Planner::builder(registry())
        .capability(CapabilityDef::new("math", ["Add-V2"]))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("did you mean add_v2"), "{err}");
}

#[test]
fn declared_arguments_must_exist_in_every_tool_schema() {
    let err = Planner::builder(registry())
        .capability(CapabilityDef::new("math", ["add"]).text_argument("expression"))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("`expression`"), "{err}");
    let err = Planner::builder(registry())
        .capability(CapabilityDef::new("math", ["add"]).input("c", ValueType::Number))
        .build()
        .unwrap_err();
    assert_eq!(err.code(), "invalid_configuration");
}

#[test]
fn traits_for_an_unregistered_tool_fail_the_build() {
    let err = Planner::builder(registry())
        .tool_traits("ghost", ToolTraits::pure())
        .build()
        .unwrap_err();
    assert_eq!(err.code(), "invalid_configuration");
}

#[test]
fn duplicate_and_empty_capabilities_fail_the_build() {
    let err = Planner::builder(registry())
        .capabilities([math(), math()])
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    let err = Planner::builder(registry())
        .capability(CapabilityDef::new("math", [] as [&str; 0]))
        .build()
        .unwrap_err();
    assert_eq!(err.code(), "invalid_configuration");
}

#[test]
fn capabilities_can_come_from_tool_tags() {
    let tagged = FnTool::new("tagged", "", json!({"type": "object"}), |_, _| async {
        Ok(Value::Null)
    })
    .with_capabilities(&["hash", "text"]);
    let registry = Arc::new(ToolRegistry::with_tools([Arc::new(tagged) as Arc<dyn Tool>]).unwrap());
    let planner = Planner::builder(registry)
        .capabilities_from_tool_tags()
        .build()
        .unwrap();
    let ids: Vec<&str> = planner.catalog().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["hash", "text"]);
    assert_eq!(planner.catalog().get("hash").unwrap().tools, ["tagged"]);
}

// ---------------------------------------------------------------- DAG validation

fn step(id: &str, args: Value) -> PlanStep {
    PlanStep::new(id, "add", args)
}

#[test]
fn a_cycle_is_rejected_with_its_steps() {
    let err = ExecutionPlan::new(vec![
        step("a", json!({"a": "$steps.c.output", "b": 1})),
        step("b", json!({"a": "$steps.a.output", "b": 1})),
        step("c", json!({"a": 1, "b": 1})).after("b"),
        step("free", json!({"a": 1, "b": 1})),
    ])
    .unwrap_err();
    assert_eq!(
        err,
        PlanError::Cycle {
            steps: vec!["a".into(), "b".into(), "c".into()]
        }
    );
    assert_eq!(err.code(), "cycle");
}

#[test]
fn a_step_depending_on_itself_is_a_cycle() {
    let err = ExecutionPlan::new(vec![step("a", json!({"a": "$steps.a.output"}))]).unwrap_err();
    assert_eq!(err.code(), "cycle");
}

#[test]
fn a_missing_dependency_is_rejected_for_explicit_and_bound_steps() {
    let err = ExecutionPlan::new(vec![step("a", json!({})).after("ghost")]).unwrap_err();
    assert_eq!(
        err,
        PlanError::MissingDependency {
            step: "a".into(),
            missing: "ghost".into()
        }
    );
    // A binding nested deep in the arguments is a dependency too.
    let err = ExecutionPlan::new(vec![step(
        "a",
        json!({"list": [{"x": "$steps.ghost.output/y"}]}),
    )])
    .unwrap_err();
    assert_eq!(err.code(), "missing_dependency");
}

#[test]
fn an_incompatible_binding_type_is_rejected() {
    let produce_text =
        PlanStep::new("t", "describe", json!({"text": "x"})).output(ValueType::String);
    let consume_number =
        step("n", json!({"a": "$steps.t.output", "b": 1})).input("a", ValueType::Number);
    let err = ExecutionPlan::new(vec![produce_text.clone(), consume_number]).unwrap_err();
    assert_eq!(
        err,
        PlanError::TypeMismatch {
            step: "n".into(),
            argument: "a".into(),
            expected: ValueType::Number,
            found: ValueType::String,
            from: "t".into()
        }
    );
    // A pointer into a scalar output cannot select anything.
    let pointer_into_text = PlanStep::new("p", "describe", json!({"value": "$steps.t.output/len"}));
    let err = ExecutionPlan::new(vec![produce_text, pointer_into_text]).unwrap_err();
    assert_eq!(err.code(), "type_mismatch");
}

#[test]
fn compatible_and_untyped_bindings_are_accepted() {
    let plan = ExecutionPlan::new(vec![
        step("sum", json!({"a": 1, "b": 2})).output(ValueType::Number),
        step("double", json!({"a": "$steps.sum.output", "b": 2})).input("a", ValueType::Number),
        PlanStep::new("obj", "describe", json!({})).output(ValueType::Object),
        PlanStep::new(
            "part",
            "describe",
            json!({"value": "$steps.obj.output/len"}),
        )
        .input("value", ValueType::Number),
    ]);
    assert!(plan.is_ok(), "{plan:?}");
}

#[test]
fn duplicate_invalid_and_empty_plans_are_rejected() {
    let dup = ExecutionPlan::new(vec![step("a", json!({})), step("a", json!({}))]).unwrap_err();
    assert_eq!(dup, PlanError::DuplicateStep("a".into()));
    let bad = ExecutionPlan::new(vec![step("a b", json!({}))]).unwrap_err();
    assert_eq!(bad.code(), "invalid_step_id");
    assert_eq!(ExecutionPlan::new(vec![]).unwrap_err(), PlanError::Empty);
    let binding = ExecutionPlan::new(vec![step("a", json!({"a": "$steps.b.result"}))]).unwrap_err();
    assert_eq!(binding.code(), "bad_binding");
    let as_tool_error: ToolError = binding.into();
    assert_eq!(as_tool_error.code(), "invalid_plan");
}

// ---------------------------------------------------------------- evidence

fn record(tool: &str, success: bool, latency_ms: u64) -> EvidenceRecord {
    let outcome: Result<(), ToolError> = if success {
        Ok(())
    } else {
        Err(ToolError::Failed("x".into()))
    };
    EvidenceRecord::new(tool, Duration::from_millis(latency_ms), &outcome)
}

#[tokio::test]
async fn evidence_changes_the_ranking() {
    let store = Arc::new(MemoryEvidenceStore::default());
    let planner = Planner::builder(registry())
        .capability(math())
        .evidence(store.clone())
        .build()
        .unwrap();
    let before: Vec<String> = planner
        .rank("math")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.tool)
        .collect();
    // No evidence: equal scores keep the order of preference.
    assert_eq!(before, ["add", "add_v2"]);

    for _ in 0..10 {
        store.record(record("add", false, 50)).await.unwrap();
        store.record(record("add_v2", true, 50)).await.unwrap();
    }
    let after = planner.rank("math").await.unwrap();
    assert_eq!(after[0].tool, "add_v2");
    assert!(after[0].success_rate > after[1].success_rate);
    assert_eq!(after[0].samples, 10);
}

#[tokio::test]
async fn latency_and_traits_also_rank() {
    let store = Arc::new(MemoryEvidenceStore::default());
    let planner = Planner::builder(registry())
        .capability(math())
        .evidence(store.clone())
        .build()
        .unwrap();
    for _ in 0..5 {
        store.record(record("add", true, 5_000)).await.unwrap();
        store.record(record("add_v2", true, 10)).await.unwrap();
    }
    assert_eq!(planner.rank("math").await.unwrap()[0].tool, "add_v2");

    // Pure traits can outweigh a latency difference.
    let planner = Planner::builder(registry())
        .capability(math())
        .tool_traits("add", ToolTraits::pure())
        .evidence(store.clone())
        .build()
        .unwrap();
    assert_eq!(planner.rank("math").await.unwrap()[0].tool, "add");
}

#[tokio::test]
async fn the_scorer_reads_the_most_recent_window_not_the_oldest() {
    let store = MemoryEvidenceStore::default();
    // A long failing past, then recovery.
    for _ in 0..200 {
        store.record(record("add", false, 10)).await.unwrap();
    }
    for _ in 0..20 {
        store.record(record("add", true, 10)).await.unwrap();
    }
    let recent = store.recent("add", 20).await.unwrap();
    assert_eq!(recent.len(), 20);
    assert!(
        recent.iter().all(|r| r.success),
        "the newest records come first"
    );

    let scorer = EvidenceScorer {
        window: 20,
        ..EvidenceScorer::default()
    };
    let score = scorer.score("add", ToolTraits::default(), &recent);
    assert_eq!(score.samples, 20);
    assert!((score.success_rate - 21.0 / 22.0).abs() < 1e-9);

    // The scorer never looks past its window even when handed more.
    let all = store.recent("add", 1000).await.unwrap();
    let windowed = scorer.score("add", ToolTraits::default(), &all);
    assert_eq!(windowed, score);
}

#[tokio::test]
async fn the_memory_store_drops_the_oldest_records_past_capacity() {
    let store = MemoryEvidenceStore::with_capacity(3);
    for latency in 1..=5 {
        store.record(record("add", true, latency)).await.unwrap();
    }
    assert_eq!(store.len("add"), 3);
    let latencies: Vec<u128> = store
        .recent("add", 10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.latency.as_millis())
        .collect();
    assert_eq!(latencies, [5, 4, 3]);
    assert!(store.recent("other", 10).await.unwrap().is_empty());
}

// ---------------------------------------------------------------- execution

#[tokio::test]
async fn a_two_step_plan_binds_outputs_and_records_evidence() {
    let store = Arc::new(MemoryEvidenceStore::default());
    let planner = Planner::builder(registry())
        .capability(math())
        .evidence(store.clone())
        .build()
        .unwrap();
    let plan = ExecutionPlan::new(vec![
        PlanStep::new("product", "mul", json!({"a": "$steps.sum.output", "b": 10})),
        planner
            .step("sum", "math", json!({"a": 1, "b": 2}))
            .await
            .unwrap(),
        PlanStep::new(
            "report",
            "describe",
            json!({"text": "done", "value": ["$steps.sum.output", "$steps.product.output"]}),
        ),
    ])
    .unwrap();
    let run = planner
        .executor()
        .run(&plan, &ToolContext::default())
        .await
        .unwrap();
    assert_eq!(run.order, ["sum", "product", "report"]);
    assert_eq!(run.outputs["product"], json!(30.0));
    assert_eq!(run.output, json!({"described": [3.0, 30.0], "len": 4}));
    assert_eq!(
        store.len("add") + store.len("mul") + store.len("describe"),
        3
    );
}

#[tokio::test]
async fn a_pointer_binding_selects_part_of_an_output() {
    let planner = Planner::builder(registry()).build().unwrap();
    let plan = ExecutionPlan::new(vec![
        PlanStep::new("d", "describe", json!({"text": "abcd"})),
        PlanStep::new("n", "add", json!({"a": "$steps.d.output/len", "b": 1})),
    ])
    .unwrap();
    let run = planner
        .executor()
        .run(&plan, &ToolContext::default())
        .await
        .unwrap();
    assert_eq!(run.output, json!(5.0));
}

#[tokio::test]
async fn a_binding_to_nothing_fails_the_step_with_its_path() {
    let planner = Planner::builder(registry()).build().unwrap();
    let plan = ExecutionPlan::new(vec![
        PlanStep::new("d", "describe", json!({"text": "abcd"})),
        PlanStep::new("n", "add", json!({"a": "$steps.d.output/missing", "b": 1})),
    ])
    .unwrap();
    let err = planner
        .executor()
        .run(&plan, &ToolContext::default())
        .await
        .unwrap_err();
    match err {
        ToolError::StepFailed { step, error } => {
            assert_eq!(step, "n");
            assert!(matches!(*error, ToolError::InvalidArguments { ref path, .. } if path == "/a"));
        }
        other => panic!("expected step_failed, got {other:?}"),
    }
}

#[tokio::test]
async fn bound_arguments_are_validated_against_the_schema() {
    let planner = Planner::builder(registry()).build().unwrap();
    // Untyped steps pass plan validation, but the schema still guards the call.
    let plan = ExecutionPlan::new(vec![
        PlanStep::new("d", "describe", json!({"text": "abcd"})),
        PlanStep::new("n", "add", json!({"a": "$steps.d.output", "b": 1})),
    ])
    .unwrap();
    let err = planner
        .executor()
        .run(&plan, &ToolContext::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "step_failed");
    assert!(
        matches!(err, ToolError::StepFailed { ref error, .. } if error.code() == "invalid_arguments")
    );
}

#[tokio::test]
async fn a_failing_step_stops_the_plan_and_is_recorded() {
    let store = Arc::new(MemoryEvidenceStore::default());
    let planner = Planner::builder(registry())
        .evidence(store.clone())
        .build()
        .unwrap();
    let plan = ExecutionPlan::new(vec![
        PlanStep::new("f", "flaky", json!({})),
        PlanStep::new("after", "add", json!({"a": "$steps.f.output", "b": 1})),
    ])
    .unwrap();
    let err = planner
        .executor()
        .run(&plan, &ToolContext::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::StepFailed {
            step: "f".into(),
            error: Box::new(ToolError::Failed("upstream down".into()))
        }
    );
    let records = store.recent("flaky", 10).await.unwrap();
    assert_eq!(records.len(), 1);
    assert!(!records[0].success);
    assert_eq!(records[0].error_code.as_deref(), Some("tool_failed"));
    assert_eq!(store.len("add"), 0, "the plan stopped at the failure");
}

#[tokio::test]
async fn planning_from_an_intent_uses_the_best_tool_and_the_text_argument() {
    let store = Arc::new(MemoryEvidenceStore::default());
    let planner = Planner::builder(registry())
        .capability(CapabilityDef::new("describe", ["describe"]).text_argument("text"))
        .analyzer(
            RuleBasedAnalyzer::new(
                [IntentRule::new("describe", ["describe", "描述"])],
                [] as [&str; 0],
            )
            .unwrap(),
        )
        .evidence(store)
        .build()
        .unwrap();
    let planned = planner
        .plan_intent("describe hello world", None)
        .await
        .unwrap();
    assert_eq!(planned.capability, "describe");
    let step = &planned.plan.steps()[0];
    assert_eq!(step.tool, "describe");
    assert_eq!(step.args, json!({"text": "hello world"}));
    let planned = planner.plan_intent("描述 你好", None).await.unwrap();
    assert_eq!(planned.plan.steps()[0].args, json!({"text": "你好"}));
    let err = planner
        .plan_intent("something unrelated", None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "no_capability");
}
