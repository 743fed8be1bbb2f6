//! What storing responses costs: the response store's own latency, and what `store: true` adds
//! to a streamed turn through the gateway.
//!
//! 1. `SqlStore` directly, on SQLite (a fresh file in the temp dir, as the gateway opens it: WAL,
//!    `synchronous = NORMAL`) and on PostgreSQL (a fresh database on
//!    `$TOOLBRIDGE_TEST_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/postgres`,
//!    skipped with a note when unreachable). Each response is realistic: a body of about 5 KB
//!    and 10 items (4 input, 6 output, 0.3 to 1 KB each). One at a time, it measures:
//!    - `put`: writing a new response and its items (one transaction);
//!    - `put c=16`: the same with 16 writers at once, each waiting for its own write (and the
//!      ratio of its p99 to its p50: a store that stalls under concurrency shows it here);
//!    - `get`: reading a response with its items, in a scattered order;
//!    - `input_items`: the first page (20) of a response's input items;
//!    - `chain(10)`: following `previous_response_id` through 10 responses, what each chained
//!      turn costs before it reaches the upstream (responses are written in chains of 10).
//!
//!    For each it prints p50, p99 and the mean.
//! 2. An in-process gateway (as `toolbridge serve` runs it) in front of a fake upstream streaming
//!    a short text answer, storing in a fresh SQLite file (and, when reachable, in the PostgreSQL
//!    database above). A client sends streamed `POST /v1/responses` with `store: true` and with
//!    `store: false`, interleaved, the order alternating every round, and prints the medians of
//!    the time to first byte and of the total time of each kind, and their difference: a stored
//!    stream is written as `in_progress` before its first byte and in full before its terminal
//!    event.
//!
//! Under `cargo bench` (which passes `--bench`): 500 responses per store and 30 warm-up plus 300
//! measured rounds through the gateway. Under `cargo test --benches`: a smoke run of 10 responses
//! and 3 rounds, to prove the paths work. Nothing is asserted on speed.

// Benches are test code: a broken setup should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_gateway::serve_on;
use toolbridge_store::{Order, Page, ResponseStore, SqlStore, StoredResponse, Tenant};
use toolbridge_testkit::chat::text_stream;
use toolbridge_testkit::{FakeUpstream, Reply};

