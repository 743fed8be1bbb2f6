//! Fuzz target: every dialect's stream decoder (`Dialect::decoder`: Chat Completions chunks
//! under several presets, Anthropic Messages events, Gemini chunks, native Responses events),
//! each followed as the gateway follows it (the core's `Assembler`, with tool-call repair on or
//! off, behind a decoder), plus the first-event classification and the whole-answer decoding of
//! every dialect.
//!
//! Inputs: sequences of events shaped like each provider's (text, reasoning, `<think>` blocks,
//! tool calls streamed in pieces, signatures, searches, usage with counts up to `u64::MAX`,
//! finish reasons known and not, mid-stream errors, `[DONE]`), mutated
//! (`toolbridge_testkit::fuzz::json`: wrong types, duplicate keys, deep nesting, huge numbers,
//! unknown types, bad escapes), with events split in two at arbitrary points and stray payloads
//! (`[DONE]` early, truncated JSON, not JSON at all).
//!
//! Properties: no panic; each event's output is bounded by its size (no amplification: events
//! and their bytes grow at most linearly with the input); errors are typed (`Error::code` a
//! stable snake_case code, an HTTP status 400-599, OpenAI's error body carrying the code); the
//! same input decodes the same twice; the assembled transcript keeps the stream invariants
//! (sequence numbers from 0, `created` and `in_progress` first, exactly one terminal event,
//! last, carrying the final response; items done once, after being added; the output is the
//! done items).
//!
//! Long run: `TOOLBRIDGE_FUZZ_SECS=600 cargo test --workspace --test fuzz_decoders --
//! --nocapture` (the seconds are per property).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_core::plan::plan;
use toolbridge_core::reasoning::ReasoningDisplay;
use toolbridge_core::repair::ToolSchemas;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::Error;
use toolbridge_providers::dialect::{Dialect, Flow};
use toolbridge_providers::profile::Profile;
use toolbridge_testkit::fuzz::json::{self as fj, Json};
use toolbridge_testkit::fuzz::{Target, check};
use toolbridge_wire::responses::CreateResponse;

#[path = "fuzz_decoders/streams.rs"]
mod streams;

use streams::{stream, whole};

const TARGET: Target = Target {
    name: "decoders",
    regressions: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/fuzz_decoders.txt"
    ),
    cases: 256,
};

/// The presets of the Chat dialect whose decoding differs (`<think>` tags, MiniMax's reasoning
/// details, finish reason tables).
const CHAT_PRESETS: &[&str] = &[
    "generic", "openai", "deepseek", "minimax", "ollama", "vllm", "qwen", "kimi", "glm", "mimo",
];

/// The name of a marker between two upstream rounds of one response (not an event: the pump
/// starts the next round there).
const ROUND: &str = "toolbridge.fuzz.next_round";

// --- the properties -------------------------------------------------------------------------

#[test]
fn every_dialect_decodes_any_event_sequence_within_bounds() {
    let case = prop_oneof![
        3 => stream(Kind::Chat),
        2 => stream(Kind::Anthropic),
        2 => stream(Kind::Gemini),
        2 => stream(Kind::Responses),
    ];
    check(&TARGET, case, |case| {
        let first = decode(&case)?;
        let again = decode(&case)?;
        prop_assert_eq!(first, again, "the same events decode differently");
        Ok(())
    });
}

#[test]
fn whole_answers_decode_or_fail_typed() {
    let case = prop_oneof![
        Just(Kind::Chat),
        Just(Kind::Anthropic),
        Just(Kind::Gemini),
        Just(Kind::Responses)
    ]
    .prop_flat_map(|kind| {
        (
            Just(kind),
            prop::sample::select(CHAT_PRESETS),
            fj::mutated(whole(kind).prop_map(Json::from), 3),
        )
    })
    .prop_map(|(kind, preset, doc)| (kind, preset, fj::Bytes(fj::render(&doc))));
    check(&TARGET, case, |(kind, preset, fj::Bytes(body))| {
        let profile = profile(preset);
        let mut diagnostics = Vec::new();
        match kind
            .dialect()
            .decode_whole(&profile, &body, "call_fuzz", None, &mut diagnostics)
        {
            Ok(events) => {
                let decoded: Vec<String> = events.iter().map(|e| format!("{e:?}")).collect();
                bounded(&decoded, body.len())?;
            }
            Err(e) => typed(&e)?,
        }
        prop_assert!(diagnostics.len() <= body.len() + 8);
        Ok(())
    });
}

// --- bugs found, kept with their minimal inputs ---------------------------------------------

