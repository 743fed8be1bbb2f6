//! The registry's boundaries: names, duplicates, unknown names with suggestions, schema
//! validation before every execution, deadline, cancellation and output size.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use toolbridge_tools::{FnTool, Tool, ToolContext, ToolError, ToolRegistry};

fn add_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "a": { "type": "integer" },
            "b": { "type": "integer" },
            "tags": { "type": "array", "items": { "type": "string" } }
        },
        "required": ["a", "b"],
        "additionalProperties": false
    })
}

fn add_tool() -> Arc<dyn Tool> {
    Arc::new(
        FnTool::new(
            "add",
            "Adds a and b.",
            add_schema(),
            |args, _ctx| async move {
                let a = args["a"].as_i64().unwrap_or_default();
                let b = args["b"].as_i64().unwrap_or_default();
                Ok(json!(a + b))
            },
        )
        .with_capabilities(&["math"]),
    )
}

/// A tool that counts its runs, to prove rejected calls never reach it.
fn counting_tool(name: &str, runs: Arc<AtomicUsize>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        name,
        "Counts its runs.",
        add_schema(),
        move |_args, _ctx| {
            let runs = Arc::clone(&runs);
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(json!("ran"))
            }
        },
    ))
}

fn empty_object_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

fn sleeper(seconds: u64) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "sleeper",
        "Sleeps.",
        empty_object_schema(),
        move |_args, _ctx| async move {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            Ok(json!("woke"))
        },
    ))
}

fn registry_with(tools: Vec<Arc<dyn Tool>>) -> ToolRegistry {
    ToolRegistry::with_tools(tools).unwrap()
}

fn cancellable_ctx(timeout: Duration) -> (ToolContext, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let ctx = ToolContext {
        deadline: tokio::time::Instant::now() + timeout,
        cancelled: rx,
        max_output_bytes: 1024,
    };
    (ctx, tx)
}

#[tokio::test]
async fn a_valid_call_runs_the_tool() {
    let registry = registry_with(vec![add_tool()]);
    let out = registry
        .execute("add", json!({"a": 2, "b": 40}), &ToolContext::default())
        .await;
    assert_eq!(out, Ok(json!(42)));
}

#[test]
fn duplicate_names_are_rejected_and_the_first_tool_stays() {
    let mut registry = registry_with(vec![add_tool()]);
    let err = registry.register(add_tool()).unwrap_err();
    assert_eq!(err, ToolError::Duplicate("add".into()));
    assert_eq!(err.code(), "duplicate_tool");
    assert_eq!(registry.len(), 1);
}

#[test]
fn register_all_stops_at_the_first_error() {
    let mut registry = ToolRegistry::empty();
    let err = registry
        .register_all([add_tool(), add_tool(), sleeper(1)])
        .unwrap_err();
    assert_eq!(err.code(), "duplicate_tool");
    assert_eq!(registry.names().collect::<Vec<_>>(), ["add"]);
}

#[test]
fn invalid_names_are_rejected_at_registration() {
    for name in ["", "has space", "a.b", "名字", &"x".repeat(65)] {
        let tool = Arc::new(FnTool::new(name, "", empty_object_schema(), |_, _| async {
            Ok(Value::Null)
        }));
        let err = ToolRegistry::empty().register(tool).unwrap_err();
        assert_eq!(err, ToolError::InvalidName(name.to_owned()), "{name:?}");
    }
}

#[test]
fn schemas_must_compile_and_describe_an_object() {
    for schema in [
        json!({"type": "string"}),
        json!(true),
        json!({"properties": {}}),
        json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}}),
        json!({"type": "object", "properties": {"a": {"minLength": "three"}}}),
    ] {
        let tool = Arc::new(FnTool::new("t", "", schema.clone(), |_, _| async {
            Ok(Value::Null)
        }));
        let err = ToolRegistry::empty().register(tool).unwrap_err();
        assert_eq!(err.code(), "invalid_schema", "{schema}");
    }
}

#[tokio::test]
async fn unknown_names_suggest_case_separator_and_typo_variants() {
    let web = Arc::new(FnTool::new(
        "web_search",
        "",
        empty_object_schema(),
        |_, _| async { Ok(Value::Null) },
    ));
    let registry = registry_with(vec![add_tool(), web]);
    let ctx = ToolContext::default();
    for (asked, expected) in [
        ("ADD", vec!["add"]),
        ("web-search", vec!["web_search"]),
        ("WebSearch", vec!["web_search"]),
        ("web_serch", vec!["web_search"]),
        ("weather_forecast", vec![]),
    ] {
        let err = registry.execute(asked, json!({}), &ctx).await.unwrap_err();
        assert_eq!(
            err,
            ToolError::UnknownTool {
                name: asked.to_owned(),
                suggestions: expected.into_iter().map(str::to_owned).collect(),
            }
        );
        assert_eq!(err.code(), "unknown_tool");
    }
}

