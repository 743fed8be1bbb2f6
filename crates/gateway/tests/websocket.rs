//! Ring 3: the WebSocket mode of `/v1/responses` through the real binary, with a WebSocket
//! client (tokio-tungstenite) and the testkit's fake Chat Completions upstream: a prewarm
//! answered without an upstream call, sequential responses on one socket, continuations that
//! send only their new items (`store: false`), an unknown `previous_response_id`, a failed
//! continuation evicting its state, the per-connection bound, bad frames answered with `error`
//! events on a socket that stays usable, and the upgrade behind the same key as HTTP.
//!
//! Every test is bounded in time so that nothing can hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use toolbridge_testkit::chat::text_stream;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
const TEST_LIMIT: Duration = Duration::from_secs(60);
const GATEWAY_KEY: &str = "tb-websocket-test-key";

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn start(upstream: &FakeUpstream, keys: Option<&str>) -> GatewayProcess {
    let mut envs = vec![
        ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
        ("TOOLBRIDGE_UPSTREAM_API_KEY", "sk-ws-upstream".to_owned()),
    ];
    if let Some(keys) = keys {
        envs.push(("TOOLBRIDGE_API_KEYS", keys.to_owned()));
    }
    GatewayProcess::start(Path::new(BIN), &envs).await
}

/// Opens a socket on `path`, with `key` as the bearer token when given.
async fn connect(
    gateway: &GatewayProcess,
    path: &str,
    key: Option<&str>,
) -> Result<Socket, String> {
    let url = format!("ws://{}{path}", gateway.addr());
    let mut request = url.into_client_request().unwrap();
    if let Some(key) = key {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
        .map_err(|e| e.to_string())
}

async fn send(socket: &mut Socket, frame: Value) {
    socket
        .send(Message::text(frame.to_string()))
        .await
        .expect("the frame goes out");
}

/// The events of one response: up to and including its terminal event (or an `error`).
async fn events(socket: &mut Socket) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("an event in time")
            .expect("the socket stays open")
            .expect("a readable message");
        let Message::Text(text) = message else {
            continue;
        };
        let event: Value = serde_json::from_str(&text).expect("each frame is one JSON event");
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        out.push(event);
        if matches!(
            kind.as_str(),
            "response.completed" | "response.failed" | "response.incomplete" | "error"
        ) {
            return out;
        }
    }
}

fn last(events: &[Value]) -> &Value {
    events.last().expect("at least one event")
}

fn create(input: Value, previous: Option<&str>) -> Value {
    let mut frame = json!({
        "type": "response.create",
        "model": "gpt-4o-mini",
        "store": false,
        "stream": true,
        "input": input,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}],
    });
    if let Some(previous) = previous {
        frame["previous_response_id"] = json!(previous);
    }
    frame
}

fn prewarm() -> Value {
    let mut frame = create(
        json!([{"type": "message", "role": "developer", "content": "You are terse."}]),
        None,
    );
    frame["generate"] = json!(false);
    frame
}

fn user(text: &str) -> Value {
    json!([{"type": "message", "role": "user", "content": text}])
}

/// The texts of the upstream request's messages, in order, as `role:text`.
fn sent_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}:{}",
                m["role"].as_str().unwrap_or(""),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn a_prewarm_calls_no_upstream_and_each_continuation_sends_only_its_new_items() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        let gateway = start(&upstream, None).await;
        let mut socket = connect(&gateway, "/v1/responses", None).await.unwrap();

        send(&mut socket, prewarm()).await;
        let warm = events(&mut socket).await;
        assert_eq!(warm[0]["type"], "response.created");
        assert_eq!(last(&warm)["type"], "response.completed");
        assert_eq!(last(&warm)["response"]["output"], json!([]));
        assert!(
            upstream.requests().is_empty(),
            "a prewarm calls no upstream"
        );
        let warm_id = last(&warm)["response"]["id"].as_str().unwrap().to_owned();

        upstream.push(Reply::sse(text_stream(&["Hello", " there"], "stop")));
        send(&mut socket, create(user("first question"), Some(&warm_id))).await;
        let first = events(&mut socket).await;
        assert_eq!(last(&first)["type"], "response.completed", "{first:?}");
        assert!(
            first
                .iter()
                .any(|e| e["type"] == "response.output_text.delta")
        );
        let first_id = last(&first)["response"]["id"].as_str().unwrap().to_owned();
        assert_eq!(
            sent_messages(&upstream.last_body()),
            ["developer:You are terse.", "user:first question"]
        );

        upstream.push(Reply::sse(text_stream(&["Again"], "stop")));
        send(
            &mut socket,
            create(user("second question"), Some(&first_id)),
        )
        .await;
        let second = events(&mut socket).await;
        assert_eq!(last(&second)["type"], "response.completed", "{second:?}");
        assert_eq!(
            sent_messages(&upstream.last_body()),
            [
                "developer:You are terse.",
                "user:first question",
                "assistant:Hello there",
                "user:second question"
            ]
        );
        assert_eq!(upstream.requests().len(), 2);
    })
    .await
    .expect("the test ran past its time limit");
}

