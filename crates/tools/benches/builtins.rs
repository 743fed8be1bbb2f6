//! Benchmarks of the built-in tools' hot operations, called through `Tool::execute` as a registry
//! would: the calculator on a mid-size expression, a jq query on a ~10 KB document, and a regex
//! `find_all` over ~10 KB of text.
// Benches are test code: a failed call should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolbridge_tools::builtins::{Calculator, IsolatedJson, JqIsolation, Json, RegexTool};
use toolbridge_tools::{Tool, ToolContext};

/// About 10 KB of JSON: 125 items with a few fields each.
fn document() -> Value {
    let items: Vec<Value> = (0..125)
        .map(|i| {
            json!({
                "id": i,
                "name": format!("item-{i:03}"),
                "price": (i * 37) % 100,
                "tags": ["alpha", "beta"],
                "in_stock": i % 3 != 0,
            })
        })
        .collect();
    json!({"items": items})
}

/// About 10 KB of text with dates and e-mail addresses to find.
fn text() -> String {
    (0..240)
        .map(|i| {
            format!(
                "line {i}: user{i}@example.com on 2024-{:02}-{:02}\n",
                i % 12 + 1,
                i % 28 + 1
            )
        })
        .collect()
}

fn builtins(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // One context for the whole run: its deadline must outlast every sample.
    let ctx = ToolContext::with_timeout(Duration::from_secs(24 * 3600), 1024 * 1024);

    let expression = json!({"expression": "(2^10 + sqrt(16)) * 3 - 7 / 2 + ncr(20, 10) % 97 + mean(1, 2, 3, 4, 5) * max(3, 9, 4) - 12!"});
    c.bench_function("calculator/mid_size_expression", |b| {
        b.iter(|| {
            rt.block_on(Calculator.execute(black_box(expression.clone()), &ctx))
                .unwrap()
        })
    });

    let doc = document();
    assert!((9_000..=12_000).contains(&serde_json::to_string(&doc).unwrap().len()));
    let query = json!({
        "operation": "jq",
        "filter": "[.items[] | select(.in_stock and .price > 50) | {name, price}] | sort_by(.price) | length",
        "document": doc,
    });
    c.bench_function("json/jq_query_10kb", |b| {
        b.iter(|| {
            rt.block_on(Json.execute(black_box(query.clone()), &ctx))
                .unwrap()
        })
    });

    let text = text();
    assert!((9_000..=12_000).contains(&text.len()));
    let find_all = json!({
        "operation": "find_all",
        "pattern": r"[\w.]+@[\w.]+|\d{4}-\d{2}-\d{2}",
        "text": text,
    });
    c.bench_function("regex/find_all_10kb", |b| {
        b.iter(|| {
            rt.block_on(RegexTool.execute(black_box(find_all.clone()), &ctx))
                .unwrap()
        })
    });

    // A pattern never seen before, on empty text: what compiling a pattern costs (the tool keeps
    // recently compiled patterns, so the find_all above measures the search).
    let mut fresh = 0u64;
    c.bench_function("regex/compile_new_pattern", |b| {
        b.iter_batched(
            || {
                fresh += 1;
                json!({
                    "operation": "match",
                    "pattern": format!(r"[\w.]+@[\w.]+|\d{{4}}-\d{{2}}-\d{{2}}|x{fresh}"),
                    "text": "",
                })
            },
            |args| rt.block_on(RegexTool.execute(args, &ctx)).unwrap(),
            BatchSize::SmallInput,
        )
    });

    // The jq filter on an empty list: what preparing the filter and its thread cost alone.
    let prepare_only =
        json!({"operation": "jq", "filter": query["filter"], "document": {"items": []}});
    c.bench_function("json/jq_prepare_only", |b| {
        b.iter(|| {
            rt.block_on(Json.execute(black_box(prepare_only.clone()), &ctx))
                .unwrap()
        })
    });

    // The same 10 KB query in the isolated mode: one worker process per query, so the ratio to
    // `json/jq_query_10kb` is the price of the memory limit and the kill at the deadline.
    let isolated = IsolatedJson::new(JqIsolation::new(env!("CARGO_BIN_EXE_toolbridge-jq-worker")));
    c.bench_function("json/jq_query_10kb_isolated", |b| {
        b.iter(|| {
            rt.block_on(isolated.execute(black_box(query.clone()), &ctx))
                .unwrap()
        })
    });
}

criterion_group!(benches, builtins);
criterion_main!(benches);
