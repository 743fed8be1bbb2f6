//! Tests of the json tool: every operation, every cap, and a table of hostile jq filters that
//! must end with an error instead of hanging or taking the process down.

use std::time::Duration;

use serde_json::json;

use super::*;

async fn run(args: Value) -> Result<Value, ToolError> {
    Json.execute(args, &ToolContext::default()).await
}

async fn ok(args: Value) -> Value {
    match run(args.clone()).await {
        Ok(v) => v,
        Err(e) => panic!("{args}: {e:?}"),
    }
}

async fn path_of(args: Value) -> String {
    match run(args.clone()).await {
        Err(ToolError::InvalidArguments { path, .. }) => path,
        other => panic!("{args}: {other:?}"),
    }
}

async fn jq(filter: &str, document: Value) -> Result<Value, ToolError> {
    run(json!({"operation": "jq", "filter": filter, "document": document})).await
}

#[tokio::test]
async fn parse_returns_the_value_and_its_type() {
    let out = ok(json!({"operation": "parse", "text": r#"{"a": [1, 2.5, "x"]}"#})).await;
    assert_eq!(out["type"], "object");
    assert_eq!(out["value"], json!({"a": [1, 2.5, "x"]}));
    let err = run(json!({"operation": "parse", "text": "{\"a\": }"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("line 1, column 7")),
        "{err:?}"
    );
    assert_eq!(
        path_of(json!({"operation": "parse", "document": {}})).await,
        "/document"
    );
    assert_eq!(path_of(json!({"operation": "parse"})).await, "/text");
}

#[tokio::test]
async fn validate_reports_errors_with_paths() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z]+$"},
            "age": {"type": "integer", "minimum": 0},
            "email": {"type": "string", "format": "email"},
        },
        "required": ["name"],
        "additionalProperties": false,
    });
    let out = ok(
        json!({"operation": "validate", "schema": schema, "document": {"name": "ada", "age": 36}}),
    )
    .await;
    assert_eq!(out["valid"], true);
    assert_eq!(out["errors"], json!([]));
    let out = ok(json!({"operation": "validate", "schema": schema, "document": {"name": "Ada", "age": -1, "x": 1}})).await;
    assert_eq!(out["valid"], false);
    let paths: Vec<&str> = out["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["instance_path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"/name"), "{paths:?}");
    assert!(paths.contains(&"/age"), "{paths:?}");
    // Formats are annotations unless asked for.
    let doc = json!({"name": "ada", "email": "not-an-email"});
    assert_eq!(
        ok(json!({"operation": "validate", "schema": schema, "document": doc})).await["valid"],
        true
    );
    assert_eq!(
        ok(json!({"operation": "validate", "schema": schema, "document": doc, "validate_formats": true})).await["valid"],
        false
    );
    // `text` works as the instance too; boolean schemas are schemas.
    assert_eq!(
        ok(json!({"operation": "validate", "schema": false, "text": "1"})).await["valid"],
        false
    );
    assert_eq!(
        path_of(json!({"operation": "validate", "schema": {"type": "nope"}, "document": 1})).await,
        "/schema"
    );
    assert_eq!(
        path_of(json!({"operation": "validate", "document": 1})).await,
        "/schema"
    );
}

#[tokio::test]
async fn validate_does_not_fetch_remote_refs() {
    let schema = json!({"$ref": "http://127.0.0.1:9/schema.json"});
    assert_eq!(
        path_of(json!({"operation": "validate", "schema": schema, "document": 1})).await,
        "/schema"
    );
    let schema = json!({"$ref": "file:///etc/passwd"});
    assert_eq!(
        path_of(json!({"operation": "validate", "schema": schema, "document": 1})).await,
        "/schema"
    );
    // Local references work.
    let schema = json!({"$defs": {"n": {"type": "number"}}, "$ref": "#/$defs/n"});
    assert_eq!(
        ok(json!({"operation": "validate", "schema": schema, "document": 1})).await["valid"],
        true
    );
}

