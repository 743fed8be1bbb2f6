//! The library paths the instruction benchmarks count, one function per scenario, each doing
//! one request's pure work from the body's bytes to the bytes that go back to the client:
//!
//! - `S`: a 30-byte request (`{"model":"m","input":"Say hi"}`) through parse, normalise, plan,
//!   the tool checks (from the shared cache), the Chat body, then the upstream's fixed whole
//!   answer decoded, reconstructed and serialised.
//! - `L`: the same with the recorded 40 KB Codex request (10 tools), its tool checks from a warm
//!   cache (`L`, what a repeated Codex turn costs) or a cold one (`L-cold`, a new tool set).
//! - `SS`: `S` streamed: the upstream's 50 Chat chunks decoded, reconstructed and framed as SSE.
//!
//! The upstream answers are the harness's (`../shared/bench/lib/gen_fixtures.py`): the same
//! text, the same 47 tokens. No I/O, no clock. Included by path from the bench and its smoke test.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::contract::OutputContract;
use toolbridge_core::plan::plan as plan_tools;
use toolbridge_core::repair::SchemaCache;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_gateway::{frame, parse_request};
use toolbridge_providers::chat::request::build;
use toolbridge_providers::chat::response::decode;
use toolbridge_providers::chat::stream::{ChunkDecoder, Flow};
use toolbridge_providers::profile::Profile;

/// The answer text of the harness's upstream.
pub const TEXT: &str = "Hi! How can I help you today?";
/// The preset the zero-config gateway uses for a Chat Completions upstream.
const PRESET: &str = "generic";
const UPSTREAM_MODEL: &str = "m";

/// Every scenario by name, as the bench and the smoke test run them.
pub const SCENARIOS: &[&str] = &["S", "L", "L-cold", "SS"];

/// What one scenario needs, built once outside the count.
pub struct Fixture {
    pub profile: Profile,
    pub s_body: Vec<u8>,
    pub s_stream_body: Vec<u8>,
    pub l_body: Vec<u8>,
    pub chat_json: Vec<u8>,
    pub chat_chunks: Vec<String>,
    /// Shared by all requests, as `AppState::schema_cache` is.
    pub cache: SchemaCache,
}

impl Fixture {
    /// `l_body`: the Codex request (see `common/codex.rs`), sent with `model: m`, not streamed.
    pub fn new(l_body: &[u8]) -> Self {
        let mut codex: serde_json::Value = serde_json::from_slice(l_body).expect("JSON");
        codex["model"] = "m".into();
        codex["stream"] = false.into();
        Self {
            profile: Profile::preset(PRESET).expect("the preset exists"),
            s_body: br#"{"model":"m","input":"Say hi"}"#.to_vec(),
            s_stream_body: br#"{"model":"m","input":"Say hi","stream":true}"#.to_vec(),
            l_body: serde_json::to_vec(&codex).expect("serialisable"),
            chat_json: chat_json(),
            chat_chunks: chat_chunks(),
            cache: SchemaCache::default(),
        }
    }
}

/// The upstream's whole answer.
fn chat_json() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": "chatcmpl-perf", "object": "chat.completion", "created": 1_764_460_800, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT, "refusal": null},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21,
                  "prompt_tokens_details": {"cached_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0}},
        "system_fingerprint": null,
    }))
    .expect("serialisable")
}

/// The upstream's stream: a role chunk, 47 tokens (`w01`, ` w02`, …), a finish chunk, a usage
/// chunk, `[DONE]`, as SSE `data` payloads.
fn chat_chunks() -> Vec<String> {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        serde_json::json!({
            "id": "chatcmpl-perf", "object": "chat.completion.chunk", "created": 1_764_460_800,
            "model": "m", "system_fingerprint": null,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
        .to_string()
    };
    let mut out = vec![chunk(
        serde_json::json!({"role": "assistant", "content": ""}),
        serde_json::Value::Null,
    )];
    for i in 1..=47 {
        let token = if i == 1 {
            "w01".to_owned()
        } else {
            format!(" w{i:02}")
        };
        out.push(chunk(
            serde_json::json!({"content": token}),
            serde_json::Value::Null,
        ));
    }
    out.push(chunk(serde_json::json!({}), "stop".into()));
    out.push(
        serde_json::json!({
            "id": "chatcmpl-perf", "object": "chat.completion.chunk", "created": 1_764_460_800,
            "model": "m", "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 47, "total_tokens": 59},
        })
        .to_string(),
    );
    out.push("[DONE]".to_owned());
    out
}

/// What a run produced, for the smoke test to check.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The Chat body sent upstream.
    pub upstream_bytes: usize,
    /// The client's answer: the JSON body, or every SSE frame joined.
    pub answer: Vec<u8>,
}

