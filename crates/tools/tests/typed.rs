//! The typed tool source: sealing, per-stage selections, and every kind of resolve error with
//! its JSON path — and no input that makes it panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::borrow::Cow;

use proptest::prelude::*;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde_json::{Value, json};
use toolbridge_tools::ToolError;
use toolbridge_tools::typed::{
    ModelSelection, ModelToolRegistry, ModelToolSource, SealedToolRegistry,
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Search {
    query: String,
    #[schemars(range(min = 1, max = 10))]
    limit: Option<u32>,
    #[serde(default)]
    filters: Vec<Filter>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Filter {
    field: String,
    value: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Empty {}

/// A value whose schema accepts anything but whose parser accepts only "ok", so that a parse
/// error the schema cannot catch still carries its path.
#[derive(Debug, Deserialize)]
#[serde(try_from = "Value")]
struct OnlyOk;

impl TryFrom<Value> for OnlyOk {
    type Error = String;
    fn try_from(value: Value) -> Result<Self, String> {
        if value == json!("ok") {
            Ok(Self)
        } else {
            Err(format!("expected \"ok\", got {value}"))
        }
    }
}

impl JsonSchema for OnlyOk {
    fn schema_name() -> Cow<'static, str> {
        "OnlyOk".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({})
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Batch {
    items: Vec<BatchItem>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct BatchItem {
    // Only its parsing matters.
    #[allow(dead_code)]
    #[serde(rename = "a/b")]
    check: OnlyOk,
}

#[derive(Debug, PartialEq)]
enum Action {
    Search {
        query: String,
        limit: u32,
        filters: usize,
    },
    Status,
    Batch(usize),
}

fn registry() -> SealedToolRegistry<Action> {
    ModelToolRegistry::new()
        .tool("search", "Searches.", |s: Search| Action::Search {
            query: s.query,
            limit: s.limit.unwrap_or(5),
            filters: s
                .filters
                .iter()
                .filter(|f| !f.field.is_empty() && !f.value.is_empty())
                .count(),
        })
        .tool("status", "Reports status.", |_: Empty| Action::Status)
        .tool("batch", "Checks a batch.", |b: Batch| {
            Action::Batch(b.items.len())
        })
        .seal()
        .unwrap()
}

fn invalid_path(err: ToolError) -> String {
    match err {
        ToolError::InvalidArguments { path, .. } => path,
        other => panic!("expected invalid_arguments, got {other:?}"),
    }
}

#[test]
fn a_valid_selection_resolves_to_the_typed_value() {
    let stage = registry().select(["search"]).unwrap();
    let selection = ModelSelection::new(
        "search",
        json!({"query": "rust", "limit": 3, "filters": [{"field": "lang", "value": "en"}]}),
    );
    assert_eq!(
        stage.resolve(&selection, "answer").unwrap(),
        Action::Search {
            query: "rust".into(),
            limit: 3,
            filters: 1
        }
    );
}

#[test]
fn the_schema_is_derived_from_the_input_type() {
    let registry = registry();
    let schema = registry.get("search").unwrap().parameters();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["query"]));
    assert_eq!(schema["additionalProperties"], json!(false));
    assert!(schema["properties"]["limit"].is_object());
}

#[test]
fn an_unregistered_id_is_unknown_tool_with_suggestions() {
    let stage = registry().select(["search"]).unwrap();
    let err = stage
        .resolve(
            &ModelSelection::new("serach", json!({"query": "x"})),
            "answer",
        )
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "serach".into(),
            suggestions: vec!["search".into()]
        }
    );
    // The whole registry answers the same way.
    let err = registry()
        .resolve(&ModelSelection::new("delete_all", json!({})), "answer")
        .unwrap_err();
    assert_eq!(err.code(), "unknown_tool");
}

#[test]
fn a_registered_tool_outside_the_stage_is_not_in_stage() {
    let stage = registry().select(["search"]).unwrap();
    let err = stage
        .resolve(&ModelSelection::new("status", json!({})), "answer")
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::NotInStage {
            tool: "status".into(),
            stage: "answer".into()
        }
    );
    assert_eq!(err.code(), "not_in_stage");
    // The full registry offers it.
    assert_eq!(
        registry()
            .resolve(&ModelSelection::new("status", json!({})), "answer")
            .unwrap(),
        Action::Status
    );
}

#[test]
fn invalid_input_names_the_failing_json_path() {
    let stage = registry().select(["search", "batch"]).unwrap();
    let cases = [
        ("search", json!({"query": 7}), "/query"),
        ("search", json!({"query": "x", "limit": 0}), "/limit"),
        ("search", json!({"query": "x", "limit": "3"}), "/limit"),
        ("search", json!({"limit": 3}), "/"),
        ("search", json!({"query": "x", "surprise": 1}), "/"),
        (
            "search",
            json!({"query": "x", "filters": [{"field": "a", "value": "b"}, {"field": 1, "value": "b"}]}),
            "/filters/1/field",
        ),
        ("search", json!(["query"]), "/"),
        ("search", Value::Null, "/"),
        // Schema-valid, rejected by the parser: the path comes from the deserializer, escaped.
        (
            "batch",
            json!({"items": [{"a/b": "ok"}, {"a/b": 5}]}),
            "/items/1/a~1b",
        ),
    ];
    for (tool, input, path) in cases {
        let err = stage
            .resolve(&ModelSelection::new(tool, input.clone()), "answer")
            .unwrap_err();
        assert_eq!(err.code(), "invalid_arguments", "{input}");
        assert_eq!(invalid_path(err), path, "{input}");
    }
}

#[test]
fn selecting_an_unknown_id_fails_with_suggestions() {
    let err = registry().select(["search", "stats"]).unwrap_err();
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "stats".into(),
            suggestions: vec!["status".into()]
        }
    );
}

#[test]
fn a_selection_lists_only_its_tools() {
    let registry = registry();
    let all: Vec<&str> = registry.tools().iter().map(|t| t.id()).collect();
    assert_eq!(all, ["batch", "search", "status"]);
    let stage = registry.select(["status", "search"]).unwrap();
    let ids: Vec<&str> = stage.tools().iter().map(|t| t.id()).collect();
    assert_eq!(ids, ["search", "status"]);
    assert!(stage.contains("status") && !stage.contains("batch"));
    assert_eq!(stage.tools()[0].description(), "Searches.");
}

#[test]
fn sealing_rejects_duplicate_and_invalid_ids_and_non_object_inputs() {
    let dup = ModelToolRegistry::new()
        .tool("a", "", |_: Empty| ())
        .tool("a", "", |_: Empty| ())
        .seal()
        .unwrap_err();
    assert_eq!(dup, ToolError::Duplicate("a".into()));

    let bad = ModelToolRegistry::new()
        .tool("not ok", "", |_: Empty| ())
        .seal()
        .unwrap_err();
    assert_eq!(bad.code(), "invalid_tool_name");

    // A bare integer is not an arguments object.
    let scalar = ModelToolRegistry::new()
        .tool("n", "", |_: u32| ())
        .seal()
        .unwrap_err();
    assert_eq!(scalar.code(), "invalid_schema");
}

proptest! {
    /// Whatever the model sends, resolve answers Ok or a typed error.
    #[test]
    fn resolve_never_panics(input in arbitrary_json(), tool in "(search|status|batch|nope)") {
        let registry = registry();
        let stage = registry.select(["search"]).unwrap();
        let selection = ModelSelection::new(tool, input);
        let _ = stage.resolve(&selection, "answer");
        let _ = registry.resolve(&selection, "answer");
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z/~]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                "(query|limit|filters|field|value|items|a/b|x)",
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