#[tokio::test]
async fn validate_caps_the_error_list() {
    let schema = json!({"type": "array", "items": {"type": "string"}});
    let doc: Vec<i32> = (0..200).collect();
    let out = ok(json!({"operation": "validate", "schema": schema, "document": doc})).await;
    assert_eq!(
        out["errors"].as_array().unwrap().len(),
        MAX_VALIDATION_ERRORS
    );
    assert_eq!(out["truncated"], true);
    let big_schema = json!({"enum": ["x".repeat(MAX_SCHEMA_BYTES)]});
    let err = run(json!({"operation": "validate", "schema": big_schema, "document": 1}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
}

#[tokio::test]
async fn prettify_and_minify() {
    let out = ok(json!({"operation": "prettify", "text": r#"{"a":[1,{"b":null}]}"#})).await;
    assert_eq!(
        out["result"],
        "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ]\n}"
    );
    let out = ok(json!({"operation": "prettify", "document": {"a": 1}, "indent": 4})).await;
    assert_eq!(out["result"], "{\n    \"a\": 1\n}");
    let out =
        ok(json!({"operation": "minify", "text": "{ \"b\" : 1,\n \"a\" : [ 1 , 2 ] }"})).await;
    // Key order is preserved.
    assert_eq!(out["result"], r#"{"b":1,"a":[1,2]}"#);
    assert_eq!(
        path_of(json!({"operation": "prettify", "document": 1, "indent": 9})).await,
        "/indent"
    );
    assert_eq!(
        path_of(json!({"operation": "minify", "document": 1, "text": "1"})).await,
        "/document"
    );
    assert_eq!(path_of(json!({"operation": "minify"})).await, "/document");
}

#[tokio::test]
async fn pointer_finds_values() {
    let doc = json!({"items": [{"name": "a/b", "tags": ["x"]}], "a/b": {"~": 1}});
    let out =
        ok(json!({"operation": "pointer", "pointer": "/items/0/tags/0", "document": doc})).await;
    assert_eq!(out["found"], true);
    assert_eq!(out["value"], "x");
    let out = ok(json!({"operation": "pointer", "pointer": "/a~1b/~0", "document": doc})).await;
    assert_eq!(out["value"], 1);
    let out = ok(json!({"operation": "pointer", "pointer": "", "document": doc})).await;
    assert_eq!(out["value"], doc);
    let out = ok(json!({"operation": "pointer", "pointer": "/items/5", "document": doc})).await;
    assert_eq!(out["found"], false);
    assert_eq!(out["value"], Value::Null);
    assert_eq!(
        path_of(json!({"operation": "pointer", "pointer": "items", "document": doc})).await,
        "/pointer"
    );
}

#[tokio::test]
async fn jq_queries() {
    let doc = json!({"items": [{"name": "a", "price": 5}, {"name": "b", "price": 15}, {"name": "c", "price": 25}]});
    let out = jq(".items[] | select(.price > 10) | .name", doc.clone())
        .await
        .unwrap();
    assert_eq!(out["results"], json!(["b", "c"]));
    assert_eq!(out["count"], 2);
    let out = jq("[.items[].price] | add / length", doc.clone())
        .await
        .unwrap();
    assert_eq!(out["results"], json!([15.0]));
    let out = jq(".items | map({(.name): .price}) | add", doc.clone())
        .await
        .unwrap();
    assert_eq!(out["results"], json!([{"a": 5, "b": 15, "c": 25}]));
    let out = jq(
        "[range(3)], [limit(2; repeat(1))], [.items[] | .name | ascii_upcase]",
        doc.clone(),
    )
    .await
    .unwrap();
    assert_eq!(out["results"], json!([[0, 1, 2], [1, 1], ["A", "B", "C"]]));
    let out = jq("([paths] | length), ([..] | length), (\"[1,2]\" | fromjson), (0 | [while(. < 3; . + 1)]), (0 | until(. > 3; . + 2))", doc.clone()).await.unwrap();
    assert_eq!(out["results"], json!([10, 11, [1, 2], [0, 1, 2], 4]));
    let out = jq("empty", doc.clone()).await.unwrap();
    assert_eq!(out["results"], json!([]));
    // `text` works as the input too; NaN becomes null as in jq.
    let out = run(json!({"operation": "jq", "filter": ".a, nan", "text": "{\"a\": 1}"}))
        .await
        .unwrap();
    assert_eq!(out["results"], json!([1, null]));
    // Errors raised by the filter are tool failures with jq's message.
    let err = jq("error(\"boom\")", json!(null)).await.unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("boom")),
        "{err:?}"
    );
    let err = jq(".a.b", json!({"a": 1})).await.unwrap_err();
    assert_eq!(err.code(), "tool_failed");
}

#[tokio::test]
async fn jq_syntax_and_refused_builtins() {
    for filter in [
        ".[",
        "if . then 1",
        "map(",
        ".a |",
        "include \"x\"; .",
        "import \"x\" as y; .",
    ] {
        let err = jq(filter, json!(null)).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidArguments { path, .. } if path == "/filter"),
            "{filter}: {err:?}"
        );
    }
    for filter in [
        "env",
        "$ENV",
        "$ENV.HOME",
        "env.PATH",
        "halt",
        "halt_error",
        "halt_error(1)",
        "input",
        "[inputs]",
        "debug",
        "stderr",
        "def f: 1 + f; f",
        "def f: .; f",
        "\"\\(def f: f; f)\"",
        "[.[] as $x | def g: g; g]",
        "_toolbridge_step",
        "input_filename",
        "nosuchfunction(1)",
    ] {
        let err = jq(filter, json!([1])).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidArguments { path, .. } if path == "/filter"),
            "{filter}: {err:?}"
        );
    }
}

