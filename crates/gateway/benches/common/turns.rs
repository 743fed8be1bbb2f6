//! What the session benches share: the gateway's CPU time, and reading a turn's answer (an SSE
//! body or WebSocket events) down to its completed response and its call.
//!
//! Included by path (`#[path = "common/turns.rs"] mod turns;`).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// CPU time of process `pid` so far, in nanoseconds: the sum over its threads.
pub fn cpu_nanos(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The completed response in an SSE body or a list of events.
pub fn completed(events: impl Iterator<Item = Value>) -> Value {
    events
        .filter(|e| e["type"] == "response.completed")
        .map(|mut e| e["response"].take())
        .last()
        .expect("a response.completed event")
}

pub fn sse_events(body: &str) -> impl Iterator<Item = Value> + '_ {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
}

/// The response's function call.
pub fn the_call(response: &Value) -> Value {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .cloned()
        .unwrap_or_else(|| panic!("no call in {response}"))
}

/// The socket's events up to the response's end: its completed response.
pub async fn events_until_done(socket: &mut Socket) -> Value {
    let mut events = Vec::new();
    loop {
        let message = socket.next().await.expect("open").expect("readable");
        let Message::Text(text) = message else {
            continue;
        };
        let event: Value = serde_json::from_str(&text).unwrap();
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        events.push(event);
        match kind.as_str() {
            "response.completed" => return completed(events.into_iter()),
            "response.failed" | "error" => panic!("the turn failed: {events:#?}"),
            _ => {}
        }
    }
}
