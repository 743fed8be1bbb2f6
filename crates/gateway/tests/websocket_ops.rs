//! Ring 3: the WebSocket mode's lanes and operations through the real binary, with a WebSocket
//! client (tokio-tungstenite) and the testkit's fake Chat Completions upstream:
//!
//! - `stream_id` lanes: two responses in flight on one socket, their events interleaved and
//!   each tagged with its lane, both complete; frames without a `stream_id` stay untagged; the
//!   per-connection bound on responses in flight, a frame on a busy lane waiting its turn;
//! - capture: each response on a socket is captured as an HTTP response is (its frame, the
//!   upstream body, the final response);
//! - graceful shutdown on SIGTERM: a response in flight finishes, then a close frame; an idle
//!   socket closes at once; past the grace period the response ends with `response.failed`
//!   (`server_shutting_down`), then a close frame.
//!
//! Every test is bounded in time so that nothing can hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use toolbridge_testkit::chat::text_stream;
use toolbridge_testkit::tempdir::TempDir;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
const TEST_LIMIT: Duration = Duration::from_secs(90);

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The gateway in front of `upstream`, with `extra` top-level config lines.
async fn start(upstream: &FakeUpstream, dir: &TempDir, extra: &str) -> GatewayProcess {
    start_storing(upstream, dir, extra, "none").await
}

/// [`start`] with its store at `store`.
async fn start_storing(
    upstream: &FakeUpstream,
    dir: &TempDir,
    extra: &str,
    store: &str,
) -> GatewayProcess {
    let config = dir.write(
        "toolbridge.toml",
        &format!(
            "{extra}\n\n[providers.up]\nbase_url = \"{}\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
            upstream.base_url()
        ),
    );
    GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_CONFIG", config.display().to_string()),
            ("RUST_LOG", "info".to_owned()),
            ("TOOLBRIDGE_STORE_URL", store.to_owned()),
        ],
    )
    .await
}

async fn connect(gateway: &GatewayProcess) -> Socket {
    let url = format!("ws://{}/v1/responses", gateway.addr());
    tokio_tungstenite::connect_async(url)
        .await
        .map(|(socket, _)| socket)
        .expect("the upgrade succeeds")
}

async fn send(socket: &mut Socket, frame: Value) {
    socket
        .send(Message::text(frame.to_string()))
        .await
        .expect("the frame goes out");
}

/// The next message that is not a ping or pong.
async fn next(socket: &mut Socket) -> Option<Message> {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("a message in time");
        match message {
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(message)) => return Some(message),
            Some(Err(_)) | None => return None,
        }
    }
}

/// The next event (a text frame as JSON).
async fn event(socket: &mut Socket) -> Value {
    match next(socket).await {
        Some(Message::Text(text)) => serde_json::from_str(&text).expect("one JSON event"),
        other => panic!("expected an event, got {other:?}"),
    }
}

fn is_terminal(event: &Value) -> bool {
    matches!(
        event["type"].as_str(),
        Some("response.completed" | "response.failed" | "response.incomplete" | "error")
    )
}

/// Events until `count` responses ended.
async fn until_ended(socket: &mut Socket, count: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut ended = 0;
    while ended < count {
        let event = event(socket).await;
        ended += usize::from(is_terminal(&event));
        out.push(event);
    }
    out
}

/// The close frame's code, once the socket closes.
async fn closed(socket: &mut Socket) -> u16 {
    match next(socket).await {
        Some(Message::Close(Some(frame))) => frame.code.into(),
        other => panic!("expected a close frame, got {other:?}"),
    }
}

fn create(text: &str, stream_id: Option<&str>) -> Value {
    let mut frame = json!({
        "type": "response.create",
        "model": "gpt-4o-mini",
        "store": false,
        "input": [{"type": "message", "role": "user", "content": text}],
    });
    if let Some(id) = stream_id {
        frame["stream_id"] = json!(id);
    }
    frame
}

