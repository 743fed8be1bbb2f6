//! A Codex-shaped session of 40 turns through the real `toolbridge` binary, against an instant
//! fake Chat Completions upstream: the gateway's CPU for turn 2, 10, 20 and 40, three ways.
//!
//! The session starts from Codex's recorded request (`common/codex.rs`); every turn the model
//! calls `exec_command` and the client answers with about 5 KB of output, so the history grows
//! past 200 KB by turn 40. The three ways:
//! - `http`: the whole history resent each turn (`store: false`, what Codex does over HTTP);
//! - `chain`: each turn stored and continued with `previous_response_id` over HTTP (only its new
//!   item sent; the gateway expands the chain, `stored/recent.rs`);
//! - `websocket`: one socket, each turn's new item with `previous_response_id` (the socket's
//!   own chain).
//!
//! A turn's cost is the gateway process's CPU time around it (`/proc/PID/task/*/schedstat`,
//! nanoseconds, every thread), or with `TOOLBRIDGE_BENCH_COUNT=instructions` its instructions
//! (the binary runs under valgrind's callgrind, zeroed before the turn and dumped after it:
//! repeatable on a busy machine), averaged over the sessions; the figure that matters is the
//! ratio turn 40 ÷ turn 2 within one run (a turn should cost what it adds, not its history).
//! `TOOLBRIDGE_BENCH_BIN` names another binary to measure (a release build, with this bench
//! built quickly in debug). Under `cargo bench` (`--bench`) each way runs 5 sessions; under `cargo test` one, and the
//! smoke run checks that the three ways gave the provider the same history. Nothing is
//! asserted on speed.

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
use turns::{Counter, codex_shape, completed, events_until_done, model, sse_events, the_call};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
const TURNS: usize = 40;
/// The turns reported (1-based).
const REPORTED: [usize; 4] = [2, 10, 20, 40];
const SESSIONS: usize = 5;

/// About 5 KB of command output.
fn tool_output(call_id: &str, n: usize) -> Value {
    let line = format!("line of src/lib.rs in turn {n}: pub fn item_{n}() -> usize {{ {n} }}\n");
    json!({"type": "function_call_output", "call_id": call_id,
        "output": format!("Chunk ID: {n}\nProcess exited with code 0\nOutput:\n{}", line.repeat(5000 / line.len()))})
}

/// Each reported turn's cost (the others 0): CPU nanoseconds or instructions ([`Counter`]).
type Turns = Vec<u64>;

/// Runs `turn` (one request and its answer), counting it when it is a reported turn `n` (0-based).
async fn counted<T>(
    counter: &Counter,
    gateway: &GatewayProcess,
    n: usize,
    turns: &mut Turns,
    turn: impl std::future::Future<Output = T>,
) -> T {
    if !REPORTED.contains(&(n + 1)) {
        turns.push(0);
        return turn.await;
    }
    let before = counter.before(gateway.pid());
    let out = turn.await;
    turns.push(counter.after(gateway.pid(), before));
    out
}

