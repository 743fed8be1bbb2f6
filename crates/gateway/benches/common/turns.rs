//! What the session benches share: the Codex-shaped session (the recorded request and a model
//! that calls a tool every turn), the gateway's CPU time, and reading a turn's answer (an SSE
//! body or WebSocket events) down to its completed response and its call.
//!
//! Included by path (`#[path = "common/turns.rs"] mod turns;`, beside `mod codex;`).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use toolbridge_testkit::chat::{chunk, usage_chunk};
use toolbridge_testkit::{Recorded, Reply};

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The model: one `exec_command` call per turn, streamed, its id new each turn.
pub fn model(request: &Recorded) -> Option<Reply> {
    let turn = request.body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    Some(Reply::sse(vec![
        chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_turn_{turn}"),
                "type": "function", "function": {"name": "exec_command", "arguments": "{\"cmd\":\"cat src/lib.rs\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        // Providers report usage (asked for with `stream_options`); without it the gateway
        // counts the tokens itself, over the whole history.
        usage_chunk(1000 + 100 * turn as u64, 20),
    ]))
}

/// The recorded request's fields other than its input, and its input.
pub fn codex_shape(stored: bool) -> (serde_json::Map<String, Value>, Vec<Value>) {
    static CODEX: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let mut request: serde_json::Map<String, Value> =
        serde_json::from_slice(CODEX.get_or_init(crate::codex::codex_request))
            .expect("the Codex request is JSON");
    let input = match request.remove("input") {
        Some(Value::Array(items)) => items,
        other => panic!("the Codex request's input is not a list: {other:?}"),
    };
    request.remove("previous_response_id");
    request.insert("store".to_owned(), json!(stored));
    request.insert("stream".to_owned(), json!(true));
    (request, input)
}

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
