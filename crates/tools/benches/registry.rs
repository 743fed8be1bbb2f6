//! Registry dispatch overhead per call: a trivial closure tool called through
//! `ToolRegistry::execute` (lookup, schema validation, deadline, cancellation, output-size check)
//! against the same closure called directly, in the same run, with the ratio printed at the end.
// Benches are test code: a failed setup should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use serde_json::{Value, json};
use toolbridge_tools::{FnTool, ToolContext, ToolError, ToolRegistry};

async fn add(args: Value, _ctx: ToolContext) -> Result<Value, ToolError> {
    let a = args["a"].as_i64().unwrap_or_default();
    let b = args["b"].as_i64().unwrap_or_default();
    Ok(json!(a + b))
}

fn setup() -> (tokio::runtime::Runtime, ToolRegistry, ToolContext, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut registry = ToolRegistry::empty();
    registry
        .register(Arc::new(FnTool::new(
            "add",
            "Adds two integers.",
            json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": false
            }),
            add,
        )))
        .unwrap();
    let ctx =
        runtime.block_on(async { ToolContext::with_timeout(Duration::from_secs(3600), 1 << 20) });
    (runtime, registry, ctx, json!({"a": 1, "b": 1}))
}

fn bench_dispatch(c: &mut Criterion) {
    let (runtime, registry, ctx, args) = setup();
    let mut group = c.benchmark_group("dispatch");
    group.bench_function("direct_closure", |b| {
        b.iter(|| runtime.block_on(add(black_box(args.clone()), ctx.clone())))
    });
    group.bench_function("registry_execute", |b| {
        b.iter(|| {
            runtime.block_on(registry.execute(black_box("add"), black_box(args.clone()), &ctx))
        })
    });
    group.bench_function("validate_only", |b| {
        b.iter(|| registry.validate(black_box("add"), black_box(&args)))
    });
    group.finish();
}

/// Median nanoseconds per call over a few interleaved rounds, for the ratio line.
fn report_ratio() {
    let (runtime, registry, ctx, args) = setup();
    let iterations = 50_000_u32;
    let mut direct = Vec::new();
    let mut through = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..iterations {
            black_box(
                runtime
                    .block_on(add(black_box(args.clone()), ctx.clone()))
                    .unwrap(),
            );
        }
        direct.push(start.elapsed().as_nanos() as f64 / f64::from(iterations));
        let start = Instant::now();
        for _ in 0..iterations {
            black_box(
                runtime
                    .block_on(registry.execute(black_box("add"), black_box(args.clone()), &ctx))
                    .unwrap(),
            );
        }
        through.push(start.elapsed().as_nanos() as f64 / f64::from(iterations));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (d, r) = (median(&mut direct), median(&mut through));
    println!(
        "dispatch: direct {d:.0} ns/call, registry {r:.0} ns/call, ratio {:.2}x, overhead {:.0} ns/call",
        r / d,
        r - d
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_dispatch(&mut criterion);
    criterion.final_summary();
    report_ratio();
}
