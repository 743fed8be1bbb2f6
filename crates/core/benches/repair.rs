//! Repair costs: validating a valid call with a cached validator (the path every call takes),
//! and the repair paths a malformed call takes; and the hot path through the assembler: one
//! valid call restored with repair on against repair off, reported as a ratio.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::events::{FinishReason, ToolCallDelta, UpstreamEvent};
use toolbridge_core::plan::{ToolCapabilities, plan};
use toolbridge_core::repair::{
    CompiledSchema, Grammar, SchemaCache, ToolSchemas, repair_arguments, repair_custom_input,
    resolve_name,
};
use toolbridge_wire::responses::{CreateResponse, Tool};

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

    // Compiling a request's tool checks (Codex's tools: JSON Schemas and the apply_patch
    // grammar) against finding them in the shared cache, as every repeated turn does.
    let codex_tools: Vec<Tool> = serde_json::from_str(TOOLS).unwrap_or_default();
    c.bench_function("schemas/compile_codex_tools", |b| {
        b.iter(|| ToolSchemas::from_tools(black_box(&codex_tools)))
    });
    let cache = SchemaCache::default();
    cache.schemas(&codex_tools);
    c.bench_function("schemas/cached_codex_tools", |b| {
        b.iter(|| cache.schemas(black_box(&codex_tools)))
    });

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

    // The assembler's hot path: a response with one valid exec_command call, from its first
    // upstream event to its final object, with repair off and on (the checks compiled once per
    // request, outside the loop, as the gateway does).
    let Ok(planned) = plan(&tools, None, &ToolCapabilities::default()) else {
        return;
    };
    let names = Arc::new(planned.names);
    let schemas = Arc::new(ToolSchemas::from_tools(&tools));
    let req = CreateResponse::default();
    let meta = ResponseMeta {
        id: "resp_bench".to_owned(),
        created_at: 1,
        stored: false,
    };
    let run = |repair: Option<Arc<ToolSchemas>>| {
        let mut assembler = Assembler::new(
            skeleton(&req, &meta),
            AssembleOptions {
                names: Arc::clone(&names),
                repair,
                ..AssembleOptions::default()
            },
        );
        let mut out = Vec::new();
        assembler.on_event(
            UpstreamEvent::ToolCall(ToolCallDelta {
                index: Some(0),
                id: Some("call_1".to_owned()),
                name: Some("exec_command".to_owned()),
                arguments: valid.to_owned(),
                item_id: None,
            }),
            &mut out,
        );
        assembler.on_event(UpstreamEvent::Finish(FinishReason::ToolCalls), &mut out);
        let invalid = assembler.review_calls();
        let response = assembler.finish(2, &mut out);
        (invalid.len(), response.output.len(), out.len())
    };
    c.bench_function("assembler/valid_call_repair_off", |b| {
        b.iter(|| run(black_box(None)))
    });
    c.bench_function("assembler/valid_call_repair_on", |b| {
        b.iter(|| run(black_box(Some(Arc::clone(&schemas)))))
    });
    let time = |repair: &Option<Arc<ToolSchemas>>| {
        let start = Instant::now();
        let mut n = 0u32;
        while start.elapsed() < Duration::from_millis(500) {
            black_box(run(repair.clone()));
            n += 1;
        }
        start.elapsed() / n.max(1)
    };
    let off = time(&None);
    let on = time(&Some(Arc::clone(&schemas)));
    println!(
        "assembler/valid_call: repair off {off:?}, on {on:?}, ratio on/off {:.2}",
        on.as_secs_f64() / off.as_secs_f64().max(f64::MIN_POSITIVE)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
