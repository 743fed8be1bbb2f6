//! Fuzz target: the WebSocket mode of `/v1/responses` over a real socket (an in-process gateway
//! on 127.0.0.1:0, a fake Chat upstream): what any frame goes through — its lane, its reading
//! as a `response.create`, the connection's `store: false` chains, its response — and what
//! the socket does with frames that are not requests. (The lanes' bounds and tagging are also
//! fuzzed in-crate, `src/http/responses/websocket/fuzz.rs`.)
//!
//! Inputs: a few frames per socket, sent one at a time (each answered before the next) or in a
//! burst (lanes side by side, queues, refusals): `response.create` frames shaped like Codex's
//! (prewarms, `store: false` continuations of the previous answer, named lanes, tools) mutated
//! (`toolbridge_testkit::fuzz::json`), text that is not JSON, binary frames, pings; and a socket
//! may end with a text frame that is not UTF-8 or an oversized one.
//!
//! Properties: the gateway never drops the socket on its own and never hangs: every text or
//! binary frame gets exactly one answer — one terminal event (`response.completed`,
//! `.failed`, `.incomplete`) or one `error` event (a status 400-599, a code, a message) —
//! within a time limit; every frame the gateway sends is one JSON event; a response's events
//! are numbered from 0 and carry its lane's `stream_id` when it named one; a text frame that is
//! not UTF-8 closes the socket with 1007, a frame past the body limit with 1009 after an
//! `error` event; after any sequence of frames a prewarm is still answered.
//!
//! Long run: `TOOLBRIDGE_FUZZ_SECS=600 cargo test --workspace --test fuzz_websocket --
//! --nocapture` (the seconds are per property).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::Harness;
use futures::{SinkExt, StreamExt};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::text_stream;
use toolbridge_testkit::fuzz::json::{self as fj, Json};
use toolbridge_testkit::fuzz::{Target, check};

const TARGET: Target = Target {
    name: "websocket",
    regressions: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/fuzz_websocket.txt"
    ),
    // A case is a socket and a few responses through the whole pipeline: fewer cases.
    cases: 48,
};

/// How long one frame may wait for its answer.
const ANSWER: Duration = Duration::from_secs(20);

/// The gateway's body limit (its default), which bounds a frame.
const BODY_LIMIT: usize = toolbridge_gateway::config::DEFAULT_BODY_LIMIT;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One frame a client sends.
#[derive(Clone, Debug)]
enum Sent {
    /// A text frame: the document's rendering (lossily UTF-8), with the previous answer's id
    /// wherever the document says `$previous`.
    Text(Json),
    Binary(Vec<u8>),
    Ping,
}

/// How a socket's last frame ends it, if it does.
#[derive(Clone, Debug)]
enum Ending {
    None,
    /// A text frame whose payload is not UTF-8: closed with 1007.
    NotUtf8,
    /// A text frame past the body limit: an error event, then closed with 1009.
    TooLarge,
}

#[derive(Clone, Debug)]
struct Case {
    frames: Vec<Sent>,
    /// All frames sent before any answer is read.
    burst: bool,
    ending: Ending,
}