/// The text the upstream streams for a request: `slow …` answers word by word, 150 ms apart;
/// anything else at once, echoing it.
fn answer(request: &Recorded) -> Option<Reply> {
    let asked = request.body["messages"]
        .as_array()?
        .last()?
        .get("content")?
        .as_str()?
        .to_owned();
    let pieces: Vec<String> = if asked.starts_with("slow") {
        let words = [
            "one", " two", " three", " four", " five", " six", " seven", " eight",
        ];
        text_stream(&words, "stop")
    } else {
        text_stream(&[&format!("echo: {asked}")], "stop")
    }
    .iter()
    .map(|chunk| format!("data: {chunk}\n\n"))
    .chain(std::iter::once("data: [DONE]\n\n".to_owned()))
    .collect();
    let pause = if asked.starts_with("slow") { 150 } else { 0 };
    Some(Reply::Stream {
        pieces,
        pause: Duration::from_millis(pause),
    })
}

/// The joined text deltas of `events`.
fn text_of(events: &[&Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

/// The events of `lane` (`None`: untagged ones).
fn lane<'a>(events: &'a [Value], lane: Option<&str>) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.get("stream_id").and_then(Value::as_str) == lane)
        .collect()
}

#[tokio::test]
async fn two_lanes_stream_side_by_side_each_event_tagged_and_both_complete() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        upstream.set_gate(Arc::new(answer));
        let dir = TempDir::new("ws-lanes");
        let gateway = start(&upstream, &dir, "").await;
        let mut socket = connect(&gateway).await;

        send(&mut socket, create("slow counting", Some("a"))).await;
        send(&mut socket, create("quick one", Some("b"))).await;
        send(&mut socket, create("untagged", None)).await;
        let events = until_ended(&mut socket, 3).await;

        let (a, b, plain) = (
            lane(&events, Some("a")),
            lane(&events, Some("b")),
            lane(&events, None),
        );
        assert_eq!(a.len() + b.len() + plain.len(), events.len(), "{events:#?}");
        for (events, text) in [
            (&a, "one two three four five six seven eight"),
            (&b, "echo: quick one"),
            (&plain, "echo: untagged"),
        ] {
            assert_eq!(events[0]["type"], "response.created", "{events:#?}");
            assert_eq!(events.last().unwrap()["type"], "response.completed");
            assert_eq!(text_of(events), text);
            let output = &events.last().unwrap()["response"]["output"][0]["content"][0]["text"];
            assert_eq!(output, text);
        }
        // Side by side: the quick lanes ended while the slow one was still streaming.
        let slow_end = events
            .iter()
            .position(|e| e["stream_id"] == "a" && is_terminal(e))
            .unwrap();
        let quick_end = events
            .iter()
            .position(|e| e["stream_id"] == "b" && is_terminal(e))
            .unwrap();
        assert!(quick_end < slow_end, "{events:#?}");
        assert_eq!(upstream.requests().len(), 3);

        // A lane continues a response another lane made: `previous_response_id` is the chain.
        let b_id = b.last().unwrap()["response"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut fork = create("after b", Some("c"));
        fork["previous_response_id"] = json!(b_id);
        send(&mut socket, fork).await;
        let forked = until_ended(&mut socket, 1).await;
        assert!(forked.iter().all(|e| e["stream_id"] == "c"), "{forked:#?}");
        let sent: Vec<String> = upstream.last_body()["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(sent, ["quick one", "echo: quick one", "after b"]);
    })
    .await
    .expect("the test ran past its time limit");
}

