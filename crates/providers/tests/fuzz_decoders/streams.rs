//! The fuzz target's streams: events shaped like each provider's (Chat chunks, Anthropic
//! events, Gemini chunks, native Responses events) and whole answers, for `fuzz_decoders`.

use proptest::sample::Index;

use super::*;

/// A stream of `kind`: plausible events, mutated, some split in two, some stray.
pub(super) fn stream(kind: Kind) -> impl Strategy<Value = Case> {
    let one = prop_oneof![
        12 => (event(kind), prop::collection::vec(fj::mutation(), 0..3)).prop_map(|((name, value), mutations)| {
            let doc = fj::apply(Json::from(value), &mutations);
            (name, String::from_utf8_lossy(&fj::render(&doc)).into_owned())
        }),
        1 => prop::sample::select(STRAY).prop_map(|s| (None, s.to_owned())),
        1 => Just((Some(ROUND.to_owned()), String::new())),
    ];
    let splits = prop::collection::vec((any::<Index>(), any::<Index>()), 0..3);
    (
        prop::collection::vec(one, 0..24),
        splits,
        prop::sample::select(CHAT_PRESETS),
        any::<bool>(),
    )
        .prop_map(move |(mut events, splits, preset, repair)| {
            for (which, at) in splits {
                if events.is_empty() {
                    break;
                }
                let i = which.index(events.len());
                let (name, data) = events[i].clone();
                let mut cut = at.index(data.len() + 1);
                while !data.is_char_boundary(cut) {
                    cut -= 1;
                }
                events[i] = (name.clone(), data[..cut].to_owned());
                events.insert(i + 1, (name, data[cut..].to_owned()));
            }
            Case {
                kind,
                preset: if kind == Kind::Chat {
                    preset
                } else {
                    kind.preset()
                },
                repair,
                events,
            }
        })
}

impl Kind {
    fn preset(self) -> &'static str {
        match self {
            Self::Chat => "generic",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Responses => "responses",
        }
    }
}

/// Payloads that are not events at all.
const STRAY: &[&str] = &[
    "[DONE]",
    "",
    " ",
    "{",
    "}",
    "null",
    "[]",
    "\"x\"",
    "1e999",
    "{\"type\":",
    "data: x",
    "\u{feff}{}",
];

fn text() -> impl Strategy<Value = Value> + Clone {
    fj::plausible_text().prop_map(Value::String)
}

/// A token count: small, or at the edge of `u64`.
fn count() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        6 => (0u64..5000).prop_map(|n| json!(n)),
        1 => Just(json!(u64::MAX)),
        1 => Just(json!(u64::MAX / 2 + 1)),
        1 => any::<u64>().prop_map(|n| json!(n)),
    ]
}

fn index() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        8 => (0u64..4).prop_map(|n| json!(n)),
        1 => Just(json!(u32::MAX)),
        1 => Just(json!(u64::from(u32::MAX) + 1)),
        1 => Just(json!(-1)),
    ]
}

fn tool_name() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        6 => prop::sample::select(&["read_file", "apply_patch", "local_shell", "Read_File", "functions.read_file", "web_search", "unknown"][..]).prop_map(|s| json!(s)),
        1 => "[a-zA-Z_.:-]{0,12}".prop_map(Value::String),
    ]
}

/// Pieces of tool-call arguments: JSON prefixes, whole objects, a patch, nonsense.
fn arguments() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        prop::sample::select(
            &[
                "{\"path\":",
                "\"a.txt\"}",
                "{\"path\":\"a.txt\",\"n\":\"3\"}",
                "{",
                "}",
                "",
                "{\"input\":\"*** Begin Patch\\n*** Add File: a\\n*** End Patch\\n\"}",
                "*** Begin Patch\n*** Add File: a\n*** End Patch\n",
                "{\"command\":[\"ls\"]}",
                "{'path': 'a'}",
                "```json\n{\"path\":\"a\"}\n```",
            ][..]
        )
        .prop_map(|s| json!(s)),
        text(),
    ]
}