fn create() -> impl Strategy<Value = Value> {
    let input = prop_oneof![
        3 => fj::plausible_text().prop_map(Value::String),
        3 => fj::plausible_text()
            .prop_map(|t| json!([{"type": "message", "role": "user", "content": t}])),
        1 => Just(json!([{"type": "function_call_output", "call_id": "call_1", "output": "ok"}])),
        1 => Just(json!([{"type": "compaction", "encrypted_content": "x"}])),
    ];
    (
        input,
        prop::option::weighted(0.3, prop_oneof![Just("a"), Just("b"), Just("c")]),
        prop::option::weighted(
            0.4,
            prop_oneof![4 => Just("$previous"), 1 => Just("resp_unknown")],
        ),
        any::<bool>(),
        prop::bool::weighted(0.3),
        any::<bool>(),
    )
        .prop_map(|(input, lane, previous, store, prewarm, tools)| {
            let mut frame = json!({"type": "response.create", "model": "gpt-4o-mini",
                "stream": true, "store": store, "input": input});
            if let Some(lane) = lane {
                frame["stream_id"] = json!(lane);
            }
            if let Some(previous) = previous {
                frame["previous_response_id"] = json!(previous);
            }
            if prewarm {
                frame["generate"] = json!(false);
            }
            if tools {
                frame["tools"] = json!([{"type": "function", "name": "shell",
                    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]);
            }
            frame
        })
}

fn sent() -> impl Strategy<Value = Sent> {
    prop_oneof![
        6 => create().prop_map(|c| Sent::Text(Json::from(c))),
        6 => fj::mutated(create().prop_map(Json::from), 2).prop_map(Sent::Text),
        1 => fj::wild().prop_map(Sent::Text),
        1 => "\\PC{0,20}".prop_map(|t| Sent::Text(Json::Raw(t.into_bytes()))),
        1 => prop::collection::vec(any::<u8>(), 0..32).prop_map(Sent::Binary),
        1 => Just(Sent::Ping),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(sent(), 1..6),
        prop::bool::weighted(0.3),
        prop_oneof![16 => Just(Ending::None), 2 => Just(Ending::NotUtf8), 1 => Just(Ending::TooLarge)],
    )
        .prop_map(|(frames, burst, ending)| Case {
            frames,
            burst,
            ending,
        })
}

#[test]
fn every_frame_gets_one_answer_and_the_socket_stays_usable() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let harness = runtime.block_on(async {
        let harness = Harness::with_preset("generic").await;
        harness
            .upstream
            .set_fallback(Reply::sse(text_stream(&["Hel", "lo"], "stop")));
        harness
    });
    let url = format!("ws://{}/v1/responses", harness.addr);
    check(&TARGET, case(), |case| {
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(120), run(&url, &case))
                .await
                .map_err(|_| TestCaseError::fail("the case did not end in 120 s"))?
        })
    });
}

