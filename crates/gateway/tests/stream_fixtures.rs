//! Recorded upstream streams → exact client transcripts. Each scenario in
//! `tests/fixtures/streams/` (a raw Chat Completions SSE body `NAME.sse` and the Responses
//! request `NAME.request.json`, see the README there) is replayed through the whole app in
//! process: the fake upstream serves the bytes split into a few writes, the gateway streams to
//! the client, and the list of event `data` objects is snapshotted with insta
//! (`tests/snapshots/stream_fixtures__NAME.snap`). Generated ids and timestamps are normalised
//! first, keeping them consistent within a transcript: the response id's random part becomes
//! `[id]` wherever it appears (`resp_[id]`, `msg_[id]001`, `call_fc_[id]002`), `created_at` and
//! `completed_at` become `[timestamp]` and `encrypted_content` becomes `[encrypted]`.
//!
//! A changed transcript fails its test (insta writes `.snap.new` next to the snapshot); so does a
//! fixture without a test below.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::path::{Path, PathBuf};

use common::Harness;
use serde_json::{Map, Value};
use toolbridge_testkit::Reply;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/streams")
}

/// One scenario: the preset, the request to send and the upstream's raw SSE body.
struct Fixture {
    preset: String,
    request: Value,
    sse: String,
}

fn load(name: &str) -> Fixture {
    let dir = fixtures_dir();
    let sse = std::fs::read_to_string(dir.join(format!("{name}.sse")))
        .unwrap_or_else(|e| panic!("{name}.sse: {e}"));
    let text = std::fs::read_to_string(dir.join(format!("{name}.request.json")))
        .unwrap_or_else(|e| panic!("{name}.request.json: {e}"));
    let mut request: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}.request.json: {e}"));
    let preset = request
        .as_object_mut()
        .and_then(|o| o.remove("preset"))
        .and_then(|p| p.as_str().map(str::to_owned))
        .unwrap_or_else(|| "generic".to_owned());
    Fixture {
        preset,
        request,
        sse,
    }
}

/// `text` cut into `n` pieces of about equal size (on char boundaries, so mid-line and often
/// mid-JSON), each a separate write of the fake upstream.
fn pieces(text: &str, n: usize) -> Vec<String> {
    let mut cuts = vec![0];
    for i in 1..n {
        let mut at = text.len() * i / n;
        while !text.is_char_boundary(at) {
            at += 1;
        }
        if at > *cuts.last().unwrap() && at < text.len() {
            cuts.push(at);
        }
    }
    cuts.push(text.len());
    cuts.windows(2)
        .map(|w| text[w[0]..w[1]].to_owned())
        .collect()
}

/// Replaces generated ids and timestamps by stable placeholders (see the module docs).
fn normalise(value: &mut Value, id_part: &str) {
    match value {
        Value::String(s) if !id_part.is_empty() && s.contains(id_part) => {
            *s = s.replace(id_part, "[id]");
        }
        Value::Array(items) => items.iter_mut().for_each(|v| normalise(v, id_part)),
        Value::Object(map) => normalise_object(map, id_part),
        _ => {}
    }
}

fn normalise_object(map: &mut Map<String, Value>, id_part: &str) {
    for (key, v) in map.iter_mut() {
        match (key.as_str(), &v) {
            ("created_at" | "completed_at", Value::Number(_)) => {
                *v = Value::String("[timestamp]".to_owned());
            }
            ("encrypted_content", Value::String(_)) => {
                *v = Value::String("[encrypted]".to_owned());
            }
            _ => normalise(v, id_part),
        }
    }
}

