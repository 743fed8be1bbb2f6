//! Properties of the repair module: what passes its check is never changed, nothing panics on
//! arbitrary model output, and every well-formed `apply_patch` input parses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::sync::LazyLock;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolbridge_core::repair::{
    CompiledSchema, Grammar, Outcome, repair_arguments, repair_custom_input, resolve_name,
};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/repair");

fn codex_tool(name: &str) -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/tools_codex.json")).unwrap();
    let tools: Vec<Value> = serde_json::from_str(&text).unwrap();
    tools.into_iter().find(|t| t["name"] == name).unwrap()
}

static EXEC: LazyLock<CompiledSchema> = LazyLock::new(|| {
    CompiledSchema::compile("exec_command", &codex_tool("exec_command")["parameters"]).unwrap()
});

static PATCH: LazyLock<Grammar> = LazyLock::new(|| {
    let tool = codex_tool("apply_patch");
    Grammar::compile(tool["format"]["definition"].as_str().unwrap()).unwrap()
});

/// Arguments that satisfy Codex's `exec_command` schema.
fn exec_arguments() -> impl Strategy<Value = Value> {
    (
        any::<String>(),
        proptest::option::of(any::<String>()),
        proptest::option::of(0u32..100_000),
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop_oneof![Just("use_default"), Just("require_escalated")]),
        proptest::option::of(proptest::collection::vec(any::<String>(), 0..4)),
        proptest::option::of(-1.0e6f64..1.0e6),
    )
        .prop_map(|(cmd, workdir, yield_ms, tty, sandbox, prefix, tokens)| {
            let mut map = Map::new();
            map.insert("cmd".into(), json!(cmd));
            let optional = [
                ("workdir", workdir.map(Value::from)),
                ("yield_time_ms", yield_ms.map(Value::from)),
                ("tty", tty.map(Value::from)),
                ("sandbox_permissions", sandbox.map(Value::from)),
                ("prefix_rule", prefix.map(Value::from)),
                ("max_output_tokens", tokens.map(Value::from)),
            ];
            for (key, value) in optional {
                if let Some(v) = value {
                    map.insert(key.into(), v);
                }
            }
            Value::Object(map)
        })
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1.0e9f64..1.0e9).prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Text that looks like what models emit: JSON punctuation, quotes, keywords, fences.
fn json_ish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("{"),
            Just("}"),
            Just("["),
            Just("]"),
            Just(","),
            Just(":"),
            Just("\""),
            Just("'"),
            Just("```"),
            Just("\n"),
            Just(" "),
            Just("cmd"),
            Just("True"),
            Just("None"),
            Just("5"),
            Just("\\"),
            Just("//"),
            Just("/*"),
            Just("\"5\""),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

/// A line of patch content: anything but a line end.
fn content() -> impl Strategy<Value = String> {
    "[^\n\r]{0,30}"
}

fn filename() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_./ -]{1,24}"
}

/// One hunk of a well-formed patch, per Codex's grammar.
fn hunk() -> impl Strategy<Value = String> {
    let add = (filename(), proptest::collection::vec(content(), 1..5)).prop_map(|(f, lines)| {
        let body: String = lines.iter().map(|l| format!("+{l}\n")).collect();
        format!("*** Add File: {f}\n{body}")
    });
    let delete = filename().prop_map(|f| format!("*** Delete File: {f}\n"));
    let change_line = prop_oneof![
        content().prop_map(|l| format!("+{l}\n")),
        content().prop_map(|l| format!("-{l}\n")),
        content().prop_map(|l| format!(" {l}\n")),
        Just("@@\n".to_owned()),
        "[^\n\r]{1,20}".prop_map(|l| format!("@@ {l}\n")),
    ];
    let update = (
        filename(),
        proptest::option::of(filename()),
        proptest::collection::vec(change_line, 0..8),
        any::<bool>(),
    )
        .prop_map(|(f, to, lines, eof)| {
            let mut out = format!("*** Update File: {f}\n");
            if let Some(to) = to {
                out.push_str(&format!("*** Move to: {to}\n"));
            }
            out.push_str(&lines.concat());
            if eof && !lines.is_empty() {
                out.push_str("*** End of File\n");
            }
            out
        });
    prop_oneof![add, delete, update]
}

fn patch() -> impl Strategy<Value = String> {
    (proptest::collection::vec(hunk(), 1..5), any::<bool>()).prop_map(|(hunks, newline)| {
        let end = if newline { "\n" } else { "" };
        format!("*** Begin Patch\n{}*** End Patch{end}", hunks.concat())
    })
}

proptest! {
    #[test]
    fn valid_arguments_are_never_changed(value in exec_arguments(), pretty in any::<bool>()) {
        let raw = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            serde_json::to_string(&value).unwrap()
        };
        prop_assert_eq!(repair_arguments(&raw, Some(&EXEC)), Outcome::Valid(raw.clone()));
    }

    #[test]
    fn any_json_object_passes_untouched_without_a_schema(
        map in proptest::collection::btree_map(any::<String>(), json_value(), 0..5),
        pretty in any::<bool>(),
    ) {
        let value = Value::Object(map.into_iter().collect());
        let raw = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            serde_json::to_string(&value).unwrap()
        };
        prop_assert_eq!(repair_arguments(&raw, None), Outcome::Valid(raw.clone()));
    }

    #[test]
    fn arbitrary_arguments_never_panic(raw in any::<String>(), shaped in json_ish()) {
        for text in [&raw, &shaped] {
            let outcome = repair_arguments(text, Some(&EXEC));
            if let Outcome::Repaired { text, .. } = &outcome {
                prop_assert!(EXEC.is_valid(&serde_json::from_str(text).unwrap()));
            }
            let _ = repair_arguments(text, None);
        }
    }

    #[test]
    fn arbitrary_names_and_inputs_never_panic(text in any::<String>()) {
        let _ = resolve_name(&text, ["exec_command", "apply_patch", "ns__member"]);
        let _ = repair_custom_input(&text, &PATCH);
        let _ = Grammar::compile(&text);
    }

    #[test]
    fn generated_patches_parse(patch in patch()) {
        prop_assert_eq!(repair_custom_input(&patch, &PATCH), Outcome::Valid(patch.clone()));
    }

    #[test]
    fn fenced_crlf_patches_come_back_whole(patch in patch()) {
        let patch = format!("{}\n", patch.trim_end_matches('\n'));
        let mangled = format!("```\r\n{}```", patch.replace('\n', "\r\n"));
        let outcome = repair_custom_input(&mangled, &PATCH);
        prop_assert_eq!(outcome.text(), patch.as_str(), "{:?}", outcome);
    }
}
