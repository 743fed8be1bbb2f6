//! Issue 41: a session resending its whole history over HTTP (Codex's way) has the items it
//! resends taken from its last request (`ingress/resent.rs`) instead of parsed again. The
//! provider must get the same body either way (its prompt cache relies on the prefix staying
//! the same bytes), and a bad item must be refused with its place in the client's body.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::net::SocketAddr;

use common::Served;
use serde_json::{Value, json};
use toolbridge_testkit::chat::completion;
use toolbridge_testkit::{FakeUpstream, Reply};

/// The body of turn `turn` (0-based): Codex's field order, `input` before `prompt_cache_key`,
/// the history grown by a call and its 2 KB output per turn.
fn turn_body(turn: usize) -> Value {
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Use the tools.\n".repeat(1200)}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the \"build\"."}]}),
    ];
    for n in 0..turn {
        input.push(
            json!({"type": "function_call", "call_id": format!("call_{n}"), "name": "exec_command",
            "arguments": "{\"cmd\":\"cargo build\"}"}),
        );
        input.push(
            json!({"type": "function_call_output", "call_id": format!("call_{n}"),
            "output": format!("line {n}: error[E0308]: mismatched types\n").repeat(50)}),
        );
    }
    json!({
        "model": "m",
        "stream": false,
        "input": input,
        "tools": [{"type": "function", "name": "exec_command", "description": "Runs a command.",
                   "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
        "store": false,
        "prompt_cache_key": "conversation-7",
    })
}

/// The upstream's last body, as JSON text in its own key order.
fn last_sent(upstream: &FakeUpstream) -> String {
    serde_json::to_string(&upstream.last_body()).unwrap()
}

/// `toolbridge_resent_inputs_total` of `outcome`.
async fn resent(addr: SocketAddr, outcome: &str) -> f64 {
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("toolbridge_resent_inputs_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test]
async fn a_resent_history_sends_what_a_whole_parse_sends() {
    let upstream = FakeUpstream::start().await;
    upstream.set_fallback(Reply::json(completion("Done.", "stop")));
    let session = Served::routing_to(&upstream, "none").await;
    let resumed = resent(session.addr, "resumed").await;
    let mut sent = Vec::new();
    for turn in 0..4 {
        let (status, body) = session.post_json(&turn_body(turn)).await;
        assert_eq!(status, 200, "turn {turn}: {body}");
        sent.push(last_sent(&upstream));
    }
    // Turns 1 to 3 took their history from the turn before.
    assert_eq!(resent(session.addr, "resumed").await - resumed, 3.0);
    // A gateway holding nothing parses each body whole: the provider gets the same bytes.
    for (turn, from_held) in sent.iter().enumerate() {
        let fresh = Served::routing_to(&upstream, "none").await;
        let (status, body) = fresh.post_json(&turn_body(turn)).await;
        assert_eq!(status, 200, "turn {turn}: {body}");
        assert_eq!(&last_sent(&upstream), from_held, "turn {turn}");
    }

    // A bad new item is refused with its place in the whole body, as a whole parse says it.
    let mut broken = turn_body(4);
    broken["input"][9]["call_id"] = json!(7);
    let (status, held) = session.post_json(&broken).await;
    assert_eq!(status, 400, "{held}");
    assert_eq!(held["error"]["param"], "input[9].call_id", "{held}");
    let fresh = Served::routing_to(&upstream, "none").await;
    let (_, whole) = fresh.post_json(&broken).await;
    assert_eq!(held, whole);

    // An edited history (the first answer rewritten) is read for what it is.
    let mut edited = turn_body(3);
    edited["input"][3]["output"] = json!("rewritten");
    let (status, body) = session.post_json(&edited).await;
    assert_eq!(status, 200, "{body}");
    let from_session = last_sent(&upstream);
    let (status, _) = fresh.post_json(&edited).await;
    assert_eq!(status, 200);
    assert_eq!(last_sent(&upstream), from_session);
    assert!(from_session.contains("rewritten"));
}