/// Found by this target: a prewarm declaring a function whose `parameters` serde_json cannot
/// read back as a `Value` (kept as raw text, so accepted: a number past `f64`'s range, nesting
/// past its limit) panicked while its events were built (`json!` unwraps), and the socket
/// dropped without a close frame. It is refused with an `error` event, and the socket goes on.
#[tokio::test]
async fn a_prewarm_with_an_unreadable_schema_is_refused_and_the_socket_goes_on() {
    let harness = Harness::with_preset("generic").await;
    let url = format!("ws://{}/v1/responses", harness.addr);
    let (mut socket, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let mut reader = Reader::default();
    let deep = format!("{}{{}}{}", "{\"a\":".repeat(130), "}".repeat(130));
    for parameters in ["[1e999]".to_owned(), deep] {
        let frame = format!(
            r#"{{"type":"response.create","model":"m","input":"","generate":false,"store":false,"tools":[{{"type":"function","name":"shell","parameters":{parameters}}}]}}"#
        );
        socket.send(Message::text(frame)).await.unwrap();
        let answer = reader.answers(&mut socket, 1).await.unwrap();
        assert_eq!(answer[0]["type"], "error", "{answer:?}");
        assert_eq!(answer[0]["error"]["param"], "tools", "{answer:?}");
    }
    socket
        .send(Message::text(prewarm().to_string()))
        .await
        .unwrap();
    let answer = reader.answers(&mut socket, 1).await.unwrap();
    assert_eq!(answer[0]["type"], "response.completed");
}

/// One socket through `case`.
async fn run(url: &str, case: &Case) -> Result<(), TestCaseError> {
    let (mut socket, _) = tokio_tungstenite::connect_async(url)
        .await
        .map_err(|e| TestCaseError::fail(format!("connect: {e}")))?;
    let mut reader = Reader::default();
    // As Codex does: a prewarm first, which starts a chain to continue (`$previous`).
    socket
        .send(Message::text(prewarm().to_string()))
        .await
        .unwrap();
    reader.answers(&mut socket, 1).await?;
    let mut expected = 0;
    for frame in &case.frames {
        let answered = send(&mut socket, frame, &reader.previous).await?;
        if !case.burst && answered {
            reader.answers(&mut socket, 1).await?;
        } else if answered {
            expected += 1;
        }
    }
    reader.answers(&mut socket, expected).await?;
    match case.ending {
        Ending::None => {
            // Still usable: a prewarm is answered.
            socket
                .send(Message::text(prewarm().to_string()))
                .await
                .unwrap();
            let answer = reader.answers(&mut socket, 1).await?;
            prop_assert_eq!(&answer[0]["type"], "response.completed", "{:?}", answer);
            let _ = socket.close(None).await;
        }
        Ending::NotUtf8 => {
            let frame = Frame::message(
                b"{\"type\":\"\xff\"}".to_vec(),
                OpCode::Data(Data::Text),
                true,
            );
            socket.send(Message::Frame(frame)).await.unwrap();
            reader.closed(&mut socket, 1007).await?;
        }
        Ending::TooLarge => {
            let frame = format!("{{\"input\":\"{}\"}}", "a".repeat(BODY_LIMIT));
            // The gateway may close before the whole frame is written.
            let _ = socket.send(Message::text(frame)).await;
            let events = reader.closed(&mut socket, 1009).await?;
            prop_assert!(
                events
                    .iter()
                    .any(|e| e["error"]["code"] == "websocket_message_too_large"),
                "no error event before 1009: {:?}",
                events
            );
        }
    }
    Ok(())
}

/// A prewarm (no upstream call) that starts a `store: false` chain.
fn prewarm() -> Value {
    json!({"type": "response.create", "model": "gpt-4o-mini", "input": "hi", "generate": false,
        "store": false})
}

/// Sends `frame`; `true` when it calls for an answer.
async fn send(socket: &mut Socket, frame: &Sent, previous: &str) -> Result<bool, TestCaseError> {
    let message = match frame {
        Sent::Text(doc) => {
            let text = String::from_utf8_lossy(&fj::render(doc)).replace("$previous", previous);
            Message::text(text)
        }
        Sent::Binary(bytes) => Message::binary(bytes.clone()),
        Sent::Ping => Message::Ping(Vec::new().into()),
    };
    let answered = !matches!(frame, Sent::Ping);
    socket
        .send(message)
        .await
        .map_err(|e| TestCaseError::fail(format!("the socket refused a frame: {e}")))?;
    Ok(answered)
}

/// The mark of an event read by its type alone.
const DEEP: &str = "toolbridge.fuzz.deep";

/// One frame's JSON event. An event nested deeper than serde_json's recursion limit is read
/// by its `type` and `stream_id` alone (the first of each: our events name them first).
fn parse(text: &str) -> Result<Value, TestCaseError> {
    match serde_json::from_str(text) {
        Ok(event) => Ok(event),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
            let field = |name: &str| {
                let start = text.find(&format!("\"{name}\":\""))? + name.len() + 4;
                let end = start + text[start..].find('"')?;
                Some(text[start..end].to_owned())
            };
            let kind = field("type").unwrap_or_default();
            let mut event = json!({"type": kind, DEEP: true, "response": {"status": "deep"}});
            if text.starts_with("{\"stream_id\":") {
                event["stream_id"] = json!(field("stream_id"));
            }
            Ok(event)
        }
        Err(e) => Err(TestCaseError::fail(format!(
            "not one JSON event ({e}): {text}"
        ))),
    }
}

/// What the client has read so far.
#[derive(Default)]
struct Reader {
    /// The last completed response's id, for continuations.
    previous: String,
    /// Each lane's (`""`: unnamed) next sequence number (`None`: not known).
    sequence: HashMap<String, Option<u64>>,
}