/// Runs scenario `name` once.
pub fn run(fixture: &Fixture, name: &str) -> Outcome {
    match name {
        "S" => whole(fixture, &fixture.s_body, &fixture.cache),
        "L" => whole(fixture, &fixture.l_body, &fixture.cache),
        "L-cold" => whole(fixture, &fixture.l_body, &SchemaCache::default()),
        "SS" => streamed(fixture, &fixture.s_stream_body),
        other => panic!("unknown scenario {other}"),
    }
}

/// The request half: parse, normalise, plan, tool checks, the upstream body. Returns the
/// assembler ready for the answer, and the upstream body's length.
fn request(fixture: &Fixture, body: &[u8], cache: &SchemaCache, id: &str) -> (Assembler, usize) {
    let req = parse_request(body).expect("the request parses");
    let canonical = normalize(&req, &Limits::default()).expect("the request normalises");
    let plan = plan_tools(
        &canonical.tools,
        canonical.tool_choice.as_ref(),
        &fixture.profile.tools,
    )
    .expect("the tools plan");
    let schemas = cache.schemas(&canonical.tools);
    let mut diagnostics = canonical.diagnostics.clone();
    diagnostics.extend(plan.diagnostics.iter().cloned());
    let chat = build(
        &canonical,
        &plan,
        &fixture.profile,
        UPSTREAM_MODEL,
        &mut diagnostics,
    );
    let upstream = serde_json::to_vec(&chat).expect("serialisable");
    let meta = ResponseMeta {
        id: id.to_owned(),
        created_at: 1,
        stored: false,
    };
    let assembler = Assembler::new(
        skeleton(&req, &meta),
        AssembleOptions {
            contract: OutputContract::Text,
            diagnostics,
            names: Arc::new(plan.names),
            repair: Some(schemas),
            ..AssembleOptions::default()
        },
    );
    (assembler, upstream.len())
}

fn whole(fixture: &Fixture, body: &[u8], cache: &SchemaCache) -> Outcome {
    let (mut assembler, upstream_bytes) = request(fixture, body, cache, "resp_whole");
    let answer = serde_json::from_slice(&fixture.chat_json).expect("the answer parses");
    let mut diagnostics = Vec::new();
    let events = decode(&fixture.profile, answer, &mut diagnostics);
    let mut out = Vec::new();
    for d in diagnostics {
        assembler.add_diagnostic(d);
    }
    for event in events {
        assembler.on_event(event, &mut out);
    }
    let response = assembler.finish(2, &mut out);
    Outcome {
        upstream_bytes,
        answer: serde_json::to_vec(&response).expect("serialisable"),
    }
}

fn streamed(fixture: &Fixture, body: &[u8]) -> Outcome {
    let (mut assembler, upstream_bytes) = request(fixture, body, &fixture.cache, "resp_stream");
    let mut decoder = ChunkDecoder::new(&fixture.profile);
    let (mut out, mut events, mut diagnostics) = (Vec::new(), Vec::new(), Vec::new());
    let mut answer = Vec::new();
    let mut send = |out: &mut Vec<_>| {
        for event in out.drain(..) {
            answer.extend_from_slice(&frame(&event));
        }
    };
    assembler.start(&mut out);
    send(&mut out);
    for data in &fixture.chat_chunks {
        let flow = decoder
            .on_data(&fixture.profile, data, &mut events, &mut diagnostics)
            .expect("a well-formed chunk");
        for d in diagnostics.drain(..) {
            assembler.add_diagnostic(d);
        }
        for event in events.drain(..) {
            assembler.on_event(event, &mut out);
        }
        send(&mut out);
        if flow == Flow::Done {
            break;
        }
    }
    assembler.finish(2, &mut out);
    send(&mut out);
    Outcome {
        upstream_bytes,
        answer,
    }
}
