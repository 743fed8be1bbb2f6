//! Benchmarks of the gateway's two hot paths, with no I/O:
//!
//! - `request/*`: a Codex-sized Responses request (about 44 KB, 10 tools) parsed, normalised and
//!   translated to a Chat Completions body (`request/codex_to_chat`), and parsed alone
//!   (`request/parse_only`) so the share of JSON parsing is visible.
//! - `stream/*`: a 2,000-chunk Chat Completions stream decoded and reconstructed into Responses
//!   stream events (`stream/chat_2000_chunks`), and the same with every event encoded as the SSE
//!   frame that goes on the wire (`stream/chat_2000_chunks_with_sse_encoding`). Throughput is
//!   reported in upstream chunks per second.
//! - `stream/tool_call_deltas_2000`: a stream of about 2,000 chunks that is mostly tool-call
//!   argument deltas (a short text preamble, then three parallel calls, keyed by index, whose
//!   arguments arrive interleaved in about 650 small pieces each), decoded and reconstructed.
//!   Throughput is reported in Responses events produced per second.
//!
//! The request input is the recorded Codex request
//! `$TOOLBRIDGE_SHARED_DIR/fixtures/codex-0.169.0/three_turn-gpt-5.5/003-request.json`
//! (default shared dir: `shared/` beside the workspace); when it is absent an equivalent request
//! is generated in code.

// Benches are test code: a broken fixture should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::contract::OutputContract;
use toolbridge_core::plan::{NameMap, plan as plan_tools};
use toolbridge_core::request::{Limits, normalize};
use toolbridge_gateway::{frame, parse_request};
use toolbridge_providers::chat::request::build;
use toolbridge_providers::chat::stream::{ChunkDecoder, Flow};
use toolbridge_providers::profile::Profile;

#[path = "common/codex.rs"]
mod codex;
use codex::codex_request;

/// Upstream chunks per simulated stream (the usage chunk and `[DONE]` come on top).
const STREAM_CHUNKS: usize = 2_000;
/// Text chunks before the tool calls of the tool-call stream.
const TOOL_STREAM_TEXT_CHUNKS: usize = 40;
/// Argument pieces per call of the tool-call stream.
const TOOL_STREAM_PIECES_PER_CALL: usize = 650;
/// The parallel calls of the tool-call stream: tools the Codex request declares, so the plan's
/// name map knows them.
const TOOL_STREAM_CALLS: &[&str] = &["exec_command", "write_stdin", "view_image"];
const PRESET: &str = "deepseek";
const UPSTREAM_MODEL: &str = "deepseek-v4-flash";

// --- The stream ------------------------------------------------------------------------------

/// `STREAM_CHUNKS` Chat chunks as a provider sends them (role first, `finish_reason` last), then
/// a usage chunk and `[DONE]`.
fn chat_stream_payloads() -> Vec<String> {
    const WORDS: &[&str] = &[
        "The ",
        "gateway ",
        "translates ",
        "each ",
        "chunk ",
        "into ",
        "Responses ",
        "events",
        ", ",
        "keeping ",
        "`sequence_number` ",
        "monotonic",
        ".\n",
        "\"quoted\" ",
        "text ",
        "and ",
        "unicode — ",
        "ü ",
        "in ",
        "between",
        ". ",
    ];
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
        .to_string()
    };
    let mut payloads = Vec::with_capacity(STREAM_CHUNKS + 2);
    payloads.push(chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    for i in 1..STREAM_CHUNKS - 1 {
        payloads.push(chunk(
            json!({"content": WORDS[i % WORDS.len()]}),
            Value::Null,
        ));
    }
    payloads.push(chunk(json!({}), json!("stop")));
    payloads.push(
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 11_000, "completion_tokens": 1_998, "total_tokens": 12_998},
        })
        .to_string(),
    );
    payloads.push("[DONE]".to_owned());
    payloads
}