#[tokio::test]
async fn an_unknown_previous_response_id_and_a_bad_frame_are_error_events_on_a_usable_socket() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        let gateway = start(&upstream, None).await;
        let mut socket = connect(&gateway, "/responses", None).await.unwrap();

        send(&mut socket, create(user("hi"), Some("resp_never_made"))).await;
        let missing = events(&mut socket).await;
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0]["type"], "error");
        assert_eq!(missing[0]["status"], 400);
        assert_eq!(missing[0]["error"]["code"], "previous_response_not_found");
        assert_eq!(missing[0]["error"]["param"], "previous_response_id");

        socket.send(Message::text("{not json")).await.unwrap();
        let bad = events(&mut socket).await;
        assert_eq!(bad[0]["type"], "error");
        assert_eq!(bad[0]["error"]["type"], "invalid_request_error");

        send(&mut socket, json!({"type": "response.cancel"})).await;
        let unknown = events(&mut socket).await;
        assert_eq!(unknown[0]["error"]["code"], "unknown_event_type");
        assert!(upstream.requests().is_empty());

        upstream.push(Reply::sse(text_stream(&["ok"], "stop")));
        send(&mut socket, create(user("hi"), None)).await;
        let fine = events(&mut socket).await;
        assert_eq!(last(&fine)["type"], "response.completed", "{fine:?}");
    })
    .await
    .expect("the test ran past its time limit");
}

#[tokio::test]
async fn a_failed_continuation_evicts_the_response_it_would_have_extended() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        let gateway = start(&upstream, None).await;
        let mut socket = connect(&gateway, "/v1/responses", None).await.unwrap();
        send(&mut socket, prewarm()).await;
        let warm = events(&mut socket).await;
        let warm_id = last(&warm)["response"]["id"].as_str().unwrap().to_owned();

        upstream.push(Reply::error(
            400,
            json!({"error": {"message": "bad request upstream", "type": "invalid_request_error"}}),
        ));
        send(&mut socket, create(user("fails"), Some(&warm_id))).await;
        let failed = events(&mut socket).await;
        assert_ne!(last(&failed)["type"], "response.completed", "{failed:?}");

        send(&mut socket, create(user("retry"), Some(&warm_id))).await;
        let evicted = events(&mut socket).await;
        assert_eq!(evicted[0]["error"]["code"], "previous_response_not_found");
        assert_eq!(
            upstream.requests().len(),
            1,
            "the evicted chain calls no upstream"
        );
    })
    .await
    .expect("the test ran past its time limit");
}

#[tokio::test]
async fn a_connection_keeps_at_most_sixteen_responses_and_a_new_socket_none() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        let gateway = start(&upstream, None).await;
        let mut socket = connect(&gateway, "/v1/responses", None).await.unwrap();
        let mut ids = Vec::new();
        for _ in 0..17 {
            send(&mut socket, prewarm()).await;
            let warm = events(&mut socket).await;
            ids.push(last(&warm)["response"]["id"].as_str().unwrap().to_owned());
        }
        send(&mut socket, create(user("oldest"), Some(&ids[0]))).await;
        let oldest = events(&mut socket).await;
        assert_eq!(oldest[0]["error"]["code"], "previous_response_not_found");

        upstream.push(Reply::sse(text_stream(&["kept"], "stop")));
        send(&mut socket, create(user("newest"), Some(&ids[16]))).await;
        let newest = events(&mut socket).await;
        assert_eq!(last(&newest)["type"], "response.completed", "{newest:?}");

        // The state goes with the connection: another socket does not know the chain.
        let mut other = connect(&gateway, "/v1/responses", None).await.unwrap();
        send(&mut other, create(user("elsewhere"), Some(&ids[16]))).await;
        let elsewhere = events(&mut other).await;
        assert_eq!(elsewhere[0]["error"]["code"], "previous_response_not_found");
        assert_eq!(upstream.requests().len(), 1);
    })
    .await
    .expect("the test ran past its time limit");
}