/// Found by `whole_answers_decode_or_fail_typed`: token counts are the upstream's, any `u64`;
/// adding two of them (a Chat `total_tokens` left out, Gemini's thoughts beside its candidates,
/// Anthropic's cache reads beside its input, two rounds' usage) overflowed: a panic in a debug
/// build, a total wrapped to a small number in a release one. Sums now saturate.
#[test]
fn token_counts_at_the_edge_of_u64_saturate_instead_of_overflowing() {
    let max = u64::MAX;
    let usage_of = |events: &[UpstreamEvent]| {
        events
            .iter()
            .rev()
            .find_map(|e| match e {
                UpstreamEvent::Usage(u) => Some(u.clone()),
                _ => None,
            })
            .expect("a usage event")
    };
    // Chat, whole and streamed, without `total_tokens`.
    let chat = Profile::preset("generic").unwrap();
    let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"},
        "finish_reason": "stop"}], "usage": {"prompt_tokens": max, "completion_tokens": max}});
    let events = Dialect::Chat
        .decode_whole(
            &chat,
            body.to_string().as_bytes(),
            "c",
            None,
            &mut Vec::new(),
        )
        .unwrap();
    assert_eq!(usage_of(&events).total_tokens, max);
    let mut decoder = Dialect::Chat.decoder(&chat, "c".to_owned(), None);
    let mut events = Vec::new();
    let chunk = json!({"choices": [], "usage": {"prompt_tokens": max, "completion_tokens": 1}});
    decoder
        .on_event(
            &chat,
            None,
            &chunk.to_string(),
            &mut events,
            &mut Vec::new(),
        )
        .unwrap();
    assert_eq!(usage_of(&events).total_tokens, max);
    // Gemini: thoughts are added to the candidates' count.
    let gemini = Profile::preset("gemini").unwrap();
    let mut decoder = Dialect::Gemini.decoder(&gemini, "c".to_owned(), None);
    let mut events = Vec::new();
    let chunk = json!({"candidates": [], "usageMetadata": {"promptTokenCount": max,
        "candidatesTokenCount": max, "thoughtsTokenCount": max}});
    decoder
        .on_event(
            &gemini,
            None,
            &chunk.to_string(),
            &mut events,
            &mut Vec::new(),
        )
        .unwrap();
    let usage = usage_of(&events);
    assert_eq!((usage.output_tokens, usage.total_tokens), (max, max));
    // Anthropic: cache reads and writes are added to the input.
    let anthropic = Profile::preset("anthropic").unwrap();
    let mut decoder = Dialect::Anthropic.decoder(&anthropic, "c".to_owned(), None);
    let mut events = Vec::new();
    let start = json!({"type": "message_start", "message": {"id": "m", "type": "message",
        "role": "assistant", "content": [], "usage": {"input_tokens": max,
        "cache_read_input_tokens": max, "output_tokens": max}}});
    decoder
        .on_event(
            &anthropic,
            Some("message_start"),
            &start.to_string(),
            &mut events,
            &mut Vec::new(),
        )
        .unwrap();
    let usage = usage_of(&events);
    assert_eq!((usage.input_tokens, usage.total_tokens), (max, max));
    // Two rounds of one response: the total carried across them.
    let mut assembler = assembler("generic", &chat, false);
    let mut out = Vec::new();
    assembler.start(&mut out);
    let round = usage_of(&events);
    assembler.on_event(UpstreamEvent::Usage(round.clone()), &mut out);
    assembler.next_round();
    assembler.on_event(UpstreamEvent::Text("a".to_owned()), &mut out);
    assembler.on_event(UpstreamEvent::Usage(round), &mut out);
    let response = assembler.finish(2, &mut out);
    let usage = response.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.total_tokens), (max, max));
}

// --- one stream -----------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Chat,
    Anthropic,
    Gemini,
    Responses,
}

impl Kind {
    fn dialect(self) -> Dialect {
        match self {
            Self::Chat => Dialect::Chat,
            Self::Anthropic => Dialect::Anthropic,
            Self::Gemini => Dialect::Gemini,
            Self::Responses => Dialect::Responses,
        }
    }
}

/// One upstream stream: its dialect, the preset, whether repair is on, and its events (the
/// SSE `event:` name, the `data:` text).
#[derive(Clone, Debug)]
struct Case {
    kind: Kind,
    preset: &'static str,
    repair: bool,
    events: Vec<(Option<String>, String)>,
}

/// What a stream decoded into, for comparing two runs.
type Decoded = (Vec<String>, Vec<Value>);