/// One Chat chunk with `delta` and an optional finish reason.
fn chat_chunk(delta: Value, finish: Value) -> String {
    json!({
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
    .to_string()
}

/// The JSON arguments of call `call`, long enough to give [`TOOL_STREAM_PIECES_PER_CALL`]
/// pieces of a few characters each (escapes, paths and a little non-ASCII included).
fn tool_arguments(call: usize) -> String {
    let mut script = String::new();
    let mut line = 0;
    while script.len() < TOOL_STREAM_PIECES_PER_CALL * 7 {
        script.push_str(&format!(
            "echo \"step {line} of call {call}: déjà vu\" >> /tmp/log-{call}.txt && cat src/module_{line}.rs | grep -n 'fn ' ; "
        ));
        line += 1;
    }
    json!({"cmd": script, "workdir": "/home/user/work", "yield_time_ms": 5000}).to_string()
}

/// Splits `text` into `n` pieces of about equal length, on character boundaries.
fn split_pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    (0..n)
        .map(|i| {
            chars[i * chars.len() / n..(i + 1) * chars.len() / n]
                .iter()
                .collect()
        })
        .collect()
}

/// A tool-call heavy stream: a role chunk, a short text preamble, then the opening chunk of each
/// call (id, name, empty arguments) followed by their argument pieces interleaved round-robin,
/// a `tool_calls` finish, a usage chunk and `[DONE]`.
fn tool_call_stream_payloads() -> Vec<String> {
    let mut payloads = Vec::new();
    payloads.push(chat_chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    for i in 0..TOOL_STREAM_TEXT_CHUNKS {
        payloads.push(chat_chunk(
            json!({"content": format!("checking part {i} ")}),
            Value::Null,
        ));
    }
    let pieces: Vec<Vec<String>> = (0..TOOL_STREAM_CALLS.len())
        .map(|call| split_pieces(&tool_arguments(call), TOOL_STREAM_PIECES_PER_CALL))
        .collect();
    for (index, name) in TOOL_STREAM_CALLS.iter().enumerate() {
        payloads.push(chat_chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": format!("call_{index}"),
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }]}),
            Value::Null,
        ));
    }
    let longest = pieces.iter().map(Vec::len).max().unwrap_or(0);
    for p in 0..longest {
        for (index, call_pieces) in pieces.iter().enumerate() {
            if let Some(piece) = call_pieces.get(p) {
                payloads.push(chat_chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    Value::Null,
                ));
            }
        }
    }
    payloads.push(chat_chunk(json!({}), json!("tool_calls")));
    payloads.push(
        json!({
            "id": "chatcmpl-2",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 11_000, "completion_tokens": 2_000, "total_tokens": 13_000},
        })
        .to_string(),
    );
    payloads.push("[DONE]".to_owned());
    payloads
}

// --- The benchmarks --------------------------------------------------------------------------

fn request_benches(c: &mut Criterion) {
    let body = codex_request();
    let profile = Profile::preset(PRESET).expect("the preset exists");

    // Check once, outside the timing, that the whole path works on this input.
    let req = parse_request(&body).expect("the request parses");
    let canonical = normalize(&req, &Limits::default()).expect("the request normalises");
    let plan = plan_tools(
        &canonical.tools,
        canonical.tool_choice.as_ref(),
        &profile.tools,
    )
    .expect("the tools plan");
    let mut diags = canonical.diagnostics.clone();
    diags.extend(plan.diagnostics.iter().cloned());
    let chat = build(&canonical, &plan, &profile, UPSTREAM_MODEL, &mut diags);
    let chat_bytes = serde_json::to_vec(&chat).expect("serialisable");
    eprintln!(
        "request: {} input bytes -> {} Chat bytes, {} messages, {} tools, {} diagnostics",
        body.len(),
        chat_bytes.len(),
        chat.messages.len(),
        chat.tools.as_ref().map_or(0, Vec::len),
        diags.len()
    );

    let mut group = c.benchmark_group("request");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("codex_to_chat", |b| {
        b.iter(|| {
            let req = parse_request(black_box(&body)).expect("parses");
            let canonical = normalize(&req, &Limits::default()).expect("normalises");
            let plan = plan_tools(
                &canonical.tools,
                canonical.tool_choice.as_ref(),
                &profile.tools,
            )
            .expect("plans");
            let mut diags = canonical.diagnostics.clone();
            diags.extend(plan.diagnostics.iter().cloned());
            let chat = build(&canonical, &plan, &profile, UPSTREAM_MODEL, &mut diags);
            let bytes = serde_json::to_vec(&chat).expect("serialisable");
            black_box((bytes, diags))
        });
    });
    group.bench_function("parse_only", |b| {
        b.iter(|| black_box(parse_request(black_box(&body)).expect("parses")));
    });
    group.finish();
}

