//! A Codex-shaped session of 20 tool calls over HTTP and over WebSocket, against the same
//! instant fake Chat Completions upstream, through the real `toolbridge` binary: the bytes the
//! client sends and the gateway's CPU time, per turn, and their ratios from one run.
//!
//! The session starts from Codex's recorded request (`common/codex.rs`: its input, tools and
//! settings; a generated equivalent without `../shared`). Every turn the model calls
//! `exec_command` (reporting usage, as providers do: `common/turns.rs`) and the client answers
//! with the call's output:
//! - over HTTP (`store: false`, as Codex sends it) each turn resends the whole history;
//! - over one socket each turn sends only its new item with `previous_response_id`, the rest
//!   of the request (tools, settings) as Codex's frames do, and the gateway expands it from
//!   the socket's chain.
//!
//! Client bytes are request bodies and frame payloads (HTTP headers and WebSocket framing are
//! left out of both). Gateway CPU is the child process's user and system time, read from
//! `/proc/PID/task/*/schedstat` (nanoseconds, every thread) around each session; the two
//! transports alternate, so drift in the machine's load touches both alike. The smoke run
//! checks that both transports gave the provider the same history.
//!
//! Under `cargo bench` (which passes `--bench`) each transport runs 10 sessions; under
//! `cargo test` one. Nothing is asserted on speed.

// Benches are test code: a broken setup should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/codex.rs"]
mod codex;
#[path = "common/turns.rs"]
mod turns;

use std::path::Path;
use std::sync::Arc;

use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use toolbridge_testkit::{FakeUpstream, GatewayProcess};
use turns::{codex_shape, completed, cpu_nanos, events_until_done, model, sse_events, the_call};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
/// Tool calls per session.
const CALLS: usize = 20;
const SESSIONS: usize = 10;
const SMOKE_SESSIONS: usize = 1;

/// What one session cost.
#[derive(Default, Clone, Copy)]
struct Cost {
    client_bytes: usize,
    cpu_nanos: u64,
    turns: usize,
}

impl Cost {
    fn add(&mut self, other: Cost) {
        self.client_bytes += other.client_bytes;
        self.cpu_nanos += other.cpu_nanos;
        self.turns += other.turns;
    }

    fn bytes_per_turn(&self) -> f64 {
        self.client_bytes as f64 / self.turns as f64
    }

    fn cpu_us_per_turn(&self) -> f64 {
        self.cpu_nanos as f64 / 1000.0 / self.turns as f64
    }
}

fn tool_output(call_id: &str, n: usize) -> Value {
    json!({"type": "function_call_output", "call_id": call_id,
        "output": format!("Chunk ID: {n}\nProcess exited with code 0\nOutput:\nCargo.toml\nsrc\n")})
}

async fn http_session(gateway: &GatewayProcess, client: &reqwest::Client) -> Cost {
    let (fields, mut history) = codex_shape(false);
    let mut cost = Cost::default();
    let before = cpu_nanos(gateway.pid());
    for n in 0..CALLS {
        let mut body = fields.clone();
        body.insert("input".to_owned(), Value::Array(history.clone()));
        let text = serde_json::to_string(&body).unwrap();
        cost.client_bytes += text.len();
        let answer = client
            .post(gateway.url("/v1/responses"))
            .header("content-type", "application/json")
            .body(text)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let call = the_call(&completed(sse_events(&answer)));
        history.push(call.clone());
        history.push(tool_output(call["call_id"].as_str().unwrap(), n));
    }
    cost.cpu_nanos = cpu_nanos(gateway.pid()) - before;
    cost.turns = CALLS;
    cost
}

async fn websocket_session(gateway: &GatewayProcess) -> Cost {
    let (fields, first) = codex_shape(false);
    let url = format!("ws://{}/v1/responses", gateway.addr());
    let mut cost = Cost::default();
    let before = cpu_nanos(gateway.pid());
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut input = first;
    let mut previous: Option<String> = None;
    for n in 0..CALLS {
        let mut frame = fields.clone();
        frame.insert("type".to_owned(), json!("response.create"));
        frame.insert("input".to_owned(), Value::Array(input));
        if let Some(id) = &previous {
            frame.insert("previous_response_id".to_owned(), json!(id));
        }
        let text = serde_json::to_string(&frame).unwrap();
        cost.client_bytes += text.len();
        socket.send(Message::text(text)).await.unwrap();
        let response = events_until_done(&mut socket).await;
        let call = the_call(&response);
        previous = Some(response["id"].as_str().unwrap().to_owned());
        input = vec![tool_output(call["call_id"].as_str().unwrap(), n)];
    }
    let _ = socket.close(None).await;
    cost.cpu_nanos = cpu_nanos(gateway.pid()) - before;
    cost.turns = CALLS;
    cost
}

/// The messages of the upstream's last request.
fn last_messages(upstream: &FakeUpstream) -> usize {
    upstream.last_body()["messages"].as_array().unwrap().len()
}

async fn bench(sessions: usize) {
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(model));
    let gateway = GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
            ("TOOLBRIDGE_UPSTREAM_API_KEY", "sk-ws-bench".to_owned()),
            ("TOOLBRIDGE_STORE_URL", "none".to_owned()),
        ],
    )
    .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    // Warm-up: one session each way (pools, allocator arenas, the tokenizer).
    http_session(&gateway, &client).await;
    let http_messages = last_messages(&upstream);
    websocket_session(&gateway).await;
    let ws_messages = last_messages(&upstream);
    assert_eq!(
        ws_messages, http_messages,
        "the provider gets the same history both ways"
    );
    let outputs = upstream.last_body()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["tool_call_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("call_turn_"))
        })
        .count();
    assert_eq!(
        outputs,
        CALLS - 1,
        "every earlier call's output reached the provider"
    );

    let (mut http, mut ws) = (Cost::default(), Cost::default());
    for _ in 0..sessions {
        http.add(http_session(&gateway, &client).await);
        ws.add(websocket_session(&gateway).await);
    }
    println!(
        "websocket_session: {sessions} session(s) of {CALLS} tool calls each way; the provider got {http_messages} messages on the last turn both ways"
    );
    for (name, cost) in [("http", &http), ("websocket", &ws)] {
        println!(
            "  {name:<9} client bytes per turn {:>9.0}   gateway CPU per turn {:>8.1} us",
            cost.bytes_per_turn(),
            cost.cpu_us_per_turn()
        );
    }
    println!(
        "  ratio websocket/http: client bytes {:.3}, gateway CPU {:.3}",
        ws.bytes_per_turn() / http.bytes_per_turn(),
        ws.cpu_us_per_turn() / http.cpu_us_per_turn()
    );
    gateway.kill().await;
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not, and gets only a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench(if full { SESSIONS } else { SMOKE_SESSIONS }));
}