fn finish_reason(kind: Kind) -> impl Strategy<Value = Value> + Clone {
    let known: &'static [&'static str] = match kind {
        Kind::Chat => &[
            "stop",
            "length",
            "tool_calls",
            "content_filter",
            "function_call",
            "insufficient_system_resource",
            "repetition_truncation",
            "sensitive",
            "network_error",
            "weird",
        ],
        Kind::Anthropic => &[
            "end_turn",
            "max_tokens",
            "stop_sequence",
            "tool_use",
            "pause_turn",
            "refusal",
            "model_context_window_exceeded",
            "weird",
            "",
        ],
        Kind::Gemini => &[
            "STOP",
            "MAX_TOKENS",
            "SAFETY",
            "RECITATION",
            "MALFORMED_FUNCTION_CALL",
            "UNEXPECTED_TOOL_CALL",
            "LANGUAGE",
            "OTHER",
            "WEIRD",
            "",
        ],
        Kind::Responses => &["max_output_tokens", "content_filter"],
    };
    prop::sample::select(known).prop_map(|s| json!(s))
}

/// One plausible event of `kind`: its `event:` name (when the dialect names events) and data.
fn event(kind: Kind) -> BoxedStrategy<(Option<String>, Value)> {
    match kind {
        Kind::Chat => chat_chunk().prop_map(|v| (None, v)).boxed(),
        Kind::Anthropic => anthropic_event()
            .prop_map(|v| (v["type"].as_str().map(str::to_owned), v))
            .boxed(),
        Kind::Gemini => gemini_chunk().prop_map(|v| (None, v)).boxed(),
        Kind::Responses => responses_event()
            .prop_flat_map(|v| {
                let name = v["type"].as_str().map(str::to_owned);
                (Just(v), prop_oneof![Just(name), Just(None)])
            })
            .prop_map(|(v, n)| (n, v))
            .boxed(),
    }
}

fn chat_chunk() -> impl Strategy<Value = Value> {
    let call = (
        index(),
        prop::option::of(Just(json!("call_1"))),
        prop::option::of(tool_name()),
        arguments(),
    )
        .prop_map(|(i, id, name, args)| {
            let mut function = serde_json::Map::new();
            if let Some(name) = name {
                function.insert("name".to_owned(), name);
            }
            function.insert("arguments".to_owned(), args);
            let mut call = json!({"index": i, "type": "function", "function": function});
            if let Some(id) = id {
                call["id"] = id;
            }
            call
        });
    let delta = prop_oneof![
        4 => text().prop_map(|t| json!({"content": t})),
        1 => text().prop_map(|t| json!({"role": "assistant", "content": t})),
        2 => text().prop_map(|t| json!({"reasoning_content": t})),
        1 => text().prop_map(|t| json!({"reasoning": t})),
        1 => text().prop_map(|t| json!({"reasoning_details": [{"type": "reasoning.text", "text": t}]})),
        1 => text().prop_map(|t| json!({"content": [{"type": "text", "text": t}, {"type": "thinking", "thinking": t}]})),
        1 => text().prop_map(|t| json!({"refusal": t})),
        3 => prop::collection::vec(call, 1..3).prop_map(|calls| json!({"tool_calls": calls})),
        1 => Just(json!({})),
    ];
    let usage = (
        count(),
        count(),
        prop::option::of(count()),
        count(),
        count(),
    )
        .prop_map(|(p, c, total, cached, reasoning)| {
            let mut u = json!({"prompt_tokens": p, "completion_tokens": c,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning},
                "prompt_cache_hit_tokens": cached});
            if let Some(total) = total {
                u["total_tokens"] = total;
            }
            u
        });
    prop_oneof![
        10 => (delta, prop::option::of(finish_reason(Kind::Chat)), index()).prop_map(|(delta, finish, i)| {
            json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": i, "delta": delta, "finish_reason": finish}]})
        }),
        2 => usage.prop_map(|u| json!({"id": "c1", "choices": [], "usage": u})),
        1 => text().prop_map(|m| json!({"error": {"message": m, "type": "server_error", "code": "overloaded"}})),
        1 => prop::sample::select(&[1002i64, 1008, 1027, 2013, 0][..])
            .prop_map(|c| json!({"choices": [], "base_resp": {"status_code": c, "status_msg": "busy"}})),
        1 => Just(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": null})),
    ]
}