/// Runs one whole stream through decoder and assembler; `encode` also frames every event as SSE.
/// Returns the number of events produced (and, with `encode`, the bytes framed).
fn run_stream(
    payloads: &[String],
    req: &toolbridge_wire::responses::CreateResponse,
    meta: &ResponseMeta,
    names: &Arc<NameMap>,
    profile: &Profile,
    encode: bool,
) -> (usize, usize) {
    let mut decoder = ChunkDecoder::new(profile);
    let mut assembler = Assembler::new(
        skeleton(req, meta),
        AssembleOptions {
            contract: OutputContract::Text,
            names: Arc::clone(names),
            ..AssembleOptions::default()
        },
    );
    let mut out = Vec::new();
    let mut events = Vec::new();
    let mut diags = Vec::new();
    let mut produced = 0;
    let mut framed = 0;
    let drain = |out: &mut Vec<_>, produced: &mut usize, framed: &mut usize| {
        *produced += out.len();
        if encode {
            for ev in out.drain(..) {
                *framed += black_box(frame(&ev)).len();
            }
        } else {
            black_box(&*out);
            out.clear();
        }
    };
    assembler.start(&mut out);
    drain(&mut out, &mut produced, &mut framed);
    for data in payloads {
        let flow = decoder
            .on_data(profile, black_box(data), &mut events, &mut diags)
            .expect("a well-formed chunk");
        for d in diags.drain(..) {
            assembler.add_diagnostic(d);
        }
        for ev in events.drain(..) {
            assembler.on_event(ev, &mut out);
        }
        drain(&mut out, &mut produced, &mut framed);
        if flow == Flow::Done {
            break;
        }
    }
    black_box(assembler.finish(0, &mut out));
    drain(&mut out, &mut produced, &mut framed);
    (produced, framed)
}

fn stream_benches(c: &mut Criterion) {
    let payloads = chat_stream_payloads();
    let profile = Profile::preset(PRESET).expect("the preset exists");
    // The skeleton echoes the request, so use the real Codex one: its tools are in every
    // `response.created`/`in_progress`/`completed` snapshot.
    let req = parse_request(&codex_request()).expect("the request parses");
    let meta = ResponseMeta {
        id: "resp_bench".to_owned(),
        created_at: 1,
        stored: false,
    };
    // The reconstruction maps upstream tool names back through the request's plan.
    let canonical = normalize(&req, &Limits::default()).expect("the request normalises");
    let names = Arc::new(
        plan_tools(
            &canonical.tools,
            canonical.tool_choice.as_ref(),
            &profile.tools,
        )
        .expect("the tools plan")
        .names,
    );
    let (events, bytes) = run_stream(&payloads, &req, &meta, &names, &profile, true);
    eprintln!(
        "stream: {} payloads ({} chunks + usage + [DONE], {} bytes) -> {events} events, {bytes} SSE bytes",
        payloads.len(),
        STREAM_CHUNKS,
        payloads.iter().map(String::len).sum::<usize>()
    );

    let mut group = c.benchmark_group("stream");
    group.throughput(Throughput::Elements(STREAM_CHUNKS as u64));
    group.bench_function("chat_2000_chunks", |b| {
        b.iter(|| black_box(run_stream(&payloads, &req, &meta, &names, &profile, false)));
    });
    group.bench_function("chat_2000_chunks_with_sse_encoding", |b| {
        b.iter(|| black_box(run_stream(&payloads, &req, &meta, &names, &profile, true)));
    });
    group.finish();

    // Mostly tool-call argument deltas; counted in events, since a delta chunk yields about one.
    let tool_payloads = tool_call_stream_payloads();
    let (tool_events, tool_bytes) = run_stream(&tool_payloads, &req, &meta, &names, &profile, true);
    let calls_done = {
        let mut decoder = ChunkDecoder::new(&profile);
        let mut assembler = Assembler::new(
            skeleton(&req, &meta),
            AssembleOptions {
                contract: OutputContract::Text,
                names: Arc::clone(&names),
                ..AssembleOptions::default()
            },
        );
        let (mut out, mut events, mut diags) = (Vec::new(), Vec::new(), Vec::new());
        for data in &tool_payloads {
            decoder
                .on_data(&profile, data, &mut events, &mut diags)
                .expect("a well-formed chunk");
            for ev in events.drain(..) {
                assembler.on_event(ev, &mut out);
            }
        }
        let response = assembler.finish(0, &mut out);
        serde_json::to_value(&response.output)
            .expect("serialisable")
            .as_array()
            .map_or(0, |items| {
                items
                    .iter()
                    .filter(|i| i["type"] == "function_call")
                    .count()
            })
    };
    assert_eq!(
        calls_done,
        TOOL_STREAM_CALLS.len(),
        "every call of the tool-call stream is reconstructed"
    );
    eprintln!(
        "stream/tool_call_deltas: {} payloads ({} bytes) -> {tool_events} events, {tool_bytes} SSE bytes, {calls_done} function calls",
        tool_payloads.len(),
        tool_payloads.iter().map(String::len).sum::<usize>()
    );
    let mut group = c.benchmark_group("stream");
    group.throughput(Throughput::Elements(tool_events as u64));
    group.bench_function("tool_call_deltas_2000", |b| {
        b.iter(|| {
            black_box(run_stream(
                &tool_payloads,
                &req,
                &meta,
                &names,
                &profile,
                false,
            ))
        });
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = request_benches, stream_benches
}
criterion_main!(benches);
