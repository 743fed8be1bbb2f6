//! The session side channel over real HTTP: `GET /v1/sessions/{id}/events` on 127.0.0.1:0, with
//! events published through the public bus API (as the tool loop will), in process and across
//! two gateways sharing Redis (127.0.0.1:6379).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_gateway::{AppState, app};
use toolbridge_gateway::{EventBus, ResponseInfo, SessionEvent, ToolInfo};
use toolbridge_store::Tenant;

/// The tenant of the test gateway's one key (`api_keys[0]`, its own tenant).
fn gw_tenant() -> Tenant {
    Tenant::named("api_keys[0]")
}

/// A safety net against a hung test, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(20);

struct Gateway {
    addr: SocketAddr,
    bus: EventBus,
    _force: tokio::sync::watch::Sender<bool>,
}

impl Gateway {
    /// A gateway with `sessions` as its `[sessions]` section and the gateway key `gw-key`.
    async fn start(sessions: &str) -> Self {
        let text = format!(
            r#"
api_keys = ["gw-key"]
keepalive_secs = 1

[sessions]
{sessions}

[providers.up]
base_url = "http://127.0.0.1:9/v1"

[[routes]]
model = "*"
provider = "up"
"#
        );
        let file: FileConfig = toml::from_str(&text).expect("test config parses");
        let env = |k: &str| match k {
            "TOOLBRIDGE_STORE_URL" => Some("none".to_owned()),
            "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
            _ => None,
        };
        let config = Config::from_file(file, &env).expect("test config is valid");
        let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (state, force) = AppState::new(config).await.expect("state");
        let bus = state.sessions().clone();
        tokio::spawn(async move { axum::serve(listener, app(state)).await });
        Self {
            addr,
            bus,
            _force: force,
        }
    }

    fn url(&self, session: &str) -> String {
        format!("http://{}/v1/sessions/{session}/events", self.addr)
    }

    /// Subscribes over HTTP; returns once the 200 and its headers arrived.
    async fn subscribe(&self, session: &str) -> SseReader {
        let response = reqwest::Client::new()
            .get(self.url(session))
            .bearer_auth("gw-key")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "subscribe {session}");
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        SseReader {
            body: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }
}

/// Reads SSE frames one at a time, skipping comments (keep-alives).
struct SseReader {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl SseReader {
    /// The next `(event name, data)`, or `None` when the stream ended.
    async fn next(&mut self) -> Option<(String, Value)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let mut name = None;
                let mut data = String::new();
                for line in frame.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                match name {
                    Some(name) => return Some((name, serde_json::from_str(&data).unwrap())),
                    None => continue, // a comment
                }
            }
            let chunk = tokio::time::timeout(PATIENCE, self.body.next())
                .await
                .expect("the event stream stalled");
            match chunk {
                Some(bytes) => self
                    .buffer
                    .push_str(std::str::from_utf8(&bytes.unwrap()).unwrap()),
                None => return None,
            }
        }
    }

    async fn expect(&mut self) -> (String, Value) {
        self.next().await.expect("an event, not the end")
    }
}

fn tool_events(response: &str, count: u32) -> Vec<SessionEvent> {
    let mut events = vec![SessionEvent::ResponseStarted(ResponseInfo::new(
        response, 1,
    ))];
    for step in 1..=count {
        let call = ToolInfo::new(response, format!("call_{step}"), "calculator", step, 2)
            .server_label("toolbridge");
        events.push(SessionEvent::ToolStarted(call.clone()));
        events.push(SessionEvent::ToolCompleted(call.at(3, 1).detail("= 42")));
    }
    events.push(SessionEvent::ResponseCompleted(
        ResponseInfo::new(response, 4).status("completed"),
    ));
    events
}