#[tokio::test]
async fn the_upgrade_needs_the_same_gateway_key_as_http() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        let gateway = start(&upstream, Some(GATEWAY_KEY)).await;
        let refused = connect(&gateway, "/v1/responses", None).await;
        assert!(refused.unwrap_err().contains("401"));
        let wrong = connect(&gateway, "/v1/responses", Some("tb-wrong")).await;
        assert!(wrong.unwrap_err().contains("401"));

        let mut socket = connect(&gateway, "/v1/responses", Some(GATEWAY_KEY))
            .await
            .unwrap();
        upstream.push(Reply::sse(text_stream(&["authorised"], "stop")));
        send(&mut socket, create(user("hi"), None)).await;
        let answered = events(&mut socket).await;
        assert_eq!(
            last(&answered)["type"],
            "response.completed",
            "{answered:?}"
        );
        assert_eq!(
            upstream.last_body()["messages"][0]["content"],
            "hi",
            "the upstream got the frame's request"
        );
    })
    .await
    .expect("the test ran past its time limit");
}

#[tokio::test]
async fn a_compaction_item_starts_a_new_chain_without_the_kept_history() {
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        let gateway = start(&upstream, None).await;
        let mut socket = connect(&gateway, "/v1/responses", None).await.unwrap();
        upstream.push(Reply::sse(text_stream(&["long answer"], "stop")));
        send(&mut socket, create(user("long history"), None)).await;
        let first = events(&mut socket).await;
        let first_id = last(&first)["response"]["id"].as_str().unwrap().to_owned();

        upstream.push(Reply::sse(text_stream(&["fresh"], "stop")));
        let input = json!([
            {"type": "compaction", "encrypted_content": "not-a-gateway-blob"},
            {"type": "message", "role": "user", "content": "after compaction"}
        ]);
        send(&mut socket, create(input, Some(&first_id))).await;
        let after = events(&mut socket).await;
        assert_eq!(last(&after)["type"], "response.completed", "{after:?}");
        assert_eq!(
            sent_messages(&upstream.last_body()),
            ["user:after compaction"],
            "the chain before the compaction is not resent"
        );
    })
    .await
    .expect("the test ran past its time limit");
}