fn anthropic_event() -> impl Strategy<Value = Value> {
    let block = prop_oneof![
        3 => text().prop_map(|t| json!({"type": "text", "text": t})),
        3 => (tool_name(), prop_oneof![Just(json!({})), Just(json!({"path": "a"}))])
            .prop_map(|(n, input)| json!({"type": "tool_use", "id": "toolu_1", "name": n, "input": input})),
        2 => (text(), text()).prop_map(|(t, s)| json!({"type": "thinking", "thinking": t, "signature": s})),
        1 => text().prop_map(|d| json!({"type": "redacted_thinking", "data": d})),
        1 => Just(json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}})),
        1 => Just(json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []})),
        1 => Just(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}})),
    ];
    let delta = prop_oneof![
        3 => text().prop_map(|t| json!({"type": "text_delta", "text": t})),
        3 => arguments().prop_map(|a| json!({"type": "input_json_delta", "partial_json": a})),
        2 => text().prop_map(|t| json!({"type": "thinking_delta", "thinking": t})),
        1 => text().prop_map(|s| json!({"type": "signature_delta", "signature": s})),
        1 => Just(json!({"type": "citations_delta", "citation": {}})),
    ];
    let usage = (
        prop::option::of(count()),
        prop::option::of(count()),
        prop::option::of(count()),
        prop::option::of(count()),
    )
        .prop_map(|(i, o, r, w)| {
            let mut u = serde_json::Map::new();
            for (k, v) in [
                ("input_tokens", i),
                ("output_tokens", o),
                ("cache_read_input_tokens", r),
                ("cache_creation_input_tokens", w),
            ] {
                if let Some(v) = v {
                    u.insert(k.to_owned(), v);
                }
            }
            Value::Object(u)
        });
    prop_oneof![
        2 => usage.clone().prop_map(|u| json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude", "content": [], "stop_reason": null, "usage": u}})),
        4 => (index(), block).prop_map(|(i, b)| json!({"type": "content_block_start", "index": i, "content_block": b})),
        8 => (index(), delta).prop_map(|(i, d)| json!({"type": "content_block_delta", "index": i, "delta": d})),
        3 => index().prop_map(|i| json!({"type": "content_block_stop", "index": i})),
        2 => (prop::option::of(finish_reason(Kind::Anthropic)), prop::option::of(usage))
            .prop_map(|(r, u)| json!({"type": "message_delta", "delta": {"stop_reason": r, "stop_sequence": null}, "usage": u})),
        1 => Just(json!({"type": "message_stop"})),
        1 => Just(json!({"type": "ping"})),
        1 => prop::sample::select(&["overloaded_error", "rate_limit_error", "api_error", "invalid_request_error", "weird"][..])
            .prop_map(|k| json!({"type": "error", "error": {"type": k, "message": "nope"}})),
        1 => Just(json!({"type": "content_block_unknown", "index": 0})),
    ]
}

fn gemini_chunk() -> impl Strategy<Value = Value> {
    let part = prop_oneof![
        4 => text().prop_map(|t| json!({"text": t})),
        2 => text().prop_map(|t| json!({"text": t, "thought": true})),
        3 => (tool_name(), prop_oneof![Just(json!({"path": "a.txt"})), Just(json!({})), Just(json!({"n": 1e15})), Just(json!(null))], prop::option::of(Just(json!("fc_1"))), prop::option::of(text()))
            .prop_map(|(n, args, id, sig)| {
                let mut call = json!({"name": n, "args": args});
                if let Some(id) = id {
                    call["id"] = id;
                }
                let mut part = json!({"functionCall": call});
                if let Some(sig) = sig {
                    part["thoughtSignature"] = sig;
                }
                part
            }),
        1 => Just(json!({"inlineData": {"mimeType": "image/png", "data": ""}})),
        1 => Just(json!({})),
    ];
    let usage = (
        count(),
        count(),
        count(),
        count(),
        prop::option::of(count()),
    )
        .prop_map(|(p, c, t, cached, total)| {
            let mut u = json!({"promptTokenCount": p, "candidatesTokenCount": c,
                "thoughtsTokenCount": t, "cachedContentTokenCount": cached});
            if let Some(total) = total {
                u["totalTokenCount"] = total;
            }
            u
        });
    let candidate = (
        prop::collection::vec(part, 0..4),
        prop::option::of(finish_reason(Kind::Gemini)),
        prop::option::of(index()),
        prop::option::of(prop::collection::vec(text(), 0..3)),
    )
        .prop_map(|(parts, finish, index, queries)| {
            let mut c = json!({"content": {"role": "model", "parts": parts}});
            if let Some(f) = finish {
                c["finishReason"] = f;
            }
            if let Some(i) = index {
                c["index"] = i;
            }
            if let Some(q) = queries {
                c["groundingMetadata"] = json!({"webSearchQueries": q});
            }
            c
        });
    prop_oneof![
        8 => (prop::collection::vec(candidate, 0..2), prop::option::of(usage)).prop_map(|(c, u)| {
            let mut chunk = json!({"candidates": c, "modelVersion": "gemini"});
            if let Some(u) = u {
                chunk["usageMetadata"] = u;
            }
            chunk
        }),
        1 => prop::sample::select(&["SAFETY", "BLOCK_REASON_UNSPECIFIED", "OTHER", ""][..])
            .prop_map(|r| json!({"promptFeedback": {"blockReason": r}})),
        1 => prop::sample::select(&[(429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (400, "INVALID_ARGUMENT"), (503, "UNAVAILABLE")][..])
            .prop_map(|(c, s)| json!({"error": {"code": c, "message": "quota", "status": s}})),
    ]
}

fn responses_item() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        text().prop_map(|t| json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]})),
        (tool_name(), arguments()).prop_map(|(n, a)| json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": n, "arguments": a, "status": "completed"})),
        text().prop_map(|t| json!({"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": t}]})),
        Just(json!({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}})),
        Just(json!({"type": "unknown_item", "id": "x_1"})),
    ]
}

