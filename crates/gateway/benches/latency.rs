//! The latency the gateway adds to a streamed answer, end to end over loopback HTTP.
//!
//! One process runs a fake Chat Completions upstream (a short streamed text answer) and an
//! in-process gateway routing every model to it, on one multi-threaded runtime, and a client on
//! a single-threaded runtime of its own. The client sends sequential
//! streamed requests of two kinds, interleaved, the order alternating every round (A B, B A), so
//! that machine noise hits them alike:
//!
//! - direct: `POST /v1/chat/completions` straight to the fake upstream;
//! - gateway: `POST /v1/responses` to the gateway, which translates and calls the same upstream.
//!
//! (This bench found the gateway serving without `TCP_NODELAY`, which made every event after the
//! first few wait ~40 ms for the client's delayed ACK; `serve_on` sets it now.)
//!
//! For each it measures the time to first byte (request sent → first body byte received) and
//! the total time (→ end of the body), and prints the median and p90 of both, what each gateway
//! adds (median minus the direct median) and their ratio. Nothing is asserted on speed.
//!
//! Under `cargo bench` (which passes `--bench`) it sends 30 warm-up and 300 measured requests of
//! each kind; under `cargo test` only a smoke run of 3 of each, to prove the path works.
//! The gateway runs without a tracing subscriber, so its request logging costs nothing here.

// Benches are test code: a broken setup should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_gateway::serve_on;
use toolbridge_testkit::chat::text_stream;
use toolbridge_testkit::{FakeUpstream, Reply};

const WARMUP: usize = 30;
const MEASURED: usize = 300;
const SMOKE: usize = 3;
const PRESET: &str = "generic";
/// The bound on one request, so that a broken path fails instead of hanging.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// The timings of one streamed request.
#[derive(Debug, Clone, Copy)]
struct Sample {
    ttfb: Duration,
    total: Duration,
}

/// The gateway's config: every model routed to `upstream`, listening on 127.0.0.1:0.
fn gateway_config(upstream: &FakeUpstream) -> Config {
    let text = format!(
        r#"
[providers.up]
base_url = "{}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "{PRESET}"

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
        // The added latency of the gateway itself; the store's is measured by the store bench.
        "TOOLBRIDGE_STORE_URL" => Some("none".to_owned()),
        _ => None,
    };
    Config::from_file(file, &env).expect("bench config is valid")
}

/// The gateway as `toolbridge serve` runs it ([`serve_on`]), on 127.0.0.1:0, routing `*` to
/// `upstream`; it runs until the runtime stops.
async fn start_gateway(upstream: &FakeUpstream) -> SocketAddr {
    let config = gateway_config(upstream);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve_on(listener, config, std::future::pending::<()>()));
    addr
}

/// Sends one streamed request and reads its whole body; returns its timings and body size.
async fn timed(client: &reqwest::Client, url: &str, body: &Value) -> (Sample, usize) {
    let run = async {
        let started = Instant::now();
        let response = client.post(url).json(body).send().await.expect("answers");
        assert_eq!(response.status().as_u16(), 200, "status of {url}");
        let mut stream = response.bytes_stream();
        let mut ttfb = None;
        let mut bytes = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.expect("body chunk");
            if !chunk.is_empty() && ttfb.is_none() {
                ttfb = Some(started.elapsed());
            }
            bytes += chunk.len();
        }
        let total = started.elapsed();
        (
            Sample {
                ttfb: ttfb.expect("a non-empty body"),
                total,
            },
            bytes,
        )
    };
    tokio::time::timeout(REQUEST_LIMIT, run)
        .await
        .expect("the request finished in time")
}