/// A tool call as the fake upstream streams it.
fn tool_call_stream() -> Reply {
    use toolbridge_testkit::chat::chunk;
    Reply::sse(vec![
        chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "shell", "arguments": "{\"cmd\":\"ls\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ])
}

/// A Codex-shaped first turn: a long developer message and the user's task.
fn first_input() -> Value {
    json!([
        {"type": "message", "role": "developer", "content": "You are a coding agent. ".repeat(400)},
        {"type": "message", "role": "user", "content": "Fix the failing test."}
    ])
}

fn tool_output(call_id: &str, n: usize) -> Value {
    json!({"type": "function_call_output", "call_id": call_id, "output": format!("output of step {n}: ").repeat(20)})
}

/// The `function_call` items of a completed response's output.
fn calls(response: &Value) -> Vec<Value> {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call")
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_twenty_call_session_sends_the_upstream_the_same_history_for_a_fraction_of_the_bytes() {
    const CALLS: usize = 20;
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        upstream.set_gate(std::sync::Arc::new(|request: &toolbridge_testkit::Recorded| {
            Some(if request.body["stream"] == true {
                tool_call_stream()
            } else {
                Reply::json(toolbridge_testkit::chat::tool_calls_completion(&[(
                    "call_1",
                    "shell",
                    json!({"cmd": "ls"}),
                )]))
            })
        }));
        let gateway = start(&upstream, None).await;

        // Over HTTP with `store: false`, each turn resends the whole history.
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut history = first_input().as_array().unwrap().clone();
        let mut http_bytes = 0;
        for n in 0..CALLS {
            let body = json!({"model": "gpt-4o-mini", "store": false, "input": history,
                "tools": create(json!([]), None)["tools"]});
            let text = body.to_string();
            http_bytes += text.len();
            let response: Value = client
                .post(gateway.url("/v1/responses"))
                .header("content-type", "application/json")
                .body(text)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let made = calls(&response);
            assert_eq!(made.len(), 1, "{response}");
            history.push(made[0].clone());
            history.push(tool_output(made[0]["call_id"].as_str().unwrap(), n));
        }
        let http_last = upstream.last_body()["messages"].as_array().unwrap().len();

        // Over one socket, each turn sends only its new items.
        let mut socket = connect(&gateway, "/v1/responses", None).await.unwrap();
        let mut ws_bytes = 0;
        let mut previous: Option<String> = None;
        let mut input = first_input();
        for n in 0..CALLS {
            let frame = create(input.clone(), previous.as_deref());
            ws_bytes += frame.to_string().len();
            send(&mut socket, frame).await;
            let events = events(&mut socket).await;
            let done = last(&events);
            assert_eq!(done["type"], "response.completed", "{done}");
            let made = calls(&done["response"]);
            assert_eq!(made.len(), 1);
            previous = Some(done["response"]["id"].as_str().unwrap().to_owned());
            input = json!([tool_output(made[0]["call_id"].as_str().unwrap(), n)]);
        }
        let ws_last = upstream.last_body()["messages"].as_array().unwrap().len();
        assert_eq!(ws_last, http_last, "the provider gets the same history both ways");
        let ratio = ws_bytes as f64 / http_bytes as f64;
        eprintln!(
            "client bytes for {CALLS} turns: http {http_bytes}, websocket {ws_bytes} (ratio {ratio:.3})"
        );
        assert!(ratio < 0.25, "{ws_bytes} of {http_bytes}");
    })
    .await
    .expect("the test ran past its time limit");
}

/// Over the socket, a frame says its kind in `client_metadata` (the handshake's header is the
/// prewarm's): a compaction frame goes to the route for compaction, and its
/// `compaction_trigger` is answered with one `compaction` item, as text frames.
#[tokio::test]
async fn a_compaction_frame_is_routed_by_its_client_metadata_and_answered_with_a_compaction_item() {
    tokio::time::timeout(TEST_LIMIT, async {
        let main = FakeUpstream::start().await;
        main.set_fallback(Reply::sse(text_stream(&["turn answer"], "stop")));
        let summarizer = FakeUpstream::start().await;
        summarizer.set_fallback(Reply::json(toolbridge_testkit::chat::completion(
            "SUMMARY of the session",
            "stop",
        )));
        let dir = toolbridge_testkit::tempdir::TempDir::new("ws-compaction-route");
        let config = dir.write(
            "toolbridge.toml",
            &format!(
                r#"
[providers.main]
base_url = "{}"

[providers.summarizer]
base_url = "{}"

[[routes]]
model = "*"
provider = "summarizer"
upstream_model = "summarizer-model"
request_kind = "compaction"

[[routes]]
model = "*"
provider = "main"
"#,
                main.base_url(),
                summarizer.base_url()
            ),
        );
        let gateway = GatewayProcess::start(
            Path::new(BIN),
            &[("TOOLBRIDGE_CONFIG", config.display().to_string())],
        )
        .await;
        let mut socket = connect(&gateway, "/v1/responses", None).await.unwrap();
        let metadata = |kind: &str| {
            json!({"x-codex-turn-metadata": json!({"request_kind": kind, "agent_name": "/root"}).to_string()})
        };
        let mut turn = create(user("hello"), None);
        turn["client_metadata"] = metadata("turn");
        send(&mut socket, turn).await;
        assert_eq!(last(&events(&mut socket).await)["type"], "response.completed");

        let mut compaction = create(
            json!([
                {"type": "message", "role": "user", "content": "hello"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "turn answer"}]},
                {"type": "compaction_trigger"}
            ]),
            None,
        );
        compaction["client_metadata"] = metadata("compaction");
        send(&mut socket, compaction).await;
        let answered = events(&mut socket).await;
        let kinds: Vec<&str> = answered.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.output_item.done",
                "response.completed"
            ],
            "{answered:#?}"
        );
        let output = last(&answered)["response"]["output"].as_array().unwrap().clone();
        assert_eq!(output.len(), 1);
        assert_eq!(output[0]["type"], "compaction");
        assert_eq!(main.requests().len(), 1);
        let summaries = summarizer.requests();
        assert_eq!(summaries.len(), 1);
        assert_eq!(summaries[0].body["model"], "summarizer-model");
        assert!(summaries[0].body.to_string().contains("turn answer"));
        gateway.kill().await;
    })
    .await
    .expect("the test finishes in time");
}

/// A raw TCP connection upgraded to a WebSocket on `/v1/responses`: frames no client library
/// would send (broken ones) go out as bytes.
async fn raw_socket(gateway: &GatewayProcess) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(gateway.addr())
        .await
        .unwrap();
    let request = format!(
        "GET /v1/responses HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        gateway.addr()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tcp.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    // The largest message, as Codex 0.171 reads it: the 32 MiB body limit.
    assert!(
        head.contains("x-codex-websocket-max-message-bytes: 33554432"),
        "{head}"
    );
    tcp
}

