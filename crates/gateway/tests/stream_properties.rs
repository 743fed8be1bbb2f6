//! Property tests of the stream pipeline without HTTP: upstream bytes → `SseByteStream` →
//! `ChunkDecoder` → `Assembler`, with the gateway's pump loop replicated here (the gateway's own
//! is private): each SSE `data` goes to `decoder.on_data`; on `[DONE]` or the end of the bytes
//! `decoder.finish` then `assembler.finish`; on a decoder error `assembler.fail` with its code;
//! on an SSE error `assembler.fail` with `upstream_stream_error`, as the gateway does.
//!
//! (a) Any re-chunking of a recorded fixture (`tests/fixtures/streams/*.sse`; split points
//!     anywhere, inside UTF-8 sequences, inside `data:` lines, between CR and LF) gives the same
//!     events and the same final response as the whole body in one piece. Ids and timestamps are
//!     fixed arguments of the assembler here, so the comparison needs no normalisation.
//! (b) Arbitrary bytes, SSE-ish fragments and sequences of random JSON-ish payloads never panic
//!     and always end in exactly one terminal event, last, with the stream invariants kept
//!     (sequence numbers from 0, items done only once after being added, the final output being
//!     the done items).
//!
//! Case counts are small (64) so the whole file runs in seconds; failures are not persisted to
//! disk (proptest prints the minimal failing input).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{Value, json};
use sse_stream::SseByteStream;
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::plan::plan;
use toolbridge_core::reasoning::ReasoningDisplay;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_gateway::parse_request;
use toolbridge_providers::chat::stream::{ChunkDecoder, Flow};
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::Response;

const CASES: u32 = 64;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/streams")
}

/// What one run needs: the profile and the request an assembler is built from.
#[derive(Clone, Debug)]
struct Setup {
    profile: Profile,
    request: Value,
}

impl Setup {
    fn new(preset: &str, request: Value) -> Self {
        Self {
            profile: Profile::preset(preset).unwrap_or_else(|| panic!("preset {preset}")),
            request,
        }
    }

    /// The assembler the gateway would build for this request (fixed id and timestamps, no
    /// sealer).
    fn assembler(&self) -> Assembler {
        let req = parse_request(self.request.to_string().as_bytes()).expect("request parses");
        let canonical = normalize(&req, &Limits::default()).expect("request is valid");
        let plan = plan(
            &canonical.tools,
            canonical.tool_choice.as_ref(),
            &self.profile.tools,
        )
        .expect("tools plan");
        let mut diagnostics = canonical.diagnostics.clone();
        diagnostics.extend(plan.diagnostics.iter().cloned());
        let meta = ResponseMeta {
            id: "resp_property".to_owned(),
            created_at: 1_700_000_000,
            stored: false,
        };
        Assembler::new(
            skeleton(&req, &meta),
            AssembleOptions {
                contract: canonical.output.clone(),
                diagnostics,
                names: Arc::new(plan.names),
                reasoning: ReasoningDisplay::for_request(&req),
                sealer: None,
                echo_tools: plan.echo_tools,
                repair: None,
            },
        )
    }
}

/// A recorded fixture: its name, setup and raw bytes.
struct Fixture {
    name: String,
    setup: Setup,
    bytes: Vec<u8>,
}

fn fixtures() -> Vec<Fixture> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".sse").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 10, "the fixtures are there: {names:?}");
    names
        .into_iter()
        .map(|name| {
            let dir = fixtures_dir();
            let bytes = std::fs::read(dir.join(format!("{name}.sse"))).unwrap();
            let text = std::fs::read_to_string(dir.join(format!("{name}.request.json"))).unwrap();
            let mut request: Value = serde_json::from_str(&text).unwrap();
            let preset = request
                .as_object_mut()
                .and_then(|o| o.remove("preset"))
                .and_then(|p| p.as_str().map(str::to_owned))
                .unwrap_or_else(|| "generic".to_owned());
            Fixture {
                name,
                setup: Setup::new(&preset, request),
                bytes,
            }
        })
        .collect()
}