/// Decodes `case` the way the gateway's pump does, checking each step, and assembles it.
fn decode(case: &Case) -> Result<Decoded, TestCaseError> {
    let profile = profile(case.preset);
    let dialect = case.kind.dialect();
    let mut decoder = dialect.decoder(&profile, "call_fuzz".to_owned(), None);
    let mut assembler = assembler(case.preset, &profile, case.repair);
    let mut transcript = Vec::new();
    let mut decoded = Vec::new();
    let mut input = 0;
    if let Some((name, data)) = case.events.first() {
        // The peek before commit reads the first event with a fresh decoder.
        if let Some(e) = dialect.classify_first_event(&profile, name.as_deref(), data) {
            typed(&e)?;
        }
    }
    assembler.start(&mut transcript);
    let mut failure = None;
    for (name, data) in &case.events {
        if name.as_deref() == Some(ROUND) {
            // The gateway's next round (after its own tools ran): what the decoder held back
            // is flushed, usage carries into the total, a fresh decoder reads the next stream.
            let mut out = Vec::new();
            decoder.finish(&mut out);
            for ev in out {
                assembler.on_event(ev, &mut transcript);
            }
            assembler.next_round();
            decoder = decoder.restarted(&profile, "call_next".to_owned());
            continue;
        }
        let mut out = Vec::new();
        let mut diagnostics = Vec::new();
        let flow = decoder.on_event(&profile, name.as_deref(), data, &mut out, &mut diagnostics);
        input += data.len() + name.as_ref().map_or(0, String::len);
        prop_assert!(diagnostics.len() <= 4, "diagnostics: {:?}", diagnostics);
        decoded.extend(out.iter().map(|e| format!("{e:?}")));
        // What came out so far is bounded by what went in so far (a decoder may hold a part
        // back and give it with a later event: a thinking block's signature at its stop).
        bounded(&decoded, input)?;
        for d in diagnostics {
            assembler.add_diagnostic(d);
        }
        for ev in out {
            assembler.on_event(ev, &mut transcript);
        }
        match flow {
            Ok(Flow::Continue) => {}
            Ok(Flow::Done) => break,
            Err(e) => {
                typed(&e)?;
                failure = Some(e);
                break;
            }
        }
    }
    let response = match failure {
        Some(e) => assembler.fail(e.code(), e.to_string(), 2, &mut transcript),
        None => {
            let mut out = Vec::new();
            decoder.finish(&mut out);
            decoded.extend(out.iter().map(|e| format!("{e:?}")));
            // What the decoder held back is bounded by what it was given.
            bounded(&decoded, input)?;
            for ev in out {
                assembler.on_event(ev, &mut transcript);
            }
            assembler.finish(2, &mut transcript)
        }
    };
    let events: Vec<Value> = transcript
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let response = serde_json::to_value(&response).unwrap();
    transcript_checked(&events, &response)?;
    Ok((decoded, events))
}

fn is_terminal(e: &Value) -> bool {
    matches!(
        e["type"].as_str(),
        Some("response.completed" | "response.failed" | "response.incomplete")
    )
}

/// Events decoded from `input` bytes (as their `Debug` text): at most one per four bytes and a
/// few more, their text at most a small multiple of the input (a usage event has a fixed size).
fn bounded(decoded: &[String], input: usize) -> Result<(), TestCaseError> {
    prop_assert!(
        decoded.len() <= input / 4 + 4,
        "{} events out of {} bytes",
        decoded.len(),
        input
    );
    let size: usize = decoded.iter().map(String::len).sum();
    prop_assert!(
        size <= 8 * input + 512 * (decoded.len() + 1),
        "{} bytes of events out of {} bytes",
        size,
        input
    );
    Ok(())
}

/// An error as the gateway answers with it: a stable code, a status, OpenAI's body.
fn typed(e: &Error) -> Result<(), TestCaseError> {
    let code = e.code();
    prop_assert!(
        !code.is_empty()
            && code
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
        "code {:?}",
        code
    );
    prop_assert!((400..=599).contains(&e.status()), "status {}", e.status());
    let body = e.body();
    prop_assert_eq!(body.error.code.as_deref(), Some(code));
    prop_assert!(!body.error.message.is_empty());
    Ok(())
}