/// A client frame: `first` is the FIN/RSV/opcode byte; masked (with a zero key, so the payload
/// goes as written) unless `masked` is false. `length` overrides the declared payload length.
fn raw_frame(first: u8, payload: &[u8], masked: bool, length: Option<u64>) -> Vec<u8> {
    let mask = if masked { 0x80 } else { 0 };
    let length = length.unwrap_or(payload.len() as u64);
    let mut frame = vec![first];
    if length < 126 {
        frame.push(mask | length as u8);
    } else if length <= u64::from(u16::MAX) {
        frame.push(mask | 126);
        frame.extend_from_slice(&(length as u16).to_be_bytes());
    } else {
        frame.push(mask | 127);
        frame.extend_from_slice(&length.to_be_bytes());
    }
    if masked {
        frame.extend_from_slice(&[0, 0, 0, 0]);
    }
    frame.extend_from_slice(payload);
    frame
}

/// The next server frame: its opcode and payload; `None` when the connection ends first.
async fn raw_next(tcp: &mut tokio::net::TcpStream) -> Option<(u8, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 2];
    tcp.read_exact(&mut head).await.ok()?;
    let mut length = u64::from(head[1] & 0x7f);
    if length == 126 {
        let mut n = [0u8; 2];
        tcp.read_exact(&mut n).await.ok()?;
        length = u64::from(u16::from_be_bytes(n));
    } else if length == 127 {
        let mut n = [0u8; 8];
        tcp.read_exact(&mut n).await.ok()?;
        length = u64::from_be_bytes(n);
    }
    let mut payload = vec![0u8; usize::try_from(length).unwrap()];
    tcp.read_exact(&mut payload).await.ok()?;
    Some((head[0] & 0x0f, payload))
}

/// Issue 44: a frame the WebSocket protocol cannot read dropped the connection with no close
/// frame; each now gets a close frame with the code RFC 6455 names and a reason.
#[tokio::test]
async fn a_frame_the_protocol_cannot_read_is_answered_with_a_close_frame_and_its_code() {
    use tokio::io::AsyncWriteExt;
    tokio::time::timeout(TEST_LIMIT, async {
        let upstream = FakeUpstream::start().await;
        let gateway = start(&upstream, None).await;
        let cases: [(&str, Vec<u8>, u16); 4] = [
            (
                "reserved bits set",
                raw_frame(0xC1, b"{}", true, None),
                1002,
            ),
            (
                "an unmasked client frame",
                raw_frame(0x81, b"{}", false, None),
                1002,
            ),
            (
                "a text frame that is not UTF-8",
                raw_frame(0x81, &[0xff, 0xfe], true, None),
                1007,
            ),
            // 64 MiB declared, over the 32 MiB body limit: refused from the header alone.
            (
                "a message over the limit",
                raw_frame(0x81, b"", true, Some(64 << 20)),
                1009,
            ),
        ];
        for (case, frame, code) in cases {
            let mut tcp = raw_socket(&gateway).await;
            tcp.write_all(&frame).await.unwrap();
            let mut close = tokio::time::timeout(Duration::from_secs(20), raw_next(&mut tcp))
                .await
                .expect("an answer in time");
            // Too large: first the error Codex reads (it then resends over HTTP).
            if code == 1009 {
                let Some((0x1, payload)) = close else {
                    panic!("{case}: no error event, got {close:?}");
                };
                let event: Value = serde_json::from_slice(&payload).unwrap();
                assert_eq!(
                    event["error"]["code"], "websocket_message_too_large",
                    "{event}"
                );
                close = raw_next(&mut tcp).await;
            }
            let Some((0x8, payload)) = close else {
                panic!("{case}: no close frame, got {close:?}");
            };
            assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), code, "{case}");
            assert!(payload.len() > 2, "{case}: the close frame has no reason");
        }

        // A binary frame is an `error` event, and the socket stays open for the next frame.
        let mut tcp = raw_socket(&gateway).await;
        tcp.write_all(&raw_frame(0x82, b"\x00\x01", true, None))
            .await
            .unwrap();
        let (opcode, payload) = raw_next(&mut tcp).await.expect("an error event");
        assert_eq!(opcode, 0x1);
        let event: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(event["error"]["code"], "invalid_frame", "{event}");
        tcp.write_all(&raw_frame(
            0x81,
            b"{\"type\":\"response.cancel\"}",
            true,
            None,
        ))
        .await
        .unwrap();
        let (_, payload) = raw_next(&mut tcp).await.expect("the socket stays open");
        let event: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(event["error"]["code"], "unknown_event_type", "{event}");
    })
    .await
    .expect("the test ran past its time limit");
}