/// The pump: the gateway's loop over one upstream body given as `pieces`. Returns the events as
/// JSON (as they would be framed) and the final response.
fn pump(setup: &Setup, pieces: Vec<Vec<u8>>) -> (Vec<Value>, Response) {
    futures::executor::block_on(async {
        let profile = &setup.profile;
        let mut assembler = setup.assembler();
        let upstream = futures::stream::iter(
            pieces
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(Bytes::from(p))),
        );
        let mut sse = Box::pin(SseByteStream::new(upstream));
        let mut decoder = ChunkDecoder::new(profile);
        let mut out = Vec::new();
        let mut pending = Vec::new();
        let mut diagnostics = Vec::new();
        assembler.start(&mut out);
        // `None`: a normal end; `Some((code, message))`: a failure.
        let failure = loop {
            match sse.next().await {
                Some(Ok(event)) => {
                    let Some(data) = event.data else { continue };
                    let flow = decoder.on_data(profile, &data, &mut pending, &mut diagnostics);
                    for d in diagnostics.drain(..) {
                        assembler.add_diagnostic(d);
                    }
                    for ev in pending.drain(..) {
                        assembler.on_event(ev, &mut out);
                    }
                    match flow {
                        Ok(Flow::Continue) => {}
                        Ok(Flow::Done) => break None,
                        Err(e) => break Some((e.code().to_owned(), e.to_string())),
                    }
                }
                Some(Err(e)) => {
                    break Some((
                        "upstream_stream_error".to_owned(),
                        format!("the upstream stream could not be read: {e}"),
                    ));
                }
                None => break None,
            }
        };
        let response = match failure {
            Some((code, message)) => assembler.fail(&code, message, 1_700_000_001, &mut out),
            None => {
                decoder.finish(&mut pending);
                for ev in pending.drain(..) {
                    assembler.on_event(ev, &mut out);
                }
                assembler.finish(1_700_000_001, &mut out)
            }
        };
        let events = out
            .iter()
            .map(|e| serde_json::to_value(e).expect("an event serialises"))
            .collect();
        (events, response)
    })
}