/// The invariants of an assembled transcript (as the gateway's stream tests check them).
fn transcript_checked(events: &[Value], response: &Value) -> Result<(), TestCaseError> {
    prop_assert!(events.len() >= 3);
    for (i, e) in events.iter().enumerate() {
        prop_assert_eq!(
            &e["sequence_number"],
            &json!(i),
            "sequence_number of event {}",
            i
        );
    }
    prop_assert_eq!(&events[0]["type"], "response.created");
    prop_assert_eq!(&events[1]["type"], "response.in_progress");
    let terminals: Vec<usize> = (0..events.len())
        .filter(|&i| is_terminal(&events[i]))
        .collect();
    prop_assert_eq!(
        terminals,
        vec![events.len() - 1],
        "exactly one terminal event, last"
    );
    prop_assert_eq!(&events[events.len() - 1]["response"], response);
    let mut added: Vec<(u64, Value)> = Vec::new();
    let mut done: Vec<(u64, Value)> = Vec::new();
    for e in events {
        let index = e["output_index"].as_u64();
        match e["type"].as_str().unwrap_or_default() {
            "response.output_item.added" => {
                let index = index.unwrap();
                prop_assert!(
                    added.iter().all(|(i, _)| *i != index),
                    "index {} added twice",
                    index
                );
                added.push((index, e["item"]["id"].clone()));
            }
            "response.output_item.done" => {
                let index = index.unwrap();
                prop_assert!(
                    done.iter().all(|(i, _)| *i != index),
                    "index {} done twice",
                    index
                );
                let added_id = added.iter().find(|(i, _)| *i == index).map(|(_, id)| id);
                prop_assert_eq!(
                    added_id,
                    Some(&e["item"]["id"]),
                    "done without added at {}",
                    index
                );
                done.push((index, e["item"].clone()));
            }
            _ => {}
        }
    }
    done.sort_by_key(|(i, _)| *i);
    let done: Vec<&Value> = done.iter().map(|(_, item)| item).collect();
    let output: Vec<&Value> = response["output"].as_array().unwrap().iter().collect();
    prop_assert_eq!(output, done, "the final output is exactly the done items");
    Ok(())
}

/// The request every stream answers: a function, a custom tool with a grammar and a built-in
/// client tool, so that calls restore (and repair) through each path.
fn request() -> CreateResponse {
    serde_json::from_value(json!({
        "model": "m",
        "input": "hi",
        "reasoning": {"effort": "high", "summary": "auto"},
        "tools": [
            {"type": "function", "name": "read_file", "parameters": {"type": "object",
                "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
                "required": ["path"], "additionalProperties": false}},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark",
                "definition": "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\nend_patch: \"*** End Patch\" LF?\nhunk: \"*** Add File: \" /(.+)/ LF\nLF: \"\\n\""}},
            {"type": "local_shell"}
        ]
    }))
    .unwrap()
}

fn meta() -> ResponseMeta {
    ResponseMeta {
        id: "resp_fuzz".to_owned(),
        created_at: 1,
        stored: false,
    }
}

/// What the gateway computes once per request and profile before a stream: the request, its
/// output contract, the plan's names and echo tools, the compiled tool checks. Kept per preset:
/// compiling the checks each case would cost more than the case.
struct Prepared {
    req: CreateResponse,
    contract: toolbridge_core::contract::OutputContract,
    names: Arc<toolbridge_core::plan::NameMap>,
    echo_tools: Vec<String>,
    schemas: Arc<ToolSchemas>,
}

fn prepared(preset: &'static str, profile: &Profile) -> Arc<Prepared> {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Arc<Prepared>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(p) = cache.lock().unwrap().get(preset) {
        return p.clone();
    }
    let req = request();
    let canonical = normalize(&req, &Limits::default()).unwrap();
    let plan = plan(
        &canonical.tools,
        canonical.tool_choice.as_ref(),
        &profile.tools,
    )
    .unwrap();
    let prepared = Arc::new(Prepared {
        contract: canonical.output.clone(),
        names: Arc::new(plan.names),
        echo_tools: plan.echo_tools,
        schemas: Arc::new(ToolSchemas::from_tools(&canonical.tools)),
        req,
    });
    cache.lock().unwrap().insert(preset, prepared.clone());
    prepared
}

/// A preset's profile, read once.
fn profile(preset: &'static str) -> Profile {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Profile>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    let mut cache = cache.lock().unwrap();
    cache
        .entry(preset)
        .or_insert_with(|| Profile::preset(preset).unwrap())
        .clone()
}

/// The assembler the gateway builds for [`request`] on `preset`.
fn assembler(preset: &'static str, profile: &Profile, repair: bool) -> Assembler {
    let p = prepared(preset, profile);
    Assembler::new(
        skeleton(&p.req, &meta()),
        AssembleOptions {
            contract: p.contract.clone(),
            diagnostics: Vec::new(),
            names: p.names.clone(),
            reasoning: ReasoningDisplay::for_request(&p.req),
            sealer: None,
            echo_tools: p.echo_tools.clone(),
            repair: repair.then(|| p.schemas.clone()),
        },
    )
}
