//! The gateway tool loop's own overhead per step: gateway time, excluding the upstream's and the
//! tool's.
//!
//! One process runs a fake Chat Completions upstream and an in-process gateway that runs the
//! calculator itself. The upstream answers a request that carries fewer than `STEPS` tool results
//! with one calculator call, and any other with text, so a looped request makes `STEPS + 1`
//! upstream rounds within one response. Three kinds of requests are interleaved (the order
//! rotating every round, so machine noise hits them alike), all non-streamed:
//!
//! - loop: `POST /v1/responses` whose answer takes `STEPS` gateway tool steps;
//! - plain: the same request with the loop's rounds answered at once (no tool call);
//! - direct: `POST /v1/chat/completions` straight to the fake upstream, a round trip of the
//!   upstream alone.
//!
//! The calculator call itself is timed in process (the registry, as the gateway runs it). The
//! overhead of one step is `(loop - plain) / STEPS - direct - tool`: what the gateway spends
//! per step on taking the calls, showing the items, appending the exchange, translating and
//! serialising the next request and decoding its answer. It is printed with its ratio to the
//! plain request's own gateway overhead (`plain - direct`), measured in the same run. Nothing is
//! asserted on speed.
//!
//! Under `cargo bench` (`--bench`) it sends 20 warm-up and 200 measured requests of each kind;
//! under `cargo test` a smoke run of 2 of each.

// Benches are test code: a broken setup should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_gateway::serve_on;
use toolbridge_testkit::chat::{completion, usage};
use toolbridge_testkit::{FakeUpstream, Recorded, Reply};
use toolbridge_tools::{ToolContext, ToolRegistry};

const STEPS: usize = 4;
const WARMUP: usize = 20;
const MEASURED: usize = 200;
const SMOKE: usize = 2;
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// A calculator call while the conversation has fewer than `STEPS` tool results (and the
/// request asks for the loop), else text.
fn script(request: &Recorded) -> Option<Reply> {
    let messages = request.body["messages"].as_array()?;
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    let wants_loop = messages
        .iter()
        .any(|m| m["content"].as_str() == Some("loop please"));
    if wants_loop && results < STEPS {
        return Some(Reply::json(json!({
            "id": "c", "object": "chat.completion", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": format!("call_{results}"), "type": "function",
                    "function": {"name": "calculator", "arguments": "{\"expression\":\"12345*6789\"}"}}]}}],
            "usage": usage(50, 10),
        })));
    }
    Some(Reply::json(completion("Done.", "stop")))
}

fn gateway_config(upstream: &FakeUpstream) -> Config {
    let text = format!(
        r#"
[providers.up]
base_url = "{}"
max_retries = 0

[[routes]]
model = "*"
provider = "up"

[gateway_tools]
builtins = ["calculator"]
jq_isolation = false
max_steps = {STEPS}
"#,
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

struct Servers {
    upstream: FakeUpstream,
    gateway: SocketAddr,
}

async fn start_servers() -> Servers {
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(script));
    let config = gateway_config(&upstream);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .expect("bind");
    let gateway = listener.local_addr().expect("addr");
    tokio::spawn(serve_on(listener, config, std::future::pending::<()>()));
    Servers { upstream, gateway }
}

async fn timed(client: &reqwest::Client, url: &str, body: &Value) -> Duration {
    let run = async {
        let started = Instant::now();
        let response = client.post(url).json(body).send().await.expect("answers");
        assert_eq!(response.status().as_u16(), 200, "status of {url}");
        let answer: Value = response.json().await.expect("JSON");
        (started.elapsed(), answer)
    };
    let (elapsed, answer) = tokio::time::timeout(REQUEST_LIMIT, run)
        .await
        .expect("the request finished in time");
    if let Some(output) = answer["output"].as_array() {
        assert_eq!(answer["status"], "completed", "{answer}");
        if body["input"] == "loop please" {
            assert_eq!(output.len(), STEPS + 1, "{answer}");
        }
    }
    elapsed
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The calculator as the gateway runs it: through the registry, schema checked.
async fn tool_time(n: usize) -> Duration {
    let registry = ToolRegistry::with_tools(toolbridge_tools::builtins::all()).unwrap();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let ctx = ToolContext::with_timeout(Duration::from_secs(5), 64 * 1024);
        let started = Instant::now();
        registry
            .execute("calculator", json!({"expression": "12345*6789"}), &ctx)
            .await
            .unwrap();
        times.push(started.elapsed());
    }
    median(&mut times)
}

async fn bench(servers: &Servers, full: bool) {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let gateway = format!("http://{}/v1/responses", servers.gateway);
    let direct = format!("{}/chat/completions", servers.upstream.base_url());
    let looped = json!({"model": "m", "input": "loop please", "store": false});
    let plain = json!({"model": "m", "input": "no loop", "store": false});
    let direct_body = json!({"model": "m", "messages": [{"role": "user", "content": "no loop"}]});
    let (warmup, measured) = if full { (WARMUP, MEASURED) } else { (0, SMOKE) };
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for round in 0..warmup + measured {
        let mut order = [0usize, 1, 2];
        order.rotate_left(round % 3);
        for kind in order {
            let elapsed = match kind {
                0 => timed(&client, &gateway, &looped).await,
                1 => timed(&client, &gateway, &plain).await,
                _ => timed(&client, &direct, &direct_body).await,
            };
            if round >= warmup {
                samples[kind].push(elapsed);
            }
        }
    }
    let [mut looped, mut plain, mut direct] = samples;
    let (looped, plain, direct) = (median(&mut looped), median(&mut plain), median(&mut direct));
    let tool = tool_time(if full { 1000 } else { 10 }).await;
    let per_step = (looped.saturating_sub(plain)) / STEPS as u32;
    let overhead = per_step.saturating_sub(direct).saturating_sub(tool);
    let plain_overhead = plain.saturating_sub(direct);
    println!("tool loop, {STEPS} steps, medians of {measured} requests each:");
    println!("  loop request      {:>9.1} µs", us(looped));
    println!("  plain request     {:>9.1} µs", us(plain));
    println!(
        "  direct upstream   {:>9.1} µs (one round trip)",
        us(direct)
    );
    println!("  calculator call   {:>9.1} µs (in process)", us(tool));
    println!("  one step in all   {:>9.1} µs", us(per_step));
    println!(
        "  loop overhead/step {:>8.1} µs = {:.2}x the plain request's own gateway overhead ({:.1} µs)",
        us(overhead),
        us(overhead) / us(plain_overhead).max(0.001),
        us(plain_overhead)
    );
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
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
