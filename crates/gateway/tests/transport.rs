//! Ring 2: transport. Compressed request bodies (and bombs), unknown encodings, keep-alive
//! comments during upstream silence, a burst of upstream events written in a few pieces (and
//! spaced ones each at once), and a client disconnect reaching the upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::io::Write;
use std::time::Duration;

use common::Harness;
use futures::StreamExt;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::{chunk, completion};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn brotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        writer.write_all(data).unwrap();
    }
    out
}

async fn post_encoded(h: &Harness, encoding: &str, body: Vec<u8>) -> (u16, Value) {
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .header("content-type", "application/json")
        .header("content-encoding", encoding)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn compressed_request_bodies_are_decoded() {
    let h = Harness::with_preset("generic").await;
    let request = serde_json::to_vec(&json!({"model": "m", "input": "compressed hello"})).unwrap();
    let bodies = [
        ("gzip", gzip(&request)),
        ("br", brotli(&request)),
        ("zstd", zstd::encode_all(request.as_slice(), 3).unwrap()),
    ];
    for (encoding, body) in bodies {
        h.upstream.push(Reply::json(completion("ok", "stop")));
        let (status, answer) = post_encoded(&h, encoding, body).await;
        assert_eq!(status, 200, "{encoding}: {answer}");
        assert_eq!(
            h.upstream.last_body()["messages"][0]["content"],
            "compressed hello"
        );
    }
}

#[tokio::test]
async fn a_compression_bomb_is_a_413_and_an_unknown_encoding_a_415() {
    let h = Harness::with_toml(|url| {
        format!(
            "body_limit_bytes = 65536\n[providers.up]\nbase_url = \"{url}\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        )
    })
    .await;
    // 32 MiB of spaces inside valid JSON compress to a few tens of KB.
    let mut bomb = br#"{"model": "m", "input": "x""#.to_vec();
    bomb.extend(std::iter::repeat_n(b' ', 32 * 1024 * 1024));
    bomb.push(b'}');
    let compressed = gzip(&bomb);
    assert!(
        compressed.len() < 65536,
        "the compressed bomb fits under the limit"
    );
    let (status, body) = post_encoded(&h, "gzip", compressed).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "request_too_large");

    let (status, body) = post_encoded(&h, "snappy", b"{}".to_vec()).await;
    assert_eq!(status, 415);
    assert_eq!(body["error"]["code"], "unsupported_content_encoding");
    assert!(h.upstream.requests().is_empty());
}

#[tokio::test]
async fn long_upstream_silences_get_keep_alive_comments() {
    let h = Harness::with_toml(|url| {
        format!(
            "keepalive_secs = 1\n[providers.up]\nbase_url = \"{url}\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        )
    })
    .await;
    h.upstream.push(Reply::Stream {
        pieces: vec![
            format!("data: {}\n\n", chunk(json!({"content": "slow"}), None)),
            format!("data: {}\n\n", chunk(json!({}), Some("stop"))),
            "data: [DONE]\n\n".to_owned(),
        ],
        pause: Duration::from_millis(2300),
    });
    let response = h
        .post(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    let text = response.text().await.unwrap();
    assert!(text.contains(": keep-alive\n\n"), "{text}");
    // Comments do not disturb the event stream.
    let events = toolbridge_testkit::sse::parse(&text);
    common::check_stream(&events, h.schema.as_ref());
    assert_eq!(events.last().unwrap().data["type"], "response.completed");
}

/// The pieces of a streamed answer's body as they come off the socket, and its text.
async fn pieces(response: reqwest::Response) -> (Vec<String>, String) {
    let mut body = response.bytes_stream();
    let mut pieces = Vec::new();
    while let Some(piece) = body.next().await {
        pieces.push(String::from_utf8(piece.unwrap().to_vec()).unwrap());
    }
    let text = pieces.concat();
    (pieces, text)
}

/// `n` text chunks, a finish chunk and `[DONE]`, as Chat SSE events.
fn text_events(n: usize) -> Vec<String> {
    let mut events: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "data: {}\n\n",
                chunk(json!({"content": format!("t{i} ")}), None)
            )
        })
        .collect();
    events.push(format!("data: {}\n\n", chunk(json!({}), Some("stop"))));
    events.push("data: [DONE]\n\n".to_owned());
    events
}

#[tokio::test]
async fn a_burst_goes_out_in_a_few_pieces_and_spaced_events_each_at_once() {
    let h = Harness::with_preset("generic").await;
    // Forty deltas in one upstream write: batches of at most 16 upstream events, each batch
    // one piece of the body.
    h.upstream.push(Reply::Stream {
        pieces: vec![text_events(40).concat()],
        pause: Duration::ZERO,
    });
    let response = h
        .post(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    let (burst, text) = pieces(response).await;
    let events = toolbridge_testkit::sse::parse(&text);
    common::check_stream(&events, h.schema.as_ref());
    let deltas = events
        .iter()
        .filter(|e| e.data["type"] == "response.output_text.delta")
        .count();
    assert_eq!(deltas, 40);
    assert!(
        burst.len() <= 8,
        "{} pieces for {} events",
        burst.len(),
        events.len()
    );
    // The same deltas, each written after a pause: none waits for the next.
    h.upstream.push(Reply::Stream {
        pieces: text_events(5),
        pause: Duration::from_millis(150),
    });
    let response = h
        .post(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    let (spaced, _) = pieces(response).await;
    let with_delta = spaced
        .iter()
        .filter(|p| p.contains("event: response.output_text.delta"))
        .count();
    assert_eq!(with_delta, 5, "{spaced:#?}");
}

#[tokio::test]
async fn a_client_disconnect_closes_the_upstream_stream() {
    let h = Harness::with_preset("generic").await;
    let mut pieces = vec![format!(
        "data: {}\n\n",
        chunk(json!({"content": "first"}), None)
    )];
    for _ in 0..50 {
        pieces.push(format!(
            "data: {}\n\n",
            chunk(json!({"content": "."}), None)
        ));
    }
    h.upstream.push(Reply::Stream {
        pieces,
        pause: Duration::from_millis(100),
    });
    // Not stored: nothing needs the rest of the answer. (A stored stream is read to its end by
    // default, or stopped the same way with `on_client_disconnect = "cancel"`: issue 15,
    // client_disconnect.rs.)
    let response = h
        .post(&json!({"model": "m", "input": "x", "stream": true, "store": false}))
        .await;
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(!first.is_empty());
    drop(body);
    // The upstream notices within a few pieces, not after the whole stream (5 s).
    let mut waited = Duration::ZERO;
    while h.upstream.abandoned_streams() == 0 && waited < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    assert_eq!(
        h.upstream.abandoned_streams(),
        1,
        "the upstream connection stayed open"
    );
}