#[tokio::test]
async fn a_socket_runs_at_most_eight_lanes_and_a_busy_lane_queues_its_frames() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        upstream.set_gate(Arc::new(answer));
        let dir = TempDir::new("ws-lane-bound");
        let gateway = start(&upstream, &dir, "").await;
        let mut socket = connect(&gateway).await;

        for n in 0..8 {
            send(&mut socket, create("slow", Some(&format!("s{n}")))).await;
        }
        // The ninth lane is refused on its lane; a second frame on a busy lane waits its turn.
        send(&mut socket, create("refused", Some("s8"))).await;
        send(&mut socket, create("queued", Some("s0"))).await;
        let events = until_ended(&mut socket, 10).await;

        let refused = lane(&events, Some("s8"));
        assert_eq!(refused.len(), 1, "{refused:#?}");
        assert_eq!(refused[0]["type"], "error");
        assert_eq!(refused[0]["error"]["code"], "too_many_streams");
        let s0 = lane(&events, Some("s0"));
        let ends: Vec<&Value> = s0.iter().copied().filter(|e| is_terminal(e)).collect();
        assert_eq!(ends.len(), 2);
        assert_eq!(
            text_of(&s0),
            "one two three four five six seven eightecho: queued"
        );
        for n in 1..8 {
            let events = lane(&events, Some(&format!("s{n}")));
            assert_eq!(events.last().unwrap()["type"], "response.completed");
        }
        // The refused frame never reached the upstream; the queued one did, after its lane's
        // first response.
        assert_eq!(upstream.requests().len(), 9);
        assert!(!upstream.last_body().to_string().contains("refused"));

        // A bad `stream_id` is an error event with its param, and the socket stays usable.
        send(
            &mut socket,
            json!({"type": "response.create", "stream_id": 7}),
        )
        .await;
        let bad = event(&mut socket).await;
        assert_eq!(bad["error"]["code"], "invalid_stream_id");
        assert_eq!(bad["error"]["param"], "stream_id");
        send(&mut socket, create("still here", None)).await;
        let fine = until_ended(&mut socket, 1).await;
        assert_eq!(fine.last().unwrap()["type"], "response.completed");
    })
    .await
    .expect("the test ran past its time limit");
}

/// The captures in the store at `url`, once `count` are written (up to 10 s).
async fn captures(url: &str, count: usize) -> Vec<Value> {
    let pool = sqlx::SqlitePool::connect(url).await.unwrap();
    let mut bodies = Vec::new();
    for _ in 0..100 {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT body FROM toolbridge_captures")
            .fetch_all(&pool)
            .await
            .unwrap();
        bodies = rows
            .into_iter()
            .map(|(body,)| serde_json::from_str(&body).unwrap())
            .collect();
        if bodies.len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bodies
}

#[tokio::test]
async fn each_response_on_a_socket_is_captured_as_an_http_response_is() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        upstream.set_gate(Arc::new(answer));
        let dir = TempDir::new("ws-capture");
        let store = format!("sqlite://{}", dir.0.join("store.db").display());
        let gateway = start_storing(&upstream, &dir, "[capture]\nenabled = true\n", &store).await;
        let mut socket = connect(&gateway).await;
        let mut warm = create("", None);
        warm["input"] = json!([]);
        warm["generate"] = json!(false);
        send(&mut socket, warm).await;
        let warmed = until_ended(&mut socket, 1).await;
        send(
            &mut socket,
            create("captured over a socket", Some("lane-1")),
        )
        .await;
        let answered = until_ended(&mut socket, 1).await;
        let id = answered.last().unwrap()["response"]["id"].clone();

        let records = captures(&store, 2).await;
        assert_eq!(
            records.len(),
            2,
            "the upgrade itself is not captured: {records:#?}"
        );
        let turn = records
            .iter()
            .find(|r| r["response"]["id"] == id)
            .unwrap_or_else(|| panic!("no capture of {id}: {records:#?}\n{}", gateway.stderr()));
        assert_eq!(turn["status"], 200);
        assert_eq!(turn["request"]["stream_id"], "lane-1");
        assert_eq!(
            turn["request"]["input"][0]["content"],
            "captured over a socket"
        );
        assert_eq!(
            turn["upstream"][0]["body"]["messages"][0]["content"],
            "captured over a socket"
        );
        assert_eq!(turn["response"]["status"], "completed");
        let prewarm = records.iter().find(|r| r["response"]["id"] != id).unwrap();
        assert_eq!(
            prewarm["response"]["id"],
            warmed.last().unwrap()["response"]["id"]
        );
        assert_eq!(
            prewarm["upstream"],
            json!([]),
            "a prewarm calls no upstream"
        );
        assert_ne!(prewarm["request_id"], turn["request_id"]);
        gateway.kill().await;
    })
    .await
    .expect("the test ran past its time limit");
}

