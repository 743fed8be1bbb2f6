//! What metrics, tracing and limits add to one request: the same gateway workload with all of
//! them on (metrics recorded, spans recorded by the span layer and exported from its own thread to a closed local port,
//! per-key and per-provider limits checked and charged) against all off, in one process,
//! interleaved batch by batch so that drift hits both alike. The measure is the gateway's own
//! time as it reports it (`x-toolbridge-overhead-ms`: total minus upstream wait), which keeps
//! the loopback HTTP noise of the client out. Wall time per request is printed too (client to
//! client over loopback: it also sees what runs after the headers are written, such as the
//! request span's close and the request metrics, and the upstream reading the extra
//! `traceparent` header). Then one span alone, with and without the span layer.
//!
//! Run: `cargo bench -p toolbridge-gateway --bench ops_overhead`. Under `cargo test` (no
//! `--bench`) it is a smoke run: two rounds of ten requests, a few spans.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Instant;

use serde_json::json;
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_gateway::serve_on;
use toolbridge_testkit::chat::completion;
use toolbridge_testkit::{FakeUpstream, Reply};
use tracing_subscriber::layer::SubscriberExt;

/// Requests per batch, and measured rounds of batches (one more warms up), under `cargo bench`.
const BATCH: usize = 100;
const ROUNDS: usize = 60;

fn config(upstream: &FakeUpstream, on: bool) -> Config {
    let ops = if on {
        r#"
[metrics]
enabled = true

[limits]
key_requests_per_minute = 100000000
key_tokens_per_minute = 100000000000

[limits.providers.up]
requests_per_minute = 100000000
tokens_per_minute = 100000000000
"#
    } else {
        "[metrics]\nenabled = false\n"
    };
    let text = format!(
        "{ops}\n[providers.up]\nbase_url = \"{}\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
        upstream.base_url()
    );
    let file: FileConfig = toml::from_str(&text).expect("bench config parses");
    let env = |k: &str| match k {
        "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
        "TOOLBRIDGE_STORE_URL" => Some("none".to_owned()),
        _ => None,
    };
    Config::from_file(file, &env).expect("bench config is valid")
}

async fn start(config: Config) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_on(listener, config, std::future::pending::<()>()));
    addr
}

/// Runs one batch; returns each request's reported overhead and wall time (µs).
async fn batch(client: &reqwest::Client, addr: SocketAddr, size: usize) -> (Vec<f64>, Vec<f64>) {
    let url = format!("http://{addr}/v1/responses");
    let body = json!({"model": "m", "input": "hi", "store": false,
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}]});
    let (mut overhead, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..size {
        let started = Instant::now();
        let response = client.post(&url).json(&body).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let ms = response.headers()["x-toolbridge-overhead-ms"]
            .to_str()
            .unwrap()
            .parse::<f64>()
            .unwrap();
        let _ = response.bytes().await.unwrap();
        overhead.push(ms * 1000.0);
        wall.push(started.elapsed().as_secs_f64() * 1e6);
    }
    (overhead, wall)
}

/// Nanoseconds per span, over a batch of spans like the gateway's upstream span.
fn span_cost() -> f64 {
    const SPANS: u32 = 2_000;
    let started = Instant::now();
    for _ in 0..SPANS {
        let span = tracing::info_span!("upstream", provider = %"up", model = %"m", stream = false);
        let _entered = span.enter();
    }
    started.elapsed().as_secs_f64() * 1e9 / f64::from(SPANS)
}