/// `bytes` cut at the positions `splits` pick (sorted; empty pieces kept).
fn split(bytes: &[u8], splits: &[Index]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = splits.iter().map(|i| i.index(bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for cut in cuts {
        pieces.push(bytes[start..cut].to_vec());
        start = cut;
    }
    pieces.push(bytes[start..].to_vec());
    pieces
}

/// The invariants every transcript keeps, whatever the upstream sent.
fn check_transcript(events: &[Value], response: &Response) {
    assert!(
        events.len() >= 3,
        "created, in_progress, terminal: {events:#?}"
    );
    for (i, e) in events.iter().enumerate() {
        assert_eq!(
            e["sequence_number"], i as u64,
            "sequence_number of event {i}"
        );
    }
    assert_eq!(events[0]["type"], "response.created");
    assert_eq!(events[1]["type"], "response.in_progress");
    let is_terminal = |e: &Value| {
        matches!(
            e["type"].as_str(),
            Some("response.completed" | "response.failed" | "response.incomplete")
        )
    };
    let terminals: Vec<usize> = (0..events.len())
        .filter(|&i| is_terminal(&events[i]))
        .collect();
    assert_eq!(
        terminals,
        [events.len() - 1],
        "exactly one terminal event, last"
    );
    let terminal = &events[events.len() - 1];
    let final_response = serde_json::to_value(response).unwrap();
    assert_eq!(
        terminal["response"], final_response,
        "the terminal event carries the response"
    );
    let status = final_response["status"].as_str().unwrap();
    match terminal["type"].as_str().unwrap() {
        "response.completed" => {
            assert_eq!(status, "completed");
            assert!(final_response["error"].is_null());
        }
        "response.failed" => {
            assert_eq!(status, "failed");
            assert!(
                final_response["error"]["code"].is_string(),
                "{final_response}"
            );
        }
        _ => {
            assert_eq!(status, "incomplete");
            assert!(final_response["incomplete_details"]["reason"].is_string());
        }
    }

    let mut added: Vec<(u64, Value)> = Vec::new();
    let mut done: Vec<(u64, Value)> = Vec::new();
    for e in events {
        let index = e["output_index"].as_u64();
        match e["type"].as_str().unwrap() {
            "response.output_item.added" => {
                let index = index.unwrap();
                assert!(
                    added.iter().all(|(i, _)| *i != index),
                    "index {index} added twice"
                );
                added.push((index, e["item"]["id"].clone()));
            }
            "response.output_item.done" => {
                let index = index.unwrap();
                assert!(
                    done.iter().all(|(i, _)| *i != index),
                    "index {index} done twice"
                );
                let added_id = added.iter().find(|(i, _)| *i == index).map(|(_, id)| id);
                assert_eq!(
                    added_id,
                    Some(&e["item"]["id"]),
                    "done without added at {index}"
                );
                done.push((index, e["item"].clone()));
            }
            kind => {
                if let (Some(index), Some(item_id)) = (index, e.get("item_id")) {
                    assert!(
                        done.iter().all(|(i, _)| *i != index),
                        "{kind} after the item at {index} was done"
                    );
                    let added_id = added.iter().find(|(i, _)| *i == index).map(|(_, id)| id);
                    assert_eq!(added_id, Some(item_id), "{kind} for an item never added");
                }
            }
        }
    }
    done.sort_by_key(|(i, _)| *i);
    let done_items: Vec<&Value> = done.iter().map(|(_, item)| item).collect();
    let output: Vec<&Value> = final_response["output"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(
        output, done_items,
        "the final output is exactly the done items"
    );
}

/// Every fixture, every byte its own piece: the most extreme re-chunking.
#[test]
fn byte_by_byte_gives_the_same_transcript_as_one_piece() {
    for f in fixtures() {
        let whole = pump(&f.setup, vec![f.bytes.clone()]);
        check_transcript(&whole.0, &whole.1);
        let bytes: Vec<Vec<u8>> = f.bytes.iter().map(|b| vec![*b]).collect();
        let split = pump(&f.setup, bytes);
        assert_eq!(split.0, whole.0, "{}: events", f.name);
    }
}

/// Sanity: the pump here agrees with what the fixtures are about (a few spot checks, so that a
/// broken pump cannot make the properties vacuous).
#[test]
fn the_replicated_pump_sees_the_fixtures_as_the_gateway_does() {
    let all = fixtures();
    let status = |name: &str| {
        let f = all.iter().find(|f| f.name == name).unwrap();
        let (_, response) = pump(&f.setup, vec![f.bytes.clone()]);
        serde_json::to_value(&response).unwrap()
    };
    assert_eq!(status("text_many_chunks")["status"], "completed");
    assert_eq!(
        status("text_many_chunks")["output"][0]["content"][0]["text"],
        "Hello, wörld! Ünïcödé → 日本語 and emoji 🦀."
    );
    assert_eq!(
        status("empty_stream")["error"]["toolbridge_code"],
        "empty_upstream_response"
    );
    assert_eq!(status("empty_stream")["error"]["code"], "server_error");
    assert_eq!(status("error_chunk_mid_stream")["status"], "failed");
    assert_eq!(status("length_finish")["status"], "incomplete");
    assert_eq!(
        status("custom_tool_apply_patch")["output"][0]["type"],
        "custom_tool_call"
    );
    let parallel = status("parallel_tool_calls_interleaved");
    assert_eq!(
        parallel["output"][1]["arguments"],
        "{\"timezone\":\"Europe/Paris\"}"
    );
}

proptest! {
    #![proptest_config(config())]

    /// (a) Re-chunking a fixture anywhere changes nothing the client sees.
    #[test]
    fn any_rechunking_of_a_fixture_gives_the_same_response(
        splits in prop::collection::vec(any::<Index>(), 0..48),
    ) {
        for f in fixtures() {
            let whole = pump(&f.setup, vec![f.bytes.clone()]);
            let pieces = split(&f.bytes, &splits);
            let again = pump(&f.setup, pieces);
            prop_assert_eq!(
                serde_json::to_value(&again.1).unwrap(),
                serde_json::to_value(&whole.1).unwrap(),
                "{}: final response", &f.name
            );
            prop_assert_eq!(&again.0, &whole.0, "{}: events", &f.name);
        }
    }

    /// (b) Arbitrary bytes end in exactly one terminal event.
    #[test]
    fn arbitrary_bytes_end_in_one_terminal_event(
        setup in setups(),
        bytes in prop::collection::vec(any::<u8>(), 0..1024),
        splits in prop::collection::vec(any::<Index>(), 0..16),
    ) {
        let (events, response) = pump(&setup, split(&bytes, &splits));
        check_transcript(&events, &response);
    }

    /// (b) SSE-shaped noise: fragments of the SSE grammar, JSON and broken UTF-8, concatenated.
    #[test]
    fn sse_shaped_noise_ends_in_one_terminal_event(
        setup in setups(),
        fragments in prop::collection::vec(fragment(), 0..64),
        splits in prop::collection::vec(any::<Index>(), 0..16),
    ) {
        let bytes: Vec<u8> = fragments.concat();
        let (events, response) = pump(&setup, split(&bytes, &splits));
        check_transcript(&events, &response);
    }

    /// (b) Sequences of random JSON-ish payloads, each a well-formed SSE event.
    #[test]
    fn random_payload_sequences_end_in_one_terminal_event(
        setup in setups(),
        payloads in prop::collection::vec(payload(), 0..24),
        crlf in any::<bool>(),
        splits in prop::collection::vec(any::<Index>(), 0..16),
    ) {
        let nl = if crlf { "\r\n" } else { "\n" };
        let body: String = payloads.iter().map(|p| format!("data: {p}{nl}{nl}")).collect();
        let (events, response) = pump(&setup, split(body.as_bytes(), &splits));
        check_transcript(&events, &response);
    }
}

/// The generators reach every outcome: without this, a generator that only ever produced
/// skipped chunks would make the properties above pass vacuously.
#[test]
fn random_payloads_reach_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = (setups(), prop::collection::vec(payload(), 0..24));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..300 {
        let (setup, payloads) = strategy.new_tree(&mut runner).unwrap().current();
        let body: String = payloads.iter().map(|p| format!("data: {p}\n\n")).collect();
        let (events, response) = pump(&setup, vec![body.into_bytes()]);
        check_transcript(&events, &response);
        let response = serde_json::to_value(&response).unwrap();
        seen.insert(format!("status:{}", response["status"].as_str().unwrap()));
        // The gateway's own code where it is finer than the documented one.
        let error = &response["error"];
        if let Some(code) = error["toolbridge_code"].as_str().or(error["code"].as_str()) {
            seen.insert(format!("error:{code}"));
        }
        for item in response["output"].as_array().unwrap() {
            seen.insert(format!("item:{}", item["type"].as_str().unwrap()));
        }
    }
    eprintln!("outcomes reached: {seen:?}");
    for expected in [
        "status:completed",
        "status:failed",
        "status:incomplete",
        "error:empty_upstream_response",
        "item:message",
        "item:reasoning",
        "item:function_call",
        "item:custom_tool_call",
    ] {
        assert!(
            seen.contains(expected),
            "{expected} never reached: {seen:?}"
        );
    }
}

/// A request declaring a function, a custom tool and a namespaced function, under a preset that
/// streams reasoning differently (fields, `<think>` tags) or not at all.
fn setups() -> impl Strategy<Value = Setup> {
    let presets = vec!["generic", "deepseek", "ollama", "glm", "minimax", "qwen"];
    (prop::sample::select(presets), any::<bool>()).prop_map(|(preset, summary)| {
        let mut request = json!({
            "model": "m",
            "input": "go",
            "stream": true,
            "tools": [
                {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
                {"type": "custom", "name": "apply_patch", "description": "Edit files."},
                {"type": "namespace", "name": "agents", "description": "agents", "tools": [{"type": "function", "name": "close", "parameters": {"type": "object", "properties": {}}}]},
            ],
        });
        if summary {
            request["reasoning"] = json!({"summary": "auto"});
        }
        Setup::new(preset, request)
    })
}

/// A piece of SSE-ish input.
fn fragment() -> impl Strategy<Value = Vec<u8>> {
    let fixed: Vec<&'static [u8]> = vec![
        b"data: ",
        b"data:",
        b"\n",
        b"\r\n",
        b"\r",
        b"\n\n",
        b"[DONE]",
        b": keep-alive\n",
        b"event: message\n",
        b"id: 1\n",
        b"retry: 10\n",
        b"{",
        b"}",
        b"\"choices\":[{\"delta\":{\"content\":\"",
        b"\"}}]",
        b"\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"get_weather\",\"arguments\":\"",
        b"{\"error\":{\"message\":\"boom\"}}",
        b"\xF0\x9F\xA6\x80",
        b"\xF0\x9F",
        b"\xFF",
        b"\xEF\xBB\xBF",
        b"<think>",
        b"</think>",
    ];
    prop_oneof![
        4 => prop::sample::select(fixed).prop_map(<[u8]>::to_vec),
        1 => prop::collection::vec(any::<u8>(), 0..8),
        2 => payload().prop_map(String::into_bytes),
    ]
}

/// One `data:` payload: mostly Chat chunks built from random parts, sometimes other JSON, error
/// objects, `[DONE]` or any text without line breaks.
fn payload() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => chunk().prop_map(|c| c.to_string()),
        1 => Just("[DONE]".to_owned()),
        1 => prop_oneof![
            Just(json!({"error": {"message": "mid-stream failure", "code": "server_error"}})),
            Just(json!({"error": "plain"})),
            Just(json!({"error": {"message": "Rate limit reached", "type": "rate_limit_error"}})),
            Just(json!({"choices": null})),
            Just(json!({})),
            Just(json!([])),
            Just(json!(null)),
            Just(json!(42)),
            Just(json!({"choices": [{"index": 0, "delta": null}]})),
            Just(json!({"choices": [{"index": 0, "delta": {"content": 7}}]})),
            Just(json!({"base_resp": {"status_code": 1002, "status_msg": "rate limited"}})),
        ]
        .prop_map(|v| v.to_string()),
        1 => "[^\r\n]{0,40}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "", " ", "\n", "Hello", "é", "🦀", "<think>", "</think>", "<th", "ink>", "</thi",
            "nk>", "{", "}",
        ])
        .prop_map(str::to_owned),
        "\\PC{0,12}",
    ]
}