/// The `q` quantile (0..=1) of `values`, nearest rank.
fn quantile(values: &[Duration], q: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// The median TTFB and the median total time.
type Medians = (Duration, Duration);

fn report(name: &str, samples: &[Sample]) -> Medians {
    let ttfb: Vec<Duration> = samples.iter().map(|s| s.ttfb).collect();
    let total: Vec<Duration> = samples.iter().map(|s| s.total).collect();
    let (median, p90) = (quantile(&ttfb, 0.5), quantile(&ttfb, 0.9));
    println!(
        "{name:<15} n={:<4} TTFB median {:.3} ms  p90 {:.3} ms | total median {:.3} ms  p90 {:.3} ms",
        samples.len(),
        ms(median),
        ms(p90),
        ms(quantile(&total, 0.5)),
        ms(quantile(&total, 0.9)),
    );
    (median, quantile(&total, 0.5))
}

/// The servers: the fake upstream and the gateway, on the servers' runtime.
struct Servers {
    upstream: FakeUpstream,
    gateway: SocketAddr,
}

async fn start_servers() -> Servers {
    let upstream = FakeUpstream::start().await;
    upstream.set_fallback(Reply::sse(text_stream(
        &["Hello", " from", " the", " fake", " upstream", "."],
        "stop",
    )));
    let gateway = start_gateway(&upstream).await;
    Servers { upstream, gateway }
}

async fn bench(servers: &Servers, full: bool) {
    let Servers { upstream, gateway } = servers;
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client");

    let direct_url = format!("{}/chat/completions", upstream.base_url());
    let direct_body = json!({
        "model": "fake-model",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Say hello."}],
    });
    let gateway_url = format!("http://{gateway}/v1/responses");
    let gateway_body = json!({"model": "fake-model", "stream": true, "input": "Say hello."});

    let (warmup, measured) = if full { (WARMUP, MEASURED) } else { (0, SMOKE) };
    // Each round sends one request of each kind; the order alternates every round so that each
    // kind follows the other equally often: what a request meets depends on its predecessor.
    let targets = [
        (direct_url.as_str(), &direct_body),
        (gateway_url.as_str(), &gateway_body),
    ];
    let mut samples: [Vec<Sample>; 2] = Default::default();
    let mut body_bytes = [0; 2];
    for round in 0..warmup + measured {
        for k in 0..targets.len() {
            let kind = (round + k) % targets.len();
            let (url, body) = targets[kind];
            let (sample, bytes) = timed(&client, url, body).await;
            if round >= warmup {
                samples[kind].push(sample);
                body_bytes[kind] = bytes;
            }
        }
    }
    let [direct, through] = samples;
    let [direct_bytes, gateway_bytes] = body_bytes;

    println!(
        "latency: {measured} measured requests of each kind after {warmup} warm-up, interleaved \
         in alternating order (direct, gateway); body {direct_bytes} bytes direct (Chat SSE), \
         {gateway_bytes} bytes through the gateway (Responses SSE)"
    );
    let direct_medians = report("direct", &direct);
    let gateway_medians = report("gateway", &through);
    added("gateway", direct_medians, gateway_medians);
    // Every gateway request reached the upstream once.
    assert_eq!(
        upstream.requests().len(),
        2 * (warmup + measured),
        "requests seen by the upstream"
    );
}

/// Prints what `name` adds to the direct path: median minus median, and their ratio.
fn added(name: &str, (direct_ttfb, direct_total): Medians, (ttfb, total): Medians) {
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(f64::MIN_POSITIVE);
    println!(
        "{name}: added TTFB (median - direct median) {:.3} ms, ratio {:.2}x; \
         added total {:.3} ms, ratio {:.2}x",
        ms(ttfb) - ms(direct_ttfb),
        ratio(ttfb, direct_ttfb),
        ms(total) - ms(direct_total),
        ratio(total, direct_total),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not, and gets only a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    // The servers run on their own worker threads; the client on this thread, in a runtime of
    // its own, so that its reading of the first byte does not queue behind server work.
    let servers_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("servers' runtime");
    let servers = servers_runtime.block_on(start_servers());
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    client_runtime.block_on(bench(&servers, full));
}