const RESPONSES: usize = 500;
const SMOKE_RESPONSES: usize = CHAIN;
const WARMUP_ROUNDS: usize = 30;
const MEASURED_ROUNDS: usize = 300;
const SMOKE_ROUNDS: usize = 3;
/// Responses per `previous_response_id` chain.
const CHAIN: usize = 10;
/// The bound on one gateway request, so that a broken path fails instead of hanging.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// How many of each thing one run does.
#[derive(Clone, Copy)]
struct Sizes {
    responses: usize,
    warmup: usize,
    rounds: usize,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// The `q` quantile (0..=1) of `values`, nearest rank.
fn quantile(values: &[Duration], q: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn mean(values: &[Duration]) -> Duration {
    values.iter().sum::<Duration>() / u32::try_from(values.len().max(1)).unwrap_or(u32::MAX)
}

fn print_latency(backend: &str, op: &str, samples: &[Duration]) {
    println!(
        "store/{backend:<10} {op:<12} n={:<4} p50 {:>8.3} ms  p99 {:>8.3} ms  mean {:>8.3} ms",
        samples.len(),
        ms(quantile(samples, 0.5)),
        ms(quantile(samples, 0.99)),
        ms(mean(samples)),
    );
}

/// Deterministic filler text of `len` bytes (varied, so nothing compresses it away).
fn filler(seed: usize, len: usize) -> String {
    const WORDS: [&str; 12] = [
        "gateway",
        "stream",
        "response",
        "token",
        "upstream",
        "reasoning",
        "tool",
        "call",
        "output",
        "message",
        "store",
        "chain",
    ];
    let mut text = String::with_capacity(len + 16);
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    while text.len() < len {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        text.push_str(WORDS[(x >> 33) % WORDS.len()]);
        text.push(' ');
    }
    text.truncate(len);
    text
}

/// A response as the gateway stores one: a ~5 KB body and 10 items.
fn stored_response(run: &str, i: usize) -> StoredResponse {
    let id = format!("resp_{run}_{i:06}");
    let previous = (!i.is_multiple_of(CHAIN)).then(|| format!("resp_{run}_{:06}", i - 1));
    let item = |n: usize| format!("{id}_{n:02}");
    let input_items = vec![
        json!({"id": item(0), "type": "message", "role": "user",
               "content": [{"type": "input_text", "text": filler(i, 600)}]}),
        json!({"id": item(1), "type": "function_call_output", "call_id": format!("call_{i}_a"),
               "output": filler(i + 1, 900)}),
        json!({"id": item(2), "type": "function_call_output", "call_id": format!("call_{i}_b"),
               "output": filler(i + 2, 700)}),
        json!({"id": item(3), "type": "message", "role": "user",
               "content": [{"type": "input_text", "text": filler(i + 3, 300)}]}),
    ];
    let output_items = vec![
        json!({"id": item(4), "type": "reasoning", "summary": [],
               "content": [{"type": "reasoning_text", "text": filler(i + 4, 800)}],
               "encrypted_content": filler(i + 5, 400)}),
        json!({"id": item(5), "type": "function_call", "status": "completed",
               "call_id": format!("call_{i}_c"), "name": "exec_command",
               "arguments": json!({"cmd": filler(i + 6, 200)}).to_string()}),
        json!({"id": item(6), "type": "function_call", "status": "completed",
               "call_id": format!("call_{i}_d"), "name": "view_image",
               "arguments": json!({"path": filler(i + 7, 100)}).to_string()}),
        json!({"id": item(7), "type": "reasoning", "summary": [],
               "content": [{"type": "reasoning_text", "text": filler(i + 8, 500)}]}),
        json!({"id": item(8), "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                            "text": filler(i + 9, 900)}]}),
        json!({"id": item(9), "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                            "text": filler(i + 10, 300)}]}),
    ];
    let response = json!({
        "id": id, "object": "response", "created_at": 1_800_000_000 + i as i64,
        "completed_at": 1_800_000_002 + i as i64, "status": "completed", "background": false,
        "model": "deepseek-v4-flash", "previous_response_id": previous, "store": true,
        "instructions": filler(i + 11, 600), "error": null, "incomplete_details": null,
        "output": output_items, "parallel_tool_calls": true, "tool_choice": "auto",
        "tools": [{"type": "function", "name": "exec_command", "strict": false,
                   "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
        "temperature": 1.0, "top_p": 1.0, "truncation": "disabled", "metadata": {},
        "text": {"format": {"type": "text"}},
        "usage": {"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 700, "output_tokens_details": {"reasoning_tokens": 300},
                  "total_tokens": 1900},
    });
    StoredResponse {
        id,
        created_at: 1_800_000_000 + i as i64,
        status: "completed".to_owned(),
        model: "deepseek-v4-flash".to_owned(),
        previous_response_id: previous,
        expires_at: Some(4_000_000_000),
        response,
        input_items,
        output_items,
    }
}

/// The store-level measurements on one store.
async fn bench_store(backend: &str, store: &SqlStore, sizes: Sizes) {
    let tenant = Tenant::named("bench");
    let run = format!("{:x}", std::process::id());
    let responses: Vec<StoredResponse> = (0..sizes.responses)
        .map(|i| stored_response(&run, i))
        .collect();
    let body_bytes = serde_json::to_string(&responses[0].response).unwrap().len();
    let items_bytes: usize = responses[0]
        .input_items
        .iter()
        .chain(&responses[0].output_items)
        .map(|v| serde_json::to_string(v).unwrap().len())
        .sum();
    println!(
        "store/{backend}: {} responses, each a {body_bytes}-byte body and {} items of \
         {items_bytes} bytes in all",
        responses.len(),
        responses[0].input_items.len() + responses[0].output_items.len(),
    );

    let mut put = Vec::with_capacity(responses.len());
    for r in &responses {
        let started = Instant::now();
        store.put(&tenant, r).await.expect("put");
        put.push(started.elapsed());
    }
    // A scattered order: a stride coprime with the count visits every response once.
    let n = responses.len();
    let stride = (1..n)
        .rev()
        .find(|s| gcd(*s, n) == 1 && *s * 3 < n * 2)
        .unwrap_or(1);
    let mut get = Vec::with_capacity(n);
    for k in 0..n {
        let r = &responses[(k * stride) % n];
        let started = Instant::now();
        let got = store
            .get(&tenant, &r.id)
            .await
            .expect("get")
            .expect("stored");
        get.push(started.elapsed());
        assert_eq!(got.output_items.len(), r.output_items.len());
    }
    let page = Page {
        after: None,
        limit: 20,
        order: Order::Desc,
    };
    let mut items = Vec::with_capacity(n);
    for k in 0..n {
        let r = &responses[(k * stride) % n];
        let started = Instant::now();
        let got = store
            .input_items(&tenant, &r.id, &page)
            .await
            .expect("input_items")
            .expect("stored");
        items.push(started.elapsed());
        assert_eq!(got.items.len(), r.input_items.len());
    }
    let mut chain = Vec::new();
    for last in responses.iter().skip(CHAIN - 1).step_by(CHAIN) {
        let started = Instant::now();
        let got = store.chain(&tenant, &last.id, 256).await.expect("chain");
        chain.push(started.elapsed());
        assert_eq!(got.len(), CHAIN);
    }
    let concurrent = concurrent_puts(store, &tenant, &run, sizes.responses).await;
    print_latency(backend, "put", &put);
    print_latency(backend, "put c=16", &concurrent);
    println!(
        "store/{backend:<10} put c=16     p99/p50 {:.2}",
        quantile(&concurrent, 0.99).as_secs_f64() / quantile(&concurrent, 0.5).as_secs_f64()
    );
    print_latency(backend, "get", &get);
    print_latency(backend, "input_items", &items);
    if chain.is_empty() {
        println!("store/{backend:<10} chain(10)    (fewer than {CHAIN} responses: not measured)");
    } else {
        print_latency(backend, "chain(10)", &chain);
    }
    for r in &responses {
        store.delete(&tenant, &r.id).await.expect("delete");
    }
}

/// `n` new responses written by 16 writers at once, each waiting for its own `put`: what a
/// loaded gateway asks of its store. The latency of every `put`.
async fn concurrent_puts(store: &SqlStore, tenant: &Tenant, run: &str, n: usize) -> Vec<Duration> {
    const WRITERS: usize = 16;
    let responses: Vec<StoredResponse> = (0..n)
        .map(|i| stored_response(&format!("{run}c"), i))
        .collect();
    let writers = (0..WRITERS).map(|w| {
        let mine: Vec<&StoredResponse> = responses.iter().skip(w).step_by(WRITERS).collect();
        async move {
            let mut samples = Vec::with_capacity(mine.len());
            for r in mine {
                let started = Instant::now();
                store.put(tenant, r).await.expect("concurrent put");
                samples.push(started.elapsed());
            }
            samples
        }
    });
    let samples: Vec<Duration> = futures::future::join_all(writers)
        .await
        .into_iter()
        .flatten()
        .collect();
    for r in &responses {
        store.delete(tenant, &r.id).await.expect("delete");
    }
    samples
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A fresh PostgreSQL database for this run: its URL, or `None` (with a note) when the server
/// is not reachable.
async fn fresh_postgres() -> Option<(String, String)> {
    let admin = std::env::var("TOOLBRIDGE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    sqlx::any::install_default_drivers();
    let connect = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin);
    let mut conn = match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            println!("store/postgres: SKIPPED, {admin} is not reachable ({e})");
            return None;
        }
        Err(_) => {
            println!("store/postgres: SKIPPED, {admin} did not answer in 5 s");
            return None;
        }
    };
    let name = format!("toolbridge_bench_store_{}", std::process::id());
    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create the bench database");
    let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
    Some((admin, url))
}

async fn drop_postgres(admin: &str, url: &str) {
    let name = url.rsplit('/').next().unwrap();
    if let Ok(mut conn) = <sqlx::AnyConnection as sqlx::Connection>::connect(admin).await {
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&mut conn)
        .await;
    }
}

/// The gateway's config: every model routed to `upstream`, storing at `store_url`.
fn gateway_config(upstream: &FakeUpstream, store_url: &str) -> Config {
    let text = format!(
        r#"
[providers.up]
base_url = "{}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "generic"

[[routes]]
model = "*"
provider = "up"
"#,
        upstream.base_url()
    );
    let file: FileConfig = toml::from_str(&text).expect("bench config parses");
    let env = |k: &str| match k {
        "FAKE_UPSTREAM_KEY" => Some("sk-upstream-secret".to_owned()),
        "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
        "TOOLBRIDGE_STORE_URL" => Some(store_url.to_owned()),
        _ => None,
    };
    Config::from_file(file, &env).expect("bench config is valid")
}

/// A fake upstream and a gateway storing at `store_url`, on the servers' runtime.
async fn start_gateway(store_url: String) -> (FakeUpstream, SocketAddr) {
    let upstream = FakeUpstream::start().await;
    upstream.set_fallback(Reply::sse(text_stream(
        &["Hello", " from", " the", " fake", " upstream", "."],
        "stop",
    )));
    let config = gateway_config(&upstream, &store_url);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    // Bound and listening now; the store opens inside `serve_on`, so wait until it answers.
    tokio::spawn(serve_on(listener, config, std::future::pending::<()>()));
    (upstream, addr)
}

/// The timings of one streamed request: time to first byte, total.
async fn timed(client: &reqwest::Client, url: &str, body: &Value) -> (Duration, Duration) {
    let run = async {
        let started = Instant::now();
        let response = client.post(url).json(body).send().await.expect("answers");
        assert_eq!(response.status().as_u16(), 200, "status of {url}");
        let mut stream = response.bytes_stream();
        let mut ttfb = None;
        let mut text = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.expect("body chunk");
            if !chunk.is_empty() && ttfb.is_none() {
                ttfb = Some(started.elapsed());
            }
            text.extend_from_slice(&chunk);
        }
        let total = started.elapsed();
        let text = String::from_utf8_lossy(&text);
        assert!(
            text.contains("event: response.completed"),
            "the stream completed: {text}"
        );
        (ttfb.expect("a non-empty body"), total)
    };
    tokio::time::timeout(REQUEST_LIMIT, run)
        .await
        .expect("the request finished in time")
}

/// `store: true` against `store: false` through one gateway.
async fn bench_gateway(backend: &str, addr: SocketAddr, upstream: &FakeUpstream, sizes: Sizes) {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client");
    let url = format!("http://{addr}/v1/responses");
    // The gateway opens its store before it answers: wait for it.
    let ready = Instant::now();
    while client
        .get(format!("http://{addr}/v1/models"))
        .send()
        .await
        .is_err()
    {
        assert!(
            ready.elapsed() < REQUEST_LIMIT,
            "the gateway never answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let bodies = [
        json!({"model": "fake-model", "stream": true, "store": false, "input": "Say hello."}),
        json!({"model": "fake-model", "stream": true, "store": true, "input": "Say hello."}),
    ];
    let before = upstream.requests().len();
    let mut samples: [Vec<(Duration, Duration)>; 2] = Default::default();
    for round in 0..sizes.warmup + sizes.rounds {
        for k in 0..2 {
            let kind = (round + k) % 2;
            let sample = timed(&client, &url, &bodies[kind]).await;
            if round >= sizes.warmup {
                samples[kind].push(sample);
            }
        }
    }
    assert_eq!(
        upstream.requests().len() - before,
        2 * (sizes.warmup + sizes.rounds),
        "requests seen by the upstream"
    );
    let medians = |s: &[(Duration, Duration)]| {
        let ttfb: Vec<Duration> = s.iter().map(|x| x.0).collect();
        let total: Vec<Duration> = s.iter().map(|x| x.1).collect();
        (
            quantile(&ttfb, 0.5),
            quantile(&total, 0.5),
            quantile(&total, 0.9),
        )
    };
    let (off_ttfb, off_total, off_p90) = medians(&samples[0]);
    let (on_ttfb, on_total, on_p90) = medians(&samples[1]);
    println!(
        "gateway/{backend}: {} measured streamed turns of each kind after {} warm-up, \
         interleaved in alternating order",
        sizes.rounds, sizes.warmup
    );
    for (kind, ttfb, total, p90) in [
        ("store=false", off_ttfb, off_total, off_p90),
        ("store=true ", on_ttfb, on_total, on_p90),
    ] {
        println!(
            "gateway/{backend:<10} {kind}  TTFB median {:>7.3} ms | total median {:>7.3} ms  \
             p90 {:>7.3} ms",
            ms(ttfb),
            ms(total),
            ms(p90)
        );
    }
    println!(
        "gateway/{backend:<10} store=true adds: TTFB {:+.3} ms, total {:+.3} ms (median - median)",
        ms(on_ttfb) - ms(off_ttfb),
        ms(on_total) - ms(off_total),
    );
}

/// A SQLite store path in the temp dir, unique to this run.
fn sqlite_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "toolbridge-bench-store-{what}-{}.db",
        std::process::id()
    ))
}

fn remove_sqlite(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and gets a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let sizes = if full {
        Sizes {
            responses: RESPONSES,
            warmup: WARMUP_ROUNDS,
            rounds: MEASURED_ROUNDS,
        }
    } else {
        Sizes {
            responses: SMOKE_RESPONSES,
            warmup: 0,
            rounds: SMOKE_ROUNDS,
        }
    };
    let store_db = sqlite_path("direct");
    let gateway_db = sqlite_path("gateway");
    remove_sqlite(&store_db);
    remove_sqlite(&gateway_db);

    // The servers (and the stores) on their own worker threads; the client on this thread.
    let servers = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("servers' runtime");
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");

    // 1. The store alone.
    let postgres = servers.block_on(async {
        let sqlite_url = format!("sqlite://{}", store_db.display());
        let store = SqlStore::open(&sqlite_url).await.expect("open SQLite");
        bench_store("sqlite", &store, sizes).await;
        drop(store);
        let postgres = fresh_postgres().await;
        if let Some((_, url)) = &postgres {
            let store = SqlStore::open(url).await.expect("open PostgreSQL");
            bench_store("postgres", &store, sizes).await;
        }
        postgres
    });

    // 2. Through the gateway.
    let (upstream, addr) =
        servers.block_on(start_gateway(format!("sqlite://{}", gateway_db.display())));
    client.block_on(bench_gateway("sqlite", addr, &upstream, sizes));
    if let Some((_, url)) = &postgres {
        let (upstream, addr) = servers.block_on(start_gateway(url.clone()));
        client.block_on(bench_gateway("postgres", addr, &upstream, sizes));
    }

    drop(upstream);
    servers.shutdown_timeout(Duration::from_secs(5));
    if let Some((admin, url)) = &postgres {
        client.block_on(drop_postgres(admin, url));
    }
    remove_sqlite(&store_db);
    remove_sqlite(&gateway_db);
}