async fn post(gateway: &GatewayProcess, client: &reqwest::Client, body: &Value) -> Value {
    let answer = client
        .post(gateway.url("/v1/responses"))
        .header("content-type", "application/json")
        .body(serde_json::to_string(body).unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    completed(sse_events(&answer))
}

async fn http_session(
    counter: &Counter,
    gateway: &GatewayProcess,
    client: &reqwest::Client,
) -> Turns {
    let (fields, mut history) = codex_shape(false);
    let mut turns = Vec::with_capacity(TURNS);
    for n in 0..TURNS {
        let mut body = fields.clone();
        body.insert("input".to_owned(), Value::Array(history.clone()));
        let body = Value::Object(body);
        let response = counted(
            counter,
            gateway,
            n,
            &mut turns,
            post(gateway, client, &body),
        )
        .await;
        let call = the_call(&response);
        history.push(call.clone());
        history.push(tool_output(call["call_id"].as_str().unwrap(), n));
    }
    turns
}

async fn chain_session(
    counter: &Counter,
    gateway: &GatewayProcess,
    client: &reqwest::Client,
) -> Turns {
    let (fields, mut input) = codex_shape(true);
    let mut previous: Option<String> = None;
    let mut turns = Vec::with_capacity(TURNS);
    for n in 0..TURNS {
        let mut body = fields.clone();
        body.insert("input".to_owned(), Value::Array(input));
        if let Some(id) = &previous {
            body.insert("previous_response_id".to_owned(), json!(id));
        }
        let body = Value::Object(body);
        let response = counted(
            counter,
            gateway,
            n,
            &mut turns,
            post(gateway, client, &body),
        )
        .await;
        let call = the_call(&response);
        previous = Some(response["id"].as_str().unwrap().to_owned());
        input = vec![tool_output(call["call_id"].as_str().unwrap(), n)];
    }
    turns
}

async fn websocket_session(counter: &Counter, gateway: &GatewayProcess) -> Turns {
    let (fields, first) = codex_shape(false);
    let url = format!("ws://{}/v1/responses", gateway.addr());
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut input = first;
    let mut previous: Option<String> = None;
    let mut turns = Vec::with_capacity(TURNS);
    for n in 0..TURNS {
        let mut frame = fields.clone();
        frame.insert("type".to_owned(), json!("response.create"));
        frame.insert("input".to_owned(), Value::Array(input));
        if let Some(id) = &previous {
            frame.insert("previous_response_id".to_owned(), json!(id));
        }
        let text = serde_json::to_string(&frame).unwrap();
        let response = counted(counter, gateway, n, &mut turns, async {
            socket.send(Message::text(text)).await.unwrap();
            events_until_done(&mut socket).await
        })
        .await;
        let call = the_call(&response);
        previous = Some(response["id"].as_str().unwrap().to_owned());
        input = vec![tool_output(call["call_id"].as_str().unwrap(), n)];
    }
    let _ = socket.close(None).await;
    turns
}

/// The upstream's last request: its messages, and its size.
fn last_request(upstream: &FakeUpstream) -> (Vec<Value>, usize) {
    let body = upstream.last_body();
    let size = serde_json::to_string(&body).unwrap().len();
    (body["messages"].as_array().unwrap().clone(), size)
}

/// Adds each turn's figure of `session` to `sums`.
fn add(sums: &mut [u64], session: &Turns) {
    for (sum, turn) in sums.iter_mut().zip(session) {
        *sum += turn;
    }
}

async fn bench(sessions: usize) {
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(model));
    // A release binary built apart can be measured with a quick debug build of this bench.
    let bin = std::env::var("TOOLBRIDGE_BENCH_BIN").unwrap_or_else(|_| BIN.to_owned());
    let counter = Counter::from_env();
    let gateway = counter
        .start(
            Path::new(&bin),
            &[
                ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
                ("TOOLBRIDGE_UPSTREAM_API_KEY", "sk-session-bench".to_owned()),
                ("TOOLBRIDGE_STORE_URL", toolbridge_testkit::temp_store_url()),
            ],
        )
        .await;
    // Instructions repeat within about 1 %: one session is enough.
    let sessions = match counter {
        Counter::Instructions { .. } => 1,
        Counter::Cpu => sessions,
    };
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    // Warm-up, one session each way; the provider gets the same history each way.
    http_session(&Counter::Cpu, &gateway, &client).await;
    let (http_messages, size) = last_request(&upstream);
    chain_session(&Counter::Cpu, &gateway, &client).await;
    let (chain_messages, _) = last_request(&upstream);
    websocket_session(&Counter::Cpu, &gateway).await;
    let (ws_messages, _) = last_request(&upstream);
    assert_eq!(
        chain_messages, http_messages,
        "a chain sends the same history"
    );
    assert_eq!(
        ws_messages, http_messages,
        "a socket sends the same history"
    );
    assert!(size > 200_000, "the last turn's history is {size} bytes");

    let mut sums = [vec![0; TURNS], vec![0; TURNS], vec![0; TURNS]];
    for _ in 0..sessions {
        add(
            &mut sums[0],
            &http_session(&counter, &gateway, &client).await,
        );
        add(
            &mut sums[1],
            &chain_session(&counter, &gateway, &client).await,
        );
        add(&mut sums[2], &websocket_session(&counter, &gateway).await);
    }
    println!(
        "session: {sessions} session(s) of {TURNS} turns each way; the last upstream request is {size} bytes; {}",
        counter.unit()
    );
    for (name, sum) in ["http", "chain", "websocket"].iter().zip(&sums) {
        let us = |turn: usize| counter.per_turn(sum[turn - 1], sessions);
        let figures: Vec<String> = REPORTED
            .iter()
            .map(|&t| format!("turn {t} {:>8.1}", us(t)))
            .collect();
        println!(
            "  {name:<9} {}   turn 40 / turn 2: {:.2}",
            figures.join("  "),
            us(40) / us(2)
        );
    }
    gateway.kill().await;
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not, and gets only a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench(if full { SESSIONS } else { 1 }));
}