/// Reads `expected.len()` events and checks each, session stamped, in order.
async fn expect_all(reader: &mut SseReader, session: &str, expected: &[SessionEvent]) {
    for (i, event) in expected.iter().enumerate() {
        let (name, data) = reader.expect().await;
        assert_eq!(name, event.kind(), "event {i}: name");
        assert_eq!(data["type"], event.kind(), "event {i}: type");
        assert_eq!(data["session_id"], session, "event {i}: session");
        let mut stamped: SessionEvent = serde_json::from_value(data).unwrap();
        // Compare without the session the bus stamped on.
        match &mut stamped {
            SessionEvent::ResponseStarted(r) | SessionEvent::ResponseCompleted(r) => {
                r.session_id.clear()
            }
            SessionEvent::ToolStarted(t)
            | SessionEvent::ToolProgress(t)
            | SessionEvent::ToolCompleted(t)
            | SessionEvent::ToolFailed(t) => t.session_id.clear(),
            SessionEvent::StreamLagged { .. } | SessionEvent::StreamReconnected {} => {}
        }
        assert_eq!(&stamped, event, "event {i}");
    }
}

#[tokio::test]
async fn two_subscribers_of_a_session_get_the_same_events_in_order_and_others_get_none() {
    let gateway = Gateway::start("").await;
    let mut first = gateway.subscribe("sess-1").await;
    let mut second = gateway.subscribe("sess-1").await;
    let mut other = gateway.subscribe("sess-2").await;

    let events = tool_events("resp_a", 3);
    for event in &events {
        gateway.bus.publish(&gw_tenant(), "sess-1", event.clone());
    }
    // Published after all of sess-1's: if `other` saw sess-1's events, they would come first.
    let marker = SessionEvent::ResponseStarted(ResponseInfo::new("resp_b", 5));
    gateway.bus.publish(&gw_tenant(), "sess-2", marker.clone());

    expect_all(&mut first, "sess-1", &events).await;
    expect_all(&mut second, "sess-1", &events).await;
    expect_all(&mut other, "sess-2", &[marker]).await;
}

#[tokio::test]
async fn the_events_route_needs_the_gateway_key_and_a_valid_session_id() {
    let gateway = Gateway::start("").await;
    let client = reqwest::Client::new();
    let anonymous = client.get(gateway.url("sess-1")).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);

    let too_long = "a".repeat(129);
    for bad in ["has%20space", "slash%2Fin", "%C3%A9", too_long.as_str()] {
        let response = client
            .get(gateway.url(bad))
            .bearer_auth("gw-key")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 400, "{bad}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], "invalid_request_error", "{bad}");
        assert_eq!(body["error"]["param"], "session_id", "{bad}");
        assert_eq!(body["error"]["code"], "invalid_session_id", "{bad}");
    }
}