#[tokio::test]
async fn arguments_are_validated_with_the_failing_pointer_before_the_tool_runs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = registry_with(vec![counting_tool("count", Arc::clone(&runs))]);
    let ctx = ToolContext::default();
    let cases = [
        (json!({"a": 1, "b": "two"}), "/b"),
        (json!({"a": 1}), "/"),
        (json!({"a": 1, "b": 2, "extra": true}), "/"),
        (json!({"a": 1, "b": 2, "tags": ["ok", 3]}), "/tags/1"),
        (json!([1, 2]), "/"),
        (json!(null), "/"),
        (json!("a=1,b=2"), "/"),
    ];
    for (args, path) in cases {
        let err = registry
            .execute("count", args.clone(), &ctx)
            .await
            .unwrap_err();
        match err {
            ToolError::InvalidArguments { path: got, .. } => assert_eq!(got, path, "{args}"),
            other => panic!("{args}: expected invalid_arguments, got {other:?}"),
        }
        assert_eq!(
            registry.validate("count", &args).unwrap_err().code(),
            "invalid_arguments"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "no rejected call may run");
    registry
        .execute("count", json!({"a": 1, "b": 2}), &ctx)
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_tool_past_the_deadline_times_out() {
    let registry = registry_with(vec![sleeper(3600)]);
    let ctx = ToolContext::with_timeout(Duration::from_secs(1), 1024);
    let err = registry
        .execute("sleeper", json!({}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout);
    assert_eq!(err.code(), "timeout");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_already_passed_times_out_without_running() {
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = registry_with(vec![counting_tool("count", Arc::clone(&runs))]);
    let ctx = ToolContext::with_timeout(Duration::ZERO, 1024);
    assert_eq!(
        registry
            .execute("count", json!({"a": 1, "b": 2}), &ctx)
            .await,
        Err(ToolError::Timeout)
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn cancelling_stops_a_running_tool() {
    let registry = registry_with(vec![sleeper(3600)]);
    let (ctx, cancel) = cancellable_ctx(Duration::from_secs(7200));
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        cancel.send(true).unwrap();
        cancel
    });
    let err = registry
        .execute("sleeper", json!({}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Cancelled);
    assert_eq!(err.code(), "cancelled");
    drop(canceller.await.unwrap());
}

#[tokio::test]
async fn an_already_cancelled_call_does_not_start() {
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = registry_with(vec![counting_tool("count", Arc::clone(&runs))]);
    let (ctx, cancel) = cancellable_ctx(Duration::from_secs(10));
    cancel.send(true).unwrap();
    let err = registry
        .execute("count", json!({"a": 1, "b": 2}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Cancelled);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_dropped_cancel_sender_does_not_cancel() {
    let registry = registry_with(vec![add_tool()]);
    let (ctx, cancel) = cancellable_ctx(Duration::from_secs(10));
    drop(cancel);
    assert_eq!(
        registry.execute("add", json!({"a": 1, "b": 1}), &ctx).await,
        Ok(json!(2))
    );
}

#[tokio::test]
async fn output_larger_than_the_limit_is_refused() {
    let big = Arc::new(FnTool::new(
        "big",
        "Returns n bytes.",
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}),
        |args, _ctx| async move {
            let n = args["n"].as_u64().unwrap_or_default() as usize;
            Ok(Value::String("x".repeat(n)))
        },
    ));
    let registry = registry_with(vec![big]);
    let ctx = ToolContext::with_timeout(Duration::from_secs(10), 100);
    // 98 characters plus two quotes is exactly the limit.
    assert!(
        registry
            .execute("big", json!({"n": 98}), &ctx)
            .await
            .is_ok()
    );
    let err = registry
        .execute("big", json!({"n": 99}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::OutputTooLarge { limit: 100 });
    assert_eq!(err.code(), "output_too_large");
}

#[tokio::test]
async fn a_tool_error_passes_through_unchanged() {
    let failing = Arc::new(FnTool::new(
        "fails",
        "",
        empty_object_schema(),
        |_, _| async { Err(ToolError::Failed("division by zero".into())) },
    ));
    let registry = registry_with(vec![failing]);
    assert_eq!(
        registry
            .execute("fails", json!({}), &ToolContext::default())
            .await,
        Err(ToolError::Failed("division by zero".into()))
    );
}

#[tokio::test]
async fn execute_observed_reports_whether_the_tool_ran() {
    let registry = registry_with(vec![add_tool()]);
    let ctx = ToolContext::default();
    let ran = registry
        .execute_observed("add", json!({"a": 1, "b": 2}), &ctx)
        .await;
    assert!(ran.ran_for.is_some());
    let rejected = registry
        .execute_observed("add", json!({"a": 1}), &ctx)
        .await;
    assert!(rejected.ran_for.is_none());
    let unknown = registry.execute_observed("nope", json!({}), &ctx).await;
    assert!(unknown.ran_for.is_none());
}

#[test]
fn list_is_sorted_with_descriptions_parameters_and_capabilities() {
    let zeta = Arc::new(FnTool::new(
        "zeta",
        "Last.",
        empty_object_schema(),
        |_, _| async { Ok(Value::Null) },
    ));
    let registry = registry_with(vec![zeta, add_tool()]);
    let list = registry.list();
    let names: Vec<&str> = list.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", "zeta"]);
    assert_eq!(list[0].description, "Adds a and b.");
    assert_eq!(list[0].parameters, add_schema());
    assert_eq!(list[0].capabilities, ["math"]);
}

#[test]
fn unregister_removes_and_unknown_unregister_is_an_error() {
    let mut registry = registry_with(vec![add_tool()]);
    assert!(registry.get("add").is_some());
    let removed = registry.unregister("add").unwrap();
    assert_eq!(removed.name(), "add");
    assert!(registry.get("add").is_none());
    assert!(registry.is_empty());
    assert_eq!(
        registry.unregister("add").err().map(|e| e.code()),
        Some("unknown_tool")
    );
    // The name is free again.
    registry.register(add_tool()).unwrap();
}
