//! Ring 2: no WebSocket client can starve the others. Sockets are counted under caps of their
//! own (per key, per tenant, in all) instead of holding HTTP connection slots, so a thousand
//! idle sockets from one key leave `/healthz` and another key's request unhindered; a socket
//! with nothing to do closes after the idle timeout; the lifetime is configurable; one key's
//! responses in flight across its sockets are capped.
//!
//! Every wait is bounded; a bound is how long a test waits for what must happen, never a
//! measurement.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::time::Duration;

use common::Harness;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use toolbridge_gateway::hash_secret;
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::{chunk, completion};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long a test waits for what must happen.
const BOUND: Duration = Duration::from_secs(10);

fn secret(name: &str) -> String {
    format!("tb-fair-{name}")
}

/// A gateway with keys `a` and `b` (tenants of their own) and `server` as its `[server]`.
async fn gateway(server: &str) -> Harness {
    let server = server.to_owned();
    Harness::with_toml(move |url| {
        let mut text = String::new();
        for name in ["a", "b"] {
            text.push_str(&format!(
                "[[keys]]\nname = \"{name}\"\nhash = \"{}\"\n",
                hash_secret(&secret(name))
            ));
        }
        text.push_str(&format!(
            "[server]\n{server}\n[providers.up]\nbase_url = \"{url}\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        ));
        text
    })
    .await
}

/// Opens a socket as key `key`; the HTTP status of a refused upgrade otherwise.
async fn connect(h: &Harness, key: &str) -> Result<Socket, u16> {
    let mut request = format!("ws://{}/v1/responses", h.addr)
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", secret(key)).parse().unwrap(),
    );
    match tokio::time::timeout(BOUND, tokio_tungstenite::connect_async(request))
        .await
        .expect("the upgrade is answered in time")
    {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(e) => panic!("the upgrade failed: {e}"),
    }
}

fn create(text: &str) -> Message {
    Message::text(
        json!({
            "type": "response.create", "model": "m", "store": false, "stream": true,
            "input": text,
        })
        .to_string(),
    )
}

/// The next JSON event on `socket`, or the close frame's code.
async fn next(socket: &mut Socket) -> Result<Value, u16> {
    loop {
        let message = tokio::time::timeout(BOUND, socket.next())
            .await
            .expect("a frame in time")
            .expect("the socket is not dropped without a close frame")
            .expect("a readable frame");
        match message {
            Message::Text(text) => return Ok(serde_json::from_str(&text).unwrap()),
            Message::Close(frame) => return Err(frame.map_or(0, |f| u16::from(f.code))),
            _ => {}
        }
    }
}

/// The events up to a terminal one (or an `error`).
async fn terminal(socket: &mut Socket) -> Value {
    loop {
        let event = next(socket).await.expect("an event, not a close");
        if matches!(
            event["type"].as_str(),
            Some("response.completed" | "response.failed" | "response.incomplete" | "error")
        ) {
            return event;
        }
    }
}

fn slow_answer(text: &str, pause: Duration) -> Reply {
    Reply::Delayed {
        pause,
        reply: Box::new(Reply::sse(vec![
            chunk(json!({"content": text}), None),
            chunk(json!({}), Some("stop")),
        ])),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_sockets_of_one_key_keep_neither_healthz_nor_another_key_waiting() {
    // Before, each socket kept its HTTP connection slot: eight idle sockets filled
    // `max_connections` and `/healthz` waited in the listen backlog.
    let h = gateway("max_connections = 8\nmax_websockets_per_key = 4\n").await;
    let mut open = Vec::new();
    let mut refused = 0;
    for _ in 0..1000 {
        match connect(&h, "a").await {
            Ok(socket) => open.push(socket),
            Err(status) => {
                assert_eq!(status, 429);
                refused += 1;
            }
        }
    }
    assert_eq!(open.len(), 4);
    assert_eq!(refused, 996);

    let health = tokio::time::timeout(BOUND, h.client.get(h.url("/healthz")).send())
        .await
        .expect("/healthz answers while the sockets are open")
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    h.upstream.push(Reply::json(completion("Hi.", "stop")));
    let answer = tokio::time::timeout(
        BOUND,
        h.client
            .post(h.url("/v1/responses"))
            .bearer_auth(secret("b"))
            .json(&json!({"model": "m", "input": "x"}))
            .send(),
    )
    .await
    .expect("another key's request is answered in time")
    .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    // Another key has caps of its own.
    let mut other = connect(&h, "b").await.expect("key b opens a socket");

    // A refusal is OpenAI's JSON over plain HTTP, and a closed socket gives its place back.
    let refusal = h
        .client
        .get(h.url("/v1/responses"))
        .bearer_auth(secret("a"))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(refusal.status().as_u16(), 429);
    assert!(refusal.headers().contains_key("retry-after"));
    let body: Value = refusal.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_websockets_per_key"),
        "{body}"
    );
    let mut closing = open.pop().unwrap();
    closing.close(None).await.unwrap();
    let reopened = tokio::time::timeout(BOUND, async {
        loop {
            if let Ok(socket) = connect(&h, "a").await {
                return socket;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a closed socket's place is given back");
    drop(reopened);
    other.close(None).await.unwrap();
}

#[tokio::test]
async fn a_socket_with_nothing_to_do_closes_after_the_idle_timeout_and_a_busy_one_does_not() {
    let h = gateway("websocket_idle_timeout_secs = 1\n").await;
    let mut socket = connect(&h, "a").await.unwrap();
    // A response longer than the idle timeout is not cut.
    h.upstream
        .push(slow_answer("Slow.", Duration::from_millis(1500)));
    socket.send(create("x")).await.unwrap();
    let done = terminal(&mut socket).await;
    assert_eq!(done["type"], "response.completed", "{done}");
    // Then nothing: the socket closes as going away, with no error event.
    let started = tokio::time::Instant::now();
    assert_eq!(next(&mut socket).await, Err(1001));
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn the_socket_lifetime_is_configurable() {
    let h = gateway("websocket_max_lifetime_secs = 1\n").await;
    let mut socket = connect(&h, "a").await.unwrap();
    let event = next(&mut socket)
        .await
        .expect("the limit's error event first");
    assert_eq!(event["error"]["code"], "websocket_connection_limit_reached");
    assert!(
        event["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit of 1 s"),
        "{event}"
    );
    assert_eq!(next(&mut socket).await, Err(1001));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_keys_responses_in_flight_are_capped_across_its_sockets() {
    let upstream_pause = Duration::from_millis(1500);
    let h = gateway("max_websocket_responses_per_key = 1\n").await;
    let mut first = connect(&h, "a").await.unwrap();
    let mut second = connect(&h, "a").await.unwrap();
    let mut other = connect(&h, "b").await.unwrap();
    h.upstream
        .set_fallback(slow_answer("Done.", upstream_pause));

    first.send(create("one")).await.unwrap();
    // The first response is in flight once its start arrives.
    let started = next(&mut first).await.unwrap();
    assert_eq!(started["type"], "response.created", "{started}");
    second.send(create("two")).await.unwrap();
    let refused = terminal(&mut second).await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["status"], 429, "{refused}");
    assert_eq!(refused["error"]["code"], "rate_limit_exceeded", "{refused}");
    // Another key is not held up; the refused socket stays usable once the first ends.
    other.send(create("three")).await.unwrap();
    assert_eq!(terminal(&mut other).await["type"], "response.completed");
    assert_eq!(terminal(&mut first).await["type"], "response.completed");
    second.send(create("two again")).await.unwrap();
    assert_eq!(terminal(&mut second).await["type"], "response.completed");
}