impl Reader {
    /// Reads until `n` answers (terminal or `error` events) came, checking every event.
    async fn answers(
        &mut self,
        socket: &mut Socket,
        n: usize,
    ) -> Result<Vec<Value>, TestCaseError> {
        let mut answers = Vec::new();
        while answers.len() < n {
            let message = match tokio::time::timeout(ANSWER, socket.next()).await {
                Err(_) => {
                    return Err(TestCaseError::fail(format!(
                        "{} of {n} frames unanswered after {} s",
                        n - answers.len(),
                        ANSWER.as_secs()
                    )));
                }
                Ok(None) => return Err(TestCaseError::fail("the gateway closed the socket")),
                Ok(Some(Err(e))) => {
                    return Err(TestCaseError::fail(format!("the socket broke: {e}")));
                }
                Ok(Some(Ok(message))) => message,
            };
            let text = match message {
                Message::Text(text) => text,
                Message::Ping(_) | Message::Pong(_) => continue,
                Message::Close(close) => {
                    return Err(TestCaseError::fail(format!(
                        "the gateway closed the socket: {close:?}"
                    )));
                }
                other => return Err(TestCaseError::fail(format!("not a text frame: {other:?}"))),
            };
            let event = parse(&text)?;
            if self.event(event.clone())? {
                answers.push(event);
            }
        }
        Ok(answers)
    }

    /// Checks one event; `true` when it answers a frame.
    ///
    /// An event deeper than serde_json's default recursion limit (a response echoing a tool
    /// schema nested about 124 deep, which the request itself was allowed) is read by its
    /// `type` alone; its lane's numbering is then not checked until the next response.
    fn event(&mut self, event: Value) -> Result<bool, TestCaseError> {
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        prop_assert!(!kind.is_empty(), "an event without a type: {}", event);
        let lane = event["stream_id"].as_str().unwrap_or_default().to_owned();
        if kind == "error" {
            let status = event["status"].as_u64().unwrap_or_default();
            prop_assert!((400..=599).contains(&status), "status of {}", event);
            let code = event["error"]["code"].as_str().unwrap_or_default();
            prop_assert!(
                !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "code of {}",
                event
            );
            prop_assert!(
                event["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty())
            );
            return Ok(true);
        }
        // A response's events, numbered from 0 (a prewarm's and a whole answer's too).
        let next = self.sequence.entry(lane.clone()).or_insert(Some(0));
        if kind == "response.created" {
            *next = Some(0);
        }
        if event.get(DEEP).is_some() {
            *next = None;
        } else if let (Some(n), Some(expected)) = (event["sequence_number"].as_u64(), *next) {
            prop_assert_eq!(n, expected, "sequence_number of {}", event);
            *next = Some(expected + 1);
        }
        let terminal = matches!(
            kind.as_str(),
            "response.completed" | "response.failed" | "response.incomplete"
        );
        if terminal {
            prop_assert!(event["response"]["status"].is_string(), "{}", event);
            if kind == "response.completed"
                && let Some(id) = event["response"]["id"].as_str()
            {
                self.previous = id.to_owned();
            }
            if event.get(DEEP).is_some() {
                return Ok(true);
            }
        }
        Ok(terminal)
    }

    /// Reads until the gateway closes the socket with `code`; the events before the close.
    async fn closed(
        &mut self,
        socket: &mut Socket,
        code: u16,
    ) -> Result<Vec<Value>, TestCaseError> {
        let mut events = Vec::new();
        loop {
            let message = match tokio::time::timeout(ANSWER, socket.next()).await {
                Err(_) => return Err(TestCaseError::fail(format!("no close {code} in time"))),
                Ok(None) => {
                    return Err(TestCaseError::fail(format!("ended without a close {code}")));
                }
                Ok(Some(Err(e))) => {
                    return Err(TestCaseError::fail(format!(
                        "broken before a close {code}: {e}"
                    )));
                }
                Ok(Some(Ok(message))) => message,
            };
            match message {
                Message::Text(text) => {
                    events.push(serde_json::from_str(&text).unwrap_or(Value::Null))
                }
                Message::Close(Some(close)) => {
                    prop_assert_eq!(u16::from(close.code), code, "{:?}", close);
                    return Ok(events);
                }
                Message::Close(None) => return Err(TestCaseError::fail("a close without a code")),
                _ => {}
            }
        }
    }
}