/// CPU time (ns) the thread named `name` has run so far, from `/proc/self/task/*/schedstat`.
fn thread_cpu_ns(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            return stat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// One configuration measured: its server, whether metrics and spans are on.
struct Mode {
    name: &'static str,
    addr: SocketAddr,
    metrics: bool,
    traced: bool,
    overhead: Vec<f64>,
    wall: Vec<f64>,
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not, and gets only a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let (batch_size, rounds, span_rounds) = if full {
        (BATCH, ROUNDS, 20)
    } else {
        (10, 2, 2)
    };
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // Spans go to an OTLP exporter pointed at a closed local port: recorded, batched and dropped,
    // which is the whole cost on the request path. Both subscribers log as production does
    // (text lines, here into a sink), so "off" keeps its logging.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint("http://127.0.0.1:9/v1/traces")
        .build()
        .unwrap();
    use opentelemetry_otlp::WithExportConfig;
    let (span_layer, spans_guard) = toolbridge_gateway::spans::start(
        exporter,
        toolbridge_gateway::spans::Batching::from_env(),
        toolbridge_gateway::spans::Sampler::default(),
    )
    .unwrap();
    let traced = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink))
            .with(span_layer)
            .with(tracing_subscriber::EnvFilter::new("info")),
    );
    let plain = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink))
            .with(tracing_subscriber::EnvFilter::new("info")),
    );

    // One thread: the thread-local subscriber then covers the server's tasks too.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (limited, open, upstream) = rt.block_on(async {
        let upstream = FakeUpstream::start().await;
        upstream.set_fallback(Reply::json(completion("hello", "stop")));
        let limited = start(config(&upstream, true)).await;
        let open = start(config(&upstream, false)).await;
        (limited, open, upstream)
    });
    let mode = |name, addr, metrics, traced| Mode {
        name,
        addr,
        metrics,
        traced,
        overhead: Vec::new(),
        wall: Vec::new(),
    };
    let mut modes = vec![
        mode("all off", open, false, false),
        mode("all on", limited, true, true),
        mode("metrics only", open, true, false),
        mode("tracing only", open, false, true),
        mode("limits only", limited, false, false),
    ];
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    for round in 0..=rounds {
        for m in &mut modes {
            toolbridge_gateway::set_metrics_enabled(m.metrics);
            let dispatch = if m.traced { &traced } else { &plain };
            let (o, w) = tracing::dispatcher::with_default(dispatch, || {
                rt.block_on(batch(&client, m.addr, batch_size))
            });
            // The first round warms up.
            if round > 0 {
                m.overhead.extend(o);
                m.wall.extend(w);
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (base_o, base_w) = (median(&mut modes[0].overhead), median(&mut modes[0].wall));
    println!(
        "median per request over {rounds} interleaved batches of {batch_size}; overhead = x-toolbridge-overhead-ms, wall = client to client over loopback"
    );
    for m in &mut modes {
        let (o, w) = (median(&mut m.overhead), median(&mut m.wall));
        println!(
            "  {:<13} overhead {o:6.1} µs ({:+5.1}, ×{:.3})   wall {w:6.1} µs ({:+5.1}, ×{:.3})",
            m.name,
            o - base_o,
            o / base_o,
            w - base_w,
            w / base_w
        );
    }
    // The exporter thread's own CPU time (building span data, encoding, sending), spread over
    // the traced requests: work off the request path, on another core.
    let traced_requests = modes
        .iter()
        .filter(|m| m.traced)
        .map(|m| m.wall.len())
        .sum::<usize>();
    if let Some(ns) = thread_cpu_ns("toolbridge-otlp") {
        #[allow(clippy::cast_precision_loss)]
        let per_request = ns as f64 / 1e3 / traced_requests.max(1) as f64;
        println!(
            "span exporter thread: {per_request:.1} µs of CPU per traced request (off the request path)"
        );
    }
    // One span alone, as the gateway makes them (entered, with fields, closed), with and
    // without the span layer, interleaved.
    let (mut with_layer, mut without) = (Vec::new(), Vec::new());
    for _ in 0..span_rounds {
        for (dispatch, out) in [(&traced, &mut with_layer), (&plain, &mut without)] {
            out.push(tracing::dispatcher::with_default(dispatch, span_cost));
        }
    }
    let (a, b) = (median(&mut with_layer), median(&mut without));
    println!(
        "one span (fields, entered, closed): {b:.0} ns without the span layer, {a:.0} ns with it ({:+.0} ns)",
        a - b
    );
    drop(upstream);
    drop(spans_guard);
}