fn terminate(gateway: &GatewayProcess) {
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(gateway.pid().to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM failed");
}

/// Reads `socket` until its first text delta.
async fn until_first_delta(socket: &mut Socket) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let event = event(socket).await;
        let delta = event["type"] == "response.output_text.delta";
        out.push(event);
        if delta {
            return out;
        }
    }
}

#[tokio::test]
async fn at_sigterm_a_streaming_response_finishes_then_closes_and_an_idle_socket_closes_at_once() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        upstream.set_gate(Arc::new(answer));
        let dir = TempDir::new("ws-shutdown");
        let mut gateway = start(&upstream, &dir, "shutdown_grace_secs = 30").await;
        let mut busy = connect(&gateway).await;
        let mut idle = connect(&gateway).await;
        send(&mut idle, create("before", None)).await;
        until_ended(&mut idle, 1).await;

        send(&mut busy, create("slow stream", None)).await;
        let mut events = until_first_delta(&mut busy).await;
        terminate(&gateway);

        // The idle socket closes while the other response is still streaming (its upstream
        // has a second left): not when the 30-second grace period ends.
        assert_eq!(closed(&mut idle).await, 1001);
        events.extend(until_ended(&mut busy, 1).await);
        let done = events.last().unwrap();
        assert_eq!(done["type"], "response.completed", "{events:#?}");
        assert_eq!(
            text_of(&events.iter().collect::<Vec<_>>()),
            "one two three four five six seven eight"
        );
        assert_eq!(closed(&mut busy).await, 1001);
        let status = gateway.wait(Duration::from_secs(20)).await;
        assert!(status.success(), "{status}\n{}", gateway.stderr());
    })
    .await
    .expect("the test ran past its time limit");
}

#[tokio::test]
async fn past_the_grace_period_a_response_on_a_socket_ends_failed_then_the_socket_closes() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        // Forty words, 150 ms apart: six seconds, well past a one-second grace period.
        upstream.set_gate(Arc::new(|_: &Recorded| {
            let words: Vec<String> = (0..40).map(|n| format!(" w{n}")).collect();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            Some(Reply::Stream {
                pieces: text_stream(&words, "stop")
                    .iter()
                    .map(|chunk| format!("data: {chunk}\n\n"))
                    .collect(),
                pause: Duration::from_millis(150),
            })
        }));
        let dir = TempDir::new("ws-shutdown-grace");
        let mut gateway = start(&upstream, &dir, "shutdown_grace_secs = 1").await;
        let mut socket = connect(&gateway).await;
        send(&mut socket, create("long", Some("lane"))).await;
        let mut events = until_first_delta(&mut socket).await;
        terminate(&gateway);
        events.extend(until_ended(&mut socket, 1).await);
        let ended = events.last().unwrap();
        assert_eq!(ended["type"], "response.failed", "{events:#?}");
        assert_eq!(ended["stream_id"], "lane");
        assert_eq!(
            ended["response"]["error"]["toolbridge_code"], "server_shutting_down",
            "{ended}"
        );
        assert_eq!(closed(&mut socket).await, 1001);
        let status = gateway.wait(Duration::from_secs(20)).await;
        assert!(status.success(), "{status}\n{}", gateway.stderr());
    })
    .await
    .expect("the test ran past its time limit");
}
