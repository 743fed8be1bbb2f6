//! The `json` tool's isolated jq mode, with the `toolbridge-jq-worker` binary as the worker:
//! ordinary queries answer as in process, hostile filters end with a limit or timeout error while
//! this process lives on, and a deadline or a cancellation kills the worker.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolbridge_tools::builtins::{BuiltinsConfig, IsolatedJson, JqIsolation, Json, configured};
use toolbridge_tools::{Tool, ToolContext, ToolError};

const WORKER: &str = env!("CARGO_BIN_EXE_toolbridge-jq-worker");

fn isolation(max_concurrent: usize) -> JqIsolation {
    JqIsolation {
        max_concurrent,
        ..JqIsolation::new(WORKER)
    }
}

fn jq_args(filter: &str, document: Value) -> Value {
    json!({"operation": "jq", "filter": filter, "document": document})
}

async fn run(tool: &dyn Tool, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
    tool.execute(args, ctx).await
}

/// A filter that burns CPU without a generator step: a billion iterations of `.[]`.
fn cpu_burner() -> Value {
    jq_args(
        "reduce (.[] as $a | .[] as $b | .[] as $c | 1) as $x (0; . + 1)",
        Value::Array((0..1000).map(Value::from).collect()),
    )
}

#[tokio::test]
async fn ordinary_queries_answer_as_in_process() {
    let isolated = IsolatedJson::new(isolation(4));
    let doc = json!({
        "items": [
            {"name": "a", "price": 5, "tags": ["x"]},
            {"name": "b", "price": 15, "tags": []},
            {"name": "c", "price": 25, "tags": ["y", "z"]},
        ],
        "meta": {"count": 3, "deep": [[[[1]]]]},
    });
    let deep = (0..127).fold(json!(1), |inner, _| json!([inner]));
    let table: Vec<(&str, Value)> = vec![
        (".", doc.clone()),
        (".items[] | select(.price > 10) | .name", doc.clone()),
        ("[.items[].price] | add / length", doc.clone()),
        ("[paths] | length", doc.clone()),
        (".meta | to_entries", doc.clone()),
        ("[range(0; 10; 3)]", Value::Null),
        ("[limit(3; repeat(1))]", Value::Null),
        (r#""\(.a)-\(.b)""#, json!({"a": 1, "b": "two"})),
        ("tojson | fromjson", doc.clone()),
        (
            "[.[] | tostring] | join(\",\")",
            json!([1, "a", null, true]),
        ),
        ("1, 2, 3 | . * 2", Value::Null),
        (
            ". as $d | [range(0; 3)] | map($d[.])",
            json!(["a", "b", "c"]),
        ),
        (".", deep),
        // Errors answer the same too.
        ("error(\"boom\")", Value::Null),
        ("def f: 1; f", Value::Null),
        ("$ENV", Value::Null),
        ("env", Value::Null),
        ("input", Value::Null),
        ("[range(0; 200000)]", Value::Null),
        ("range(0; 2000)", Value::Null),
        ("[repeat(1)]", Value::Null),
        (".a.b", json!(3)),
        ("nosuchfunction", Value::Null),
        ("[", Value::Null),
        ("\"[\" * 100000 | fromjson", Value::Null),
    ];
    for (filter, document) in table {
        let ctx = ToolContext::default();
        let expected = run(&Json, jq_args(filter, document.clone()), &ctx).await;
        let got = run(&isolated, jq_args(filter, document), &ctx).await;
        assert_eq!(got, expected, "filter `{filter}`");
    }

    // The output limit applies the same way.
    let ctx = ToolContext::with_timeout(Duration::from_secs(10), 200);
    let big = jq_args("[range(0; 100)]", Value::Null);
    let expected = run(&Json, big.clone(), &ctx).await;
    assert_eq!(run(&isolated, big, &ctx).await, expected);
    assert!(matches!(expected, Err(ToolError::OutputTooLarge { .. })));

    // Other operations do not need a worker.
    let args = json!({"operation": "minify", "document": {"a": [1, 2]}});
    assert_eq!(
        run(&isolated, args, &ToolContext::default()).await.unwrap(),
        json!({"operation": "minify", "result": "{\"a\":[1,2]}"})
    );
}

#[tokio::test]
async fn hostile_filters_hit_the_memory_limit_and_this_process_survives() {
    let isolated = IsolatedJson::new(isolation(4));
    let hostile = [
        jq_args("reduce range(0; 40) as $i (\"x\"; . + .)", Value::Null),
        jq_args("\"x\" * 10000000000", Value::Null),
        jq_args(
            &format!("{}length", ". + . | ".repeat(30)),
            json!("x".repeat(1000)),
        ),
    ];
    for args in hostile {
        let ctx = ToolContext::with_timeout(Duration::from_secs(20), 1024 * 1024);
        let err = run(&isolated, args.clone(), &ctx).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::LimitExceeded(m) if m.contains("memory")),
            "{args}: {err:?}"
        );
    }
    // Still here, and the tool still works.
    let ok = run(
        &isolated,
        jq_args(".a", json!({"a": 1})),
        &ToolContext::default(),
    )
    .await;
    assert_eq!(ok.unwrap()["results"], json!([1]));
}