fn responses_event() -> impl Strategy<Value = Value> {
    let response = (prop::sample::select(&["in_progress", "completed", "incomplete", "failed", "queued"][..]), prop::collection::vec(responses_item(), 0..3), count())
        .prop_map(|(status, output, n)| json!({"id": "resp_up", "object": "response", "status": status,
            "model": "up", "output": output, "usage": {"input_tokens": n, "output_tokens": 1, "total_tokens": n}}));
    prop_oneof![
        1 => response.clone().prop_map(|r| json!({"type": "response.created", "response": r})),
        1 => response.clone().prop_map(|r| json!({"type": "response.in_progress", "response": r})),
        3 => (index(), responses_item()).prop_map(|(i, item)| json!({"type": "response.output_item.added", "output_index": i, "item": item})),
        3 => (index(), responses_item()).prop_map(|(i, item)| json!({"type": "response.output_item.done", "output_index": i, "item": item})),
        4 => (index(), text()).prop_map(|(i, d)| json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": i, "content_index": 0, "delta": d})),
        2 => (index(), arguments()).prop_map(|(i, d)| json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": i, "delta": d})),
        1 => (index(), arguments()).prop_map(|(i, a)| json!({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": i, "arguments": a})),
        1 => response.clone().prop_map(|r| json!({"type": "response.completed", "response": r})),
        1 => response.clone().prop_map(|r| json!({"type": "response.incomplete", "response": r})),
        1 => response.prop_map(|r| json!({"type": "response.failed", "response": r})),
        1 => Just(json!({"type": "response.completed"})),
        1 => Just(json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"})),
        1 => Just(json!({"type": "error", "error": {"type": "server_error", "code": "server_error", "message": "boom"}})),
        1 => Just(json!({"type": "response.future_event", "x": 1})),
        1 => Just(json!({"delta": "no type"})),
    ]
}

/// A whole (non-streamed) answer of `kind`.
pub(super) fn whole(kind: Kind) -> BoxedStrategy<Value> {
    match kind {
        Kind::Chat => (prop::option::of(text()), prop::collection::vec((tool_name(), arguments()), 0..3), finish_reason(Kind::Chat), count())
            .prop_map(|(content, calls, finish, n)| {
                let calls: Vec<Value> = calls.into_iter().enumerate().map(|(i, (name, a))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": a}})).collect();
                json!({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": calls}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": n, "completion_tokens": n, "total_tokens": n}})
            })
            .boxed(),
        Kind::Anthropic => (prop::collection::vec(prop_oneof![
                text().prop_map(|t| json!({"type": "text", "text": t})),
                (tool_name(), Just(json!({"path": "a"}))).prop_map(|(n, i)| json!({"type": "tool_use", "id": "toolu_1", "name": n, "input": i})),
                (text(), text()).prop_map(|(t, s)| json!({"type": "thinking", "thinking": t, "signature": s})),
            ], 0..4), finish_reason(Kind::Anthropic), count(), count())
            .prop_map(|(content, stop, i, o)| json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": content, "stop_reason": stop, "usage": {"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": i}}))
            .boxed(),
        Kind::Gemini => gemini_chunk().boxed(),
        Kind::Responses => (prop::sample::select(&["completed", "incomplete", "in_progress", "failed"][..]), prop::collection::vec(responses_item(), 0..3))
            .prop_map(|(status, output)| json!({"id": "resp_up", "object": "response", "status": status, "output": output}))
            .boxed(),
    }
}