/// Checks that every event naming an item (`item_id` + `output_index`) names the item added at
/// that index, and that the terminal response's output lists exactly the completed items.
fn check_ids(events: &[Value]) {
    let mut added: Vec<(u64, Value)> = Vec::new();
    let mut done: Vec<(u64, Value)> = Vec::new();
    for e in events {
        let index = e["output_index"].as_u64();
        match e["type"].as_str().unwrap() {
            "response.output_item.added" => {
                let index = index.unwrap();
                assert!(
                    added.iter().all(|(i, _)| *i != index),
                    "output_index {index} added twice"
                );
                added.push((index, e["item"]["id"].clone()));
            }
            "response.output_item.done" => done.push((index.unwrap(), e["item"].clone())),
            _ => {
                if let (Some(index), Some(item_id)) = (index, e.get("item_id")) {
                    let known = added.iter().find(|(i, _)| *i == index);
                    assert_eq!(
                        known.map(|(_, id)| id),
                        Some(item_id),
                        "{} names an item that was not added at {index}",
                        e["type"]
                    );
                }
            }
        }
    }
    let terminal = events.last().unwrap();
    let output = terminal["response"]["output"].as_array().unwrap();
    done.sort_by_key(|(i, _)| *i);
    let done_items: Vec<&Value> = done.iter().map(|(_, item)| item).collect();
    let output_items: Vec<&Value> = output.iter().collect();
    assert_eq!(
        output_items, done_items,
        "the terminal response's output is the completed items"
    );
    let ids: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.get("response").map(|r| &r["id"]))
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] == w[1]),
        "one response id: {ids:?}"
    );
}

/// Replays one fixture and returns the normalised transcript.
async fn transcript(name: &str) -> Vec<Value> {
    let fixture = load(name);
    let h = Harness::with_preset(&fixture.preset).await;
    h.upstream.push(Reply::sse_raw(pieces(&fixture.sse, 4)));
    let events = h.post_stream(&fixture.request).await;
    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 1, "one upstream request");
    assert_eq!(requests[0].body["stream"], true);
    let mut data: Vec<Value> = events.into_iter().map(|e| e.data).collect();
    check_ids(&data);
    let response_id = data[0]["response"]["id"].as_str().unwrap().to_owned();
    let id_part = response_id
        .strip_prefix("resp_")
        .expect("resp_ prefix")
        .to_owned();
    assert!(id_part.len() >= 16, "a random response id: {response_id}");
    for event in &mut data {
        normalise(event, &id_part);
    }
    data
}

async fn snapshot(name: &str) {
    let data = transcript(name).await;
    insta::assert_json_snapshot!(name, data);
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        /// Every scenario with a test below.
        const SCENARIOS: &[&str] = &[$(stringify!($name)),*];
        $(
            #[tokio::test]
            async fn $name() {
                snapshot(stringify!($name)).await;
            }
        )*
    };
}

scenarios!(
    text_many_chunks,
    usage_final_chunk,
    usage_with_finish,
    missing_finish_reason,
    missing_done,
    empty_stream,
    malformed_chunk_skipped,
    error_chunk_mid_stream,
    parallel_tool_calls_interleaved,
    tool_calls_without_index,
    call_id_on_later_chunk,
    call_id_after_arguments,
    arguments_whole_chunk,
    deepseek_reasoning_then_text,
    ollama_think_tags_split,
    custom_tool_apply_patch,
    length_finish,
    crlf_line_endings,
    multiline_data,
    keepalive_comments,
    text_then_tool_call,
    unknown_finish_reason,
    eof_mid_answer,
    eof_mid_tool_call,
    last_event_unterminated,
);

#[test]
fn every_fixture_has_a_test_and_a_request() {
    let mut on_disk: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".sse").map(str::to_owned)
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = SCENARIOS.iter().map(|s| (*s).to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "fixtures on disk vs scenarios!(..)");
    for name in &on_disk {
        let fixture = load(name);
        assert_eq!(
            fixture.request["stream"], true,
            "{name}: a streamed request"
        );
        assert!(
            toolbridge_providers::profile::Profile::preset(&fixture.preset).is_some(),
            "{name}: unknown preset {}",
            fixture.preset
        );
    }
}

#[test]
fn pieces_cover_the_text_on_char_boundaries() {
    let text = "data: {\"a\":\"é🦀\"}\n\n";
    for n in 1..=text.len() + 1 {
        assert_eq!(pieces(text, n).concat(), text);
    }
    assert_eq!(pieces("", 4), [""]);
}
