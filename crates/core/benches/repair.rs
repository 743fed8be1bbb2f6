//! Repair costs: validating a valid call with a cached validator (the path every call takes),
//! and the repair paths a malformed call takes.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;
use toolbridge_core::repair::{
    CompiledSchema, Grammar, ToolSchemas, repair_arguments, repair_custom_input, resolve_name,
};
use toolbridge_wire::responses::Tool;

const TOOLS: &str = include_str!("../tests/fixtures/repair/tools_codex.json");

fn tool(name: &str) -> Value {
    let tools: Vec<Value> = serde_json::from_str(TOOLS).unwrap_or_default();
    tools
        .into_iter()
        .find(|t| t["name"] == name)
        .unwrap_or(Value::Null)
}

fn bench(c: &mut Criterion) {
    let Ok(exec) = CompiledSchema::compile("exec_command", &tool("exec_command")["parameters"])
    else {
        return;
    };
    let Ok(patch) = Grammar::compile(
        tool("apply_patch")["format"]["definition"]
            .as_str()
            .unwrap_or(""),
    ) else {
        return;
    };
    let valid = r#"{"cmd": "cargo test -p toolbridge-core", "workdir": "/work", "yield_time_ms": 10000, "max_output_tokens": 10000}"#;
    let broken =
        r#"{cmd: 'cargo test -p toolbridge-core', workdir: '/work', yield_time_ms: "10000","#;
    let coerce = r#"{"cmd": "ls", "yield_time_ms": "5000", "tty": "true", "prefix_rule": "ls"}"#;
    let good_patch = "*** Begin Patch\n*** Update File: src/main.rs\n@@ fn main() {\n-    println!(\"old\");\n+    println!(\"new\");\n }\n*** End Patch\n";
    let fenced_patch = format!(
        "```diff\r\n{}```",
        good_patch
            .replace("*** End Patch\n", "")
            .replace('\n', "\r\n")
    );
    let declared = [
        "exec_command",
        "write_stdin",
        "apply_patch",
        "view_image",
        "update_goal",
    ];

    c.bench_function("arguments/valid_exec_command", |b| {
        b.iter(|| repair_arguments(black_box(valid), Some(&exec)))
    });
    c.bench_function("arguments/repair_syntax", |b| {
        b.iter(|| repair_arguments(black_box(broken), Some(&exec)))
    });
    c.bench_function("arguments/coerce_three_fields", |b| {
        b.iter(|| repair_arguments(black_box(coerce), Some(&exec)))
    });
    c.bench_function("custom/valid_patch", |b| {
        b.iter(|| repair_custom_input(black_box(good_patch), &patch))
    });
    c.bench_function("custom/repair_fenced_crlf_patch", |b| {
        b.iter(|| repair_custom_input(black_box(&fenced_patch), &patch))
    });
    let tools: Vec<Tool> = serde_json::from_str(TOOLS).unwrap_or_default();
    c.bench_function("schemas/from_tools_codex_8_tools", |b| {
        b.iter(|| ToolSchemas::from_tools(black_box(&tools)))
    });
    c.bench_function("names/alias_bash", |b| {
        b.iter(|| resolve_name(black_box("bash"), declared))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