fn chunk() -> impl Strategy<Value = Value> {
    let tool_call = (
        prop::option::of(0u32..3),
        prop::option::of(prop::sample::select(vec!["call_a", "call_b", ""])),
        prop::option::of(prop::sample::select(vec![
            "get_weather",
            "apply_patch",
            "agents__close",
            "nope",
            "",
        ])),
        prop::option::of(prop_oneof![
            prop::sample::select(vec![
                "",
                "{",
                "}",
                "{\"city\":\"Oslo\"}",
                "{\"input\":\"*** Begin Patch\\n*** End Patch\\n\"}",
                "not json",
                "\"",
            ])
            .prop_map(|s| Value::String(s.to_owned())),
            Just(json!({"city": "Oslo"})),
            Just(Value::Null),
        ]),
    )
        .prop_map(|(index, id, name, arguments)| {
            let mut call = json!({"type": "function"});
            if let Some(index) = index {
                call["index"] = json!(index);
            }
            if let Some(id) = id {
                call["id"] = json!(id);
            }
            let mut function = json!({});
            if let Some(name) = name {
                function["name"] = json!(name);
            }
            if let Some(arguments) = arguments {
                function["arguments"] = arguments;
            }
            call["function"] = function;
            call
        });
    (
        prop::option::of(text()),
        prop::option::of(text()),
        prop::option::of(text()),
        prop::option::of(prop::collection::vec(tool_call, 0..3)),
        prop::option::of(prop::sample::select(vec![
            "stop",
            "length",
            "tool_calls",
            "content_filter",
            "function_call",
            "eos",
            "",
        ])),
        any::<bool>(),
        0u32..2,
    )
        .prop_map(
            |(content, reasoning, refusal, tool_calls, finish, usage, choice)| {
                let mut delta = json!({});
                if let Some(c) = content {
                    delta["content"] = json!(c);
                }
                if let Some(r) = reasoning {
                    delta["reasoning_content"] = json!(r);
                }
                if let Some(r) = refusal {
                    delta["refusal"] = json!(r);
                }
                if let Some(t) = tool_calls {
                    delta["tool_calls"] = json!(t);
                }
                let mut chunk = json!({
                    "id": "chatcmpl-p",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": choice, "delta": delta, "finish_reason": finish}],
                });
                if usage {
                    chunk["usage"] =
                        json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7});
                }
                chunk
            },
        )
}