#[tokio::test]
async fn a_subscriber_that_does_not_read_gets_the_lag_marker_and_is_dropped() {
    let gateway = Gateway::start("buffer = 4").await;
    // A raw client with a tiny receive buffer that reads nothing after the headers, so the
    // gateway's socket fills up and the subscription falls behind.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut slow = socket.connect(gateway.addr).await.unwrap();
    slow.write_all(
        b"GET /v1/sessions/busy/events HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer gw-key\r\nconnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(slow.read(&mut byte).await.unwrap(), 1, "headers");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );

    // The publisher keeps going, and a subscriber that keeps up gets every event.
    let mut fast = gateway.bus.subscribe(&gw_tenant(), "busy").await.unwrap();
    let detail = "x".repeat(1000);
    let total: u32 = 20_000; // ~20 MB of frames: more than any socket buffers hold
    for step in 1..=total {
        gateway.bus.publish(
            &gw_tenant(),
            "busy",
            SessionEvent::ToolProgress(
                ToolInfo::new("resp_1", "call_1", "pdf", step, 0).detail(detail.as_str()),
            ),
        );
        match fast.next().await {
            Some(SessionEvent::ToolProgress(info)) => assert_eq!(info.step, step),
            other => panic!("fast subscriber got {other:?} at step {step}"),
        }
    }

    // The slow one now reads: what was in flight, the marker, then the end of the response.
    let mut body = Vec::new();
    tokio::time::timeout(PATIENCE, slow.read_to_end(&mut body))
        .await
        .expect("the lagging stream ends")
        .unwrap();
    let body = String::from_utf8_lossy(&body);
    let marker = body
        .find("event: stream.lagged\ndata: {\"type\":\"stream.lagged\",\"dropped\":")
        .expect("the lag marker");
    let tail = &body[marker..];
    assert!(
        !tail.contains("event: tool.progress"),
        "no event after the marker"
    );
    assert!(tail.ends_with("0\r\n\r\n"), "the response ended: {tail:?}");
}

fn redis_sessions(prefix: &str, buffer: usize) -> String {
    format!(
        "redis_url = \"redis://127.0.0.1:6379\"\nchannel_prefix = \"{prefix}\"\nbuffer = {buffer}"
    )
}

/// A channel prefix of its own, so concurrent runs sharing the Redis do not see each other.
fn unique_prefix() -> String {
    format!("toolbridge-test:{}:", uuid::Uuid::new_v4())
}

#[tokio::test]
async fn with_redis_a_subscriber_on_one_gateway_gets_events_published_on_another() {
    let prefix = unique_prefix();
    let a = Gateway::start(&redis_sessions(&prefix, 64)).await;
    let b = Gateway::start(&redis_sessions(&prefix, 64)).await;
    assert_eq!(a.bus.backend_name(), "redis");
    let mut on_b = b.subscribe("shared").await;
    let mut also_on_b = b.subscribe("shared").await;
    let mut on_a = a.subscribe("shared").await;
    let mut elsewhere = b.subscribe("unrelated").await;

    let events = tool_events("resp_r", 4);
    for event in &events {
        a.bus.publish(&gw_tenant(), "shared", event.clone());
    }
    let marker = SessionEvent::ResponseStarted(ResponseInfo::new("resp_u", 5));
    a.bus.publish(&gw_tenant(), "unrelated", marker.clone());

    expect_all(&mut on_b, "shared", &events).await;
    expect_all(&mut also_on_b, "shared", &events).await;
    expect_all(&mut on_a, "shared", &events).await;
    expect_all(&mut elsewhere, "unrelated", &[marker]).await;

    // A gateway with another prefix shares nothing.
    let c = Gateway::start(&redis_sessions(&unique_prefix(), 64)).await;
    let mut on_c = c.subscribe("shared").await;
    a.bus.publish(&gw_tenant(), "shared", events[0].clone());
    c.bus.publish(&gw_tenant(), "shared", events[1].clone());
    expect_all(&mut on_c, "shared", &events[1..2]).await;
}

#[tokio::test]
async fn with_redis_a_lagging_subscriber_gets_the_marker_and_is_dropped() {
    let prefix = unique_prefix();
    let publisher = Gateway::start(&redis_sessions(&prefix, 4096)).await;
    let tiny = Gateway::start(&redis_sessions(&prefix, 4)).await;
    let mut slow = tiny.bus.subscribe(&gw_tenant(), "busy").await.unwrap();
    let mut fast = publisher.bus.subscribe(&gw_tenant(), "busy").await.unwrap();
    let total: u32 = 2000;
    for step in 1..=total {
        publisher.bus.publish(
            &gw_tenant(),
            "busy",
            SessionEvent::ToolProgress(ToolInfo::new("resp_1", "call_1", "pdf", step, 0)),
        );
    }
    for step in 1..=total {
        let event = tokio::time::timeout(PATIENCE, fast.next()).await.unwrap();
        assert!(
            matches!(&event, Some(SessionEvent::ToolProgress(i)) if i.step == step),
            "fast subscriber at step {step}: {event:?}"
        );
    }
    // The slow subscriber's buffer held 4 events; then it was marked lagged and cut off.
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(PATIENCE, slow.next()).await.unwrap() {
            Some(SessionEvent::ToolProgress(i)) => seen.push(i.step),
            Some(SessionEvent::StreamLagged { dropped }) => {
                assert!(dropped >= 1);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        seen.len() < total as usize,
        "it lagged: {} events",
        seen.len()
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order: {seen:?}");
    assert_eq!(
        tokio::time::timeout(PATIENCE, slow.next()).await.unwrap(),
        None
    );
}