#[tokio::test]
async fn a_cpu_burner_is_killed_at_the_deadline() {
    // One slot: the next query can only run once the burner's worker is gone.
    let isolated = IsolatedJson::new(isolation(1));
    let ctx = ToolContext::with_timeout(Duration::from_millis(300), 1024 * 1024);
    let err = run(&isolated, cpu_burner(), &ctx).await.unwrap_err();
    assert_eq!(err, ToolError::Timeout);
    let ctx = ToolContext::with_timeout(Duration::from_secs(10), 1024 * 1024);
    let ok = run(&isolated, jq_args("[.[] * 2]", json!([1, 2])), &ctx).await;
    assert_eq!(ok.unwrap()["results"], json!([[2, 4]]));
}

#[tokio::test]
async fn cancellation_stops_a_query() {
    let isolated = IsolatedJson::new(isolation(1));
    let (tx, rx) = tokio::sync::watch::channel(false);
    let ctx = ToolContext {
        cancelled: rx,
        ..ToolContext::with_timeout(Duration::from_secs(30), 1024 * 1024)
    };
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        tx.send(true).unwrap();
    };
    let (result, ()) = tokio::join!(run(&isolated, cpu_burner(), &ctx), cancel);
    assert_eq!(result.unwrap_err(), ToolError::Cancelled);
    let ok = run(
        &isolated,
        jq_args("length", json!([1, 2, 3])),
        &ToolContext::default(),
    )
    .await;
    assert_eq!(ok.unwrap()["results"], json!([3]));
}

#[tokio::test]
async fn queries_share_a_few_slots() {
    let isolated = Arc::new(IsolatedJson::new(isolation(2)));
    let calls: Vec<_> = (0..6)
        .map(|i| {
            let isolated = Arc::clone(&isolated);
            tokio::spawn(async move {
                let ctx = ToolContext::default();
                run(isolated.as_ref(), jq_args(". + 1", json!(i)), &ctx).await
            })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap()["results"], json!([i + 1]));
    }
}

#[tokio::test]
async fn configured_tools_use_the_isolated_json_tool() {
    let config = BuiltinsConfig {
        jq_isolation: Some(isolation(2)),
        ..BuiltinsConfig::default()
    };
    let tools = configured(&config).unwrap();
    let json_tools: Vec<_> = tools.iter().filter(|t| t.name() == "json").collect();
    assert_eq!(json_tools.len(), 1);
    let err = run(
        json_tools[0].as_ref(),
        jq_args("\"x\" * 10000000000", Value::Null),
        &ToolContext::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
}

#[tokio::test]
async fn a_missing_worker_program_fails_cleanly() {
    let isolated = IsolatedJson::new(JqIsolation::new("/nonexistent/toolbridge-jq-worker"));
    let err = run(&isolated, jq_args(".", json!(1)), &ToolContext::default())
        .await
        .unwrap_err();
    // Started directly (no shell in between), a missing program fails to start.
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("could not start the jq worker")),
        "{err:?}"
    );
}

/// Issue 15: the worker sets its own address-space limit (no `/bin/sh -c 'ulimit -v …'`, which
/// the distroless image cannot run). Read back from `/proc` while it waits for its request.
#[cfg(target_os = "linux")]
#[test]
fn the_worker_limits_its_own_address_space() {
    use std::process::{Command, Stdio};
    let limit: u64 = 300 * 1024 * 1024;
    let mut child = Command::new(WORKER)
        .env_clear()
        .env("TOOLBRIDGE_JQ_MEMORY_LIMIT_BYTES", limit.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let path = format!("/proc/{}/limits", child.id());
    let wanted = format!("{limit}");
    let mut seen = String::new();
    // Bounded wait: the limit is set first thing, before the worker blocks reading stdin.
    for _ in 0..200 {
        seen = std::fs::read_to_string(&path).unwrap_or_default();
        let line = seen.lines().find(|l| l.starts_with("Max address space"));
        if line.is_some_and(|l| l.split_whitespace().filter(|w| *w == wanted).count() == 2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let line = seen
        .lines()
        .find(|l| l.starts_with("Max address space"))
        .unwrap_or_default();
    assert_eq!(
        line.split_whitespace().filter(|w| *w == wanted).count(),
        2,
        "soft and hard limits: {line}"
    );
}

/// A worker that is not given a limit runs nothing: it exits 125 without reading or answering.
#[test]
fn a_worker_without_a_limit_refuses_to_run() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(WORKER)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let request = json!({"filter": ".", "input": 1, "max_output_bytes": 100, "timeout_ms": 1000});
    if let Some(mut stdin) = child.stdin.take() {
        // It may have exited already; its status says so.
        let _ = stdin.write_all(request.to_string().as_bytes());
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(125));
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
}
