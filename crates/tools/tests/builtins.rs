//! The built-in tools seen from outside: every tool's `parameters()` is a valid JSON Schema that
//! accepts the documented examples and refuses unknown fields, the examples run, and the tools
//! are unique and complete.
// Test helpers outside `#[test]` functions may fail loudly too.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use serde_json::{Value, json};
use toolbridge_tools::builtins;
use toolbridge_tools::{Tool, ToolContext};

/// A tool name, its arguments, and a check of its output.
type Example = (&'static str, Value, fn(&Value) -> bool);

/// One example call per operation, with a check of its output.
fn examples() -> Vec<Example> {
    vec![
        (
            "calculator",
            json!({"expression": "2^10 + sqrt(16)"}),
            |v| v["result"] == 1028,
        ),
        (
            "calculator",
            json!({"operation": "evaluate", "expression": "ncr(52, 5)"}),
            |v| v["result"] == 2_598_960,
        ),
        (
            "calculator",
            json!({"expression": "mean(1, 2, 3, 4)"}),
            |v| v["result"] == 2.5,
        ),
        (
            "hash",
            json!({"operation": "sha256", "input": "abc"}),
            |v| v["result"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        ("hash", json!({"operation": "md5", "input": "abc"}), |v| {
            v["result"] == "900150983cd24fb0d6963f7d28e17f72"
        }),
        ("hash", json!({"operation": "sha1", "input": "abc"}), |v| {
            v["bytes"] == 20
        }),
        (
            "hash",
            json!({"operation": "sha512", "input": "abc"}),
            |v| v["bytes"] == 64,
        ),
        (
            "hash",
            json!({"operation": "blake3", "input": "abc", "output_encoding": "base64"}),
            |v| v["encoding"] == "base64",
        ),
        (
            "hash",
            json!({"operation": "hmac_sha256", "input": "msg", "key": "secret"}),
            |v| v["bytes"] == 32,
        ),
        (
            "hash",
            json!({"operation": "base64_encode", "input": "hi", "alphabet": "url_safe", "padding": false}),
            |v| v["result"] == "aGk",
        ),
        (
            "hash",
            json!({"operation": "base64_decode", "input": "aGk="}),
            |v| v["result"] == "hi",
        ),
        (
            "hash",
            json!({"operation": "hex_encode", "input": "hi"}),
            |v| v["result"] == "6869",
        ),
        (
            "hash",
            json!({"operation": "hex_decode", "input": "6869", "output_encoding": "utf8"}),
            |v| v["result"] == "hi",
        ),
        (
            "strings",
            json!({"operation": "length", "text": "👍🏽!"}),
            |v| v["result"]["graphemes"] == 2,
        ),
        (
            "strings",
            json!({"operation": "reverse", "text": "abc"}),
            |v| v["result"] == "cba",
        ),
        (
            "strings",
            json!({"operation": "substring", "text": "hello", "start": 1, "end": -1}),
            |v| v["result"] == "ell",
        ),
        (
            "strings",
            json!({"operation": "split", "text": "a,b", "separator": ",", "limit": 5}),
            |v| v["result"] == json!(["a", "b"]),
        ),
        (
            "strings",
            json!({"operation": "join", "parts": ["a", "b"], "separator": "+"}),
            |v| v["result"] == "a+b",
        ),
        (
            "strings",
            json!({"operation": "replace", "text": "a-b-c", "pattern": "-", "replacement": "_", "count": 1}),
            |v| v["result"] == "a_b-c",
        ),
        (
            "strings",
            json!({"operation": "trim", "text": "--x--", "side": "both", "characters": "-"}),
            |v| v["result"] == "x",
        ),
        ("strings", json!({"operation": "upper", "text": "a"}), |v| {
            v["result"] == "A"
        }),
        ("strings", json!({"operation": "lower", "text": "A"}), |v| {
            v["result"] == "a"
        }),
        (
            "strings",
            json!({"operation": "title", "text": "a b"}),
            |v| v["result"] == "A B",
        ),
        (
            "strings",
            json!({"operation": "snake", "text": "HelloWorld"}),
            |v| v["result"] == "hello_world",
        ),
        (
            "strings",
            json!({"operation": "camel", "text": "hello_world"}),
            |v| v["result"] == "helloWorld",
        ),
        (
            "strings",
            json!({"operation": "kebab", "text": "Hello World"}),
            |v| v["result"] == "hello-world",
        ),
        ("ids", json!({"operation": "uuid_v4"}), |v| {
            v["ids"][0].as_str().is_some_and(|s| s.len() == 36)
        }),
        ("ids", json!({"operation": "uuid_v7", "count": 3}), |v| {
            v["ids"].as_array().is_some_and(|a| a.len() == 3)
        }),
        ("ids", json!({"operation": "ulid"}), |v| {
            v["ids"][0].as_str().is_some_and(|s| s.len() == 26)
        }),
        (
            "ids",
            json!({"operation": "nanoid", "size": 10, "alphabet": "0123456789abcdef"}),
            |v| v["ids"][0].as_str().is_some_and(|s| s.len() == 10),
        ),
        (
            "regex",
            json!({"operation": "match", "pattern": "\\d+", "text": "a1", "case_insensitive": true}),
            |v| v["matched"] == true,
        ),
        (
            "regex",
            json!({"operation": "find_all", "pattern": "\\d", "text": "1a2", "limit": 10}),
            |v| v["count"] == 2,
        ),
        (
            "regex",
            json!({"operation": "captures", "pattern": "(?P<n>\\d)", "text": "x7"}),
            |v| v["matches"][0]["named"]["n"]["text"] == "7",
        ),
        (
            "regex",
            json!({"operation": "replace", "pattern": "(\\w+)@", "text": "me@x", "replacement": "$1 at "}),
            |v| v["result"] == "me at x",
        ),
        (
            "regex",
            json!({"operation": "split", "pattern": "\\s+", "text": "a  b", "multi_line": false}),
            |v| v["parts"] == json!(["a", "b"]),
        ),
        ("json", json!({"operation": "parse", "text": "[1]"}), |v| {
            v["value"] == json!([1])
        }),
        (
            "json",
            json!({"operation": "validate", "document": {"a": 1}, "schema": {"type": "object"}, "validate_formats": true}),
            |v| v["valid"] == true,
        ),
        (
            "json",
            json!({"operation": "prettify", "document": [1], "indent": 0}),
            |v| v["result"] == "[\n1\n]",
        ),
        (
            "json",
            json!({"operation": "minify", "text": "[ 1 ]"}),
            |v| v["result"] == "[1]",
        ),
        (
            "json",
            json!({"operation": "jq", "filter": ".a", "document": {"a": 2}}),
            |v| v["results"] == json!([2]),
        ),
        (
            "json",
            json!({"operation": "pointer", "pointer": "/a", "document": {"a": 2}}),
            |v| v["value"] == 2,
        ),
    ]
}

fn tool(name: &str) -> std::sync::Arc<dyn Tool> {
    builtins::all()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no built-in named {name}"))
}

#[test]
fn every_schema_compiles_and_is_closed() {
    for tool in builtins::all() {
        let schema = tool.parameters();
        let validator = jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("{}: invalid schema: {e}", tool.name()));
        assert!(
            jsonschema::meta::is_valid(&schema),
            "{}: not valid against its meta-schema",
            tool.name()
        );
        assert_eq!(schema["type"], "object", "{}", tool.name());
        assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
        // Every property has a description, for the model.
        for (name, property) in schema["properties"].as_object().unwrap() {
            assert!(
                property["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty()),
                "{}: `{name}` has no description",
                tool.name()
            );
        }
        assert!(
            !validator.is_valid(&json!({"operation": "x", "surprise": 1})),
            "{}",
            tool.name()
        );
        assert!(!tool.description().is_empty());
        assert!(!tool.capabilities().is_empty());
    }
}

#[test]
fn every_operation_has_an_example() {
    let examples = examples();
    for tool in builtins::all() {
        let schema = tool.parameters();
        let ops: Vec<&str> = match schema["properties"]["operation"]["enum"].as_array() {
            Some(ops) => ops.iter().filter_map(Value::as_str).collect(),
            None => Vec::new(),
        };
        for op in ops {
            let covered = examples.iter().any(|(name, args, _)| {
                *name == tool.name()
                    && args
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("evaluate")
                        == op
            });
            assert!(covered, "{}: no example for `{op}`", tool.name());
        }
    }
}

#[tokio::test]
async fn examples_pass_the_schema_and_run() {
    let ctx = ToolContext::default();
    for (name, args, check) in examples() {
        let tool = tool(name);
        let validator = jsonschema::validator_for(&tool.parameters()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&args)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{name} {args}: {errors:?}");
        let out = tool
            .execute(args.clone(), &ctx)
            .await
            .unwrap_or_else(|e| panic!("{name} {args}: {e}"));
        assert!(check(&out), "{name} {args}: unexpected output {out}");
    }
}

#[test]
fn schemas_refuse_out_of_range_arguments() {
    let refused = [
        ("calculator", json!({"expression": ""})),
        ("calculator", json!({"expression": "1".repeat(1001)})),
        ("hash", json!({"operation": "crc32", "input": "a"})),
        ("hash", json!({"operation": "md5"})),
        (
            "strings",
            json!({"operation": "split", "text": "a", "limit": 0}),
        ),
        ("ids", json!({"operation": "uuid_v4", "count": 101})),
        ("ids", json!({"operation": "nanoid", "size": 0})),
        (
            "regex",
            json!({"operation": "match", "pattern": "", "text": "a"}),
        ),
        (
            "regex",
            json!({"operation": "find_all", "pattern": "a", "text": "a", "limit": 10_001}),
        ),
        (
            "json",
            json!({"operation": "prettify", "document": 1, "indent": 9}),
        ),
        (
            "json",
            json!({"operation": "validate", "document": 1, "schema": 3}),
        ),
    ];
    for (name, args) in refused {
        let validator = jsonschema::validator_for(&tool(name).parameters()).unwrap();
        assert!(!validator.is_valid(&args), "{name} accepted {args}");
    }
}

#[test]
fn names_are_unique_and_all_six_are_there() {
    let names: Vec<String> = builtins::all()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    let unique: HashSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
    for expected in ["calculator", "hash", "strings", "ids", "regex", "json"] {
        assert!(names.iter().any(|n| n == expected), "missing {expected}");
    }
}