#[tokio::test]
async fn hostile_jq_filters_end_with_an_error() {
    let ctx = ToolContext::with_timeout(Duration::from_secs(20), 1024 * 1024);
    for filter in [
        "[range(1e9)] | length",
        "last(range(1e18))",
        "[repeat(1)] | length",
        "0 | last(recurse(. + 1))",
        "[0 | recurse(. + 1)] | length",
        "{} | until(false; .)",
        "[0 | while(true; .)] | length",
        "[limit(1e9; repeat(1))] | length",
        "reduce range(1e9) as $x (0; . + 1)",
        "[range(0; 10; 0)] | length",
        "reduce range(1e6) as $i (0; [.]) | length",
        "\"[\" * 100000 | fromjson",
        "[range(1e9)] | .[0]",
        "try ([repeat(1)] | length) catch ([repeat(2)] | length)",
        "[.. ] | length",
    ] {
        let result = Json
            .execute(
                json!({"operation": "jq", "filter": filter, "document": [1, [2, [3]]]}),
                &ctx,
            )
            .await;
        match result {
            Err(
                ToolError::Failed(_)
                | ToolError::LimitExceeded(_)
                | ToolError::OutputTooLarge { .. },
            ) => {}
            Ok(v) if filter == "[.. ] | length" => assert_eq!(v["results"], json!([6])),
            other => panic!("{filter}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn jq_limits() {
    let filter = format!(". {}", "| .".repeat(jq::MAX_FILTER_BYTES / 3 + 1));
    let err = jq(&filter, json!(1)).await.unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    let err = jq(&format!("range({})", jq::MAX_RESULTS + 1), json!(null))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    let out = jq(&format!("range({})", jq::MAX_RESULTS), json!(null))
        .await
        .unwrap();
    assert_eq!(out["count"], jq::MAX_RESULTS);
    // Values nested up to the step budget deep are built, measured and dropped without
    // exhausting the query thread's stack.
    let out = jq("reduce range(99999) as $i (0; [.]) | length", json!(null))
        .await
        .unwrap();
    assert_eq!(out["results"], json!([1]));
    // A query still running at the deadline is stopped (by the caller's timeout or by the step
    // check, whichever comes first).
    let ctx = ToolContext::with_timeout(Duration::from_millis(20), 1000);
    let result = Json
        .execute(json!({"operation": "jq", "filter": "[range(1e9) | tostring | length] | add", "document": null}), &ctx)
        .await;
    assert!(
        matches!(&result, Err(ToolError::Timeout))
            || matches!(&result, Err(ToolError::Failed(m)) if m.contains("time") || m.contains("steps")),
        "{result:?}"
    );
    // Results deeper than the result depth cap are refused.
    let err = jq("reduce range(200) as $i (0; [.])", json!(null))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    // The output limit applies while results are collected.
    let ctx = ToolContext::with_timeout(Duration::from_secs(10), 1000);
    let err = Json
        .execute(
            json!({"operation": "jq", "filter": "range(500) | tostring", "document": null}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::OutputTooLarge { limit: 1000 });
    // A deadline in the past is a timeout, before any work.
    let ctx = ToolContext::with_timeout(Duration::ZERO, 1000);
    let err = Json
        .execute(
            json!({"operation": "jq", "filter": ".", "document": null}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jq_filters_run_concurrently_within_the_slot_limit() {
    let tasks: Vec<_> = (0..(jq::MAX_CONCURRENT * 3))
        .map(|i| {
            tokio::spawn(async move {
                let ctx = ToolContext::default();
                let args = json!({"operation": "jq", "filter": ".n + 1", "document": {"n": i}});
                Json.execute(args, &ctx).await
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap().unwrap()["results"], json!([i + 1]));
    }
}

#[tokio::test]
async fn document_limits() {
    let text = format!("\"{}\"", "x".repeat(MAX_DOCUMENT_BYTES));
    let err = run(json!({"operation": "parse", "text": text}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    let err = run(json!({"operation": "minify", "document": "x".repeat(MAX_DOCUMENT_BYTES)}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    let deep_text = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let err = run(json!({"operation": "parse", "text": deep_text}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    let mut deep = json!(1);
    for _ in 0..(MAX_DEPTH + 1) {
        deep = json!([deep]);
    }
    let err = run(json!({"operation": "minify", "document": deep}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    // The caller's output limit applies to every operation.
    let ctx = ToolContext::with_timeout(Duration::from_secs(5), 16);
    let err = Json
        .execute(
            json!({"operation": "minify", "document": {"long": "x".repeat(100)}}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::OutputTooLarge { limit: 16 });
}

#[tokio::test]
async fn unknown_operation() {
    assert_eq!(
        path_of(json!({"operation": "yaml", "text": "1"})).await,
        "/operation"
    );
}
