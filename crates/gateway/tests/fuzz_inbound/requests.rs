//! The fuzz target's requests: `POST /v1/responses` bodies shaped like the clients' (every
//! input item and tool type, `tool_choice`, `text.format`, metadata, …), for `fuzz_inbound`.

use super::*;

/// An object of the fields given (`None` left out), in order.
fn obj(fields: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect(),
    )
}

fn opt<S: Strategy<Value = Value> + Clone>(s: S) -> impl Strategy<Value = Option<Value>> + Clone {
    prop::option::weighted(0.5, s)
}

fn text() -> impl Strategy<Value = Value> + Clone {
    fj::plausible_text().prop_map(Value::String)
}

fn name() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        prop::sample::select(
            &[
                "shell",
                "read_file",
                "apply_patch",
                "web_search",
                "f",
                "ns.f"
            ][..]
        )
        .prop_map(|s| json!(s)),
        "[a-zA-Z_][a-zA-Z0-9_.-]{0,20}".prop_map(Value::String),
    ]
}

fn call_id() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        prop::sample::select(&["call_1", "call_2", "c"][..]).prop_map(|s| json!(s)),
        "call_[a-z0-9]{1,6}".prop_map(Value::String),
    ]
}

fn role() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        8 => prop::sample::select(&["user", "assistant", "system", "developer"][..]),
        1 => prop::sample::select(&["tool", "critic", ""][..]),
    ]
    .prop_map(|s| json!(s))
}

fn part() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        4 => text().prop_map(|t| json!({"type": "input_text", "text": t})),
        2 => text().prop_map(|t| json!({"type": "output_text", "text": t, "annotations": []})),
        1 => text().prop_map(|t| json!({"type": "refusal", "refusal": t})),
        1 => prop::sample::select(&[
            "data:image/png;base64,iVBORw0KGgo=",
            "https://example.invalid/a.png",
            "data:,",
        ][..])
        .prop_map(|u| json!({"type": "input_image", "image_url": u, "detail": "auto"})),
        1 => Just(json!({"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="})),
        1 => text().prop_map(|t| json!({"type": "input_text", "text": t, "prompt_cache_breakpoint": {"ttl": "5m"}})),
        1 => text().prop_map(|t| json!({"type": "reasoning_text", "text": t})),
    ]
}

fn content() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        text(),
        prop::collection::vec(part(), 0..4).prop_map(Value::Array),
    ]
}

fn message() -> impl Strategy<Value = Value> + Clone {
    (
        role(),
        content(),
        any::<bool>(),
        opt(Just(json!("msg_1"))),
        opt(Just(json!("completed"))),
    )
        .prop_map(|(role, content, typed, id, status)| {
            obj(vec![
                ("type", typed.then(|| json!("message"))),
                ("id", id),
                ("role", Some(role)),
                ("content", Some(content)),
                ("status", status),
            ])
        })
}

fn arguments() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        Just(json!("{}")),
        text().prop_map(|t| json!(json!({"path": t}).to_string())),
        text(),
    ]
}

fn output() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        3 => text(),
        1 => prop::collection::vec(part(), 0..3).prop_map(Value::Array),
    ]
}

fn item() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        6 => message(),
        3 => (call_id(), name(), arguments()).prop_map(|(c, n, a)| json!({"type": "function_call", "call_id": c, "name": n, "arguments": a})),
        3 => (call_id(), output()).prop_map(|(c, o)| json!({"type": "function_call_output", "call_id": c, "output": o})),
        1 => (call_id(), name(), text()).prop_map(|(c, n, i)| json!({"type": "custom_tool_call", "call_id": c, "name": n, "input": i})),
        1 => (call_id(), output()).prop_map(|(c, o)| json!({"type": "custom_tool_call_output", "call_id": c, "output": o})),
        2 => (text(), opt(text())).prop_map(|(t, enc)| obj(vec![
            ("type", Some(json!("reasoning"))),
            ("id", Some(json!("rs_1"))),
            ("summary", Some(json!([{"type": "summary_text", "text": t}]))),
            ("content", Some(json!([{"type": "reasoning_text", "text": "because"}]))),
            ("encrypted_content", enc),
        ])),
        1 => call_id().prop_map(|c| json!({"type": "local_shell_call", "id": "ls_1", "call_id": c, "status": "completed", "action": {"type": "exec", "command": ["ls", "-l"], "env": {}}})),
        1 => (call_id(), output()).prop_map(|(c, o)| json!({"type": "local_shell_call_output", "call_id": c, "output": o})),
        1 => call_id().prop_map(|c| json!({"type": "shell_call", "call_id": c, "action": {"commands": ["ls"], "timeout_ms": 1000}})),
        1 => call_id().prop_map(|c| json!({"type": "shell_call_output", "call_id": c, "output": [{"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]})),
        1 => call_id().prop_map(|c| json!({"type": "apply_patch_call", "call_id": c, "status": "completed", "operation": {"type": "create_file", "path": "a.txt", "diff": "+a\n"}})),
        1 => call_id().prop_map(|c| json!({"type": "apply_patch_call_output", "call_id": c, "status": "completed", "output": "done"})),
        1 => Just(json!({"type": "mcp_call", "id": "mcp_1", "server_label": "s", "name": "t", "arguments": "{}", "output": "x"})),
        1 => Just(json!({"type": "mcp_approval_response", "approval_request_id": "a", "approve": true})),
        1 => Just(json!({"type": "item_reference", "id": "msg_0"})),
        1 => text().prop_map(|t| json!({"type": "compaction", "encrypted_content": t})),
        1 => (call_id(), text()).prop_map(|(c, q)| json!({"type": "tool_search_call", "call_id": c, "execution": "client", "arguments": {"query": q}})),
        1 => call_id().prop_map(|c| json!({"type": "tool_search_output", "call_id": c, "execution": "client", "tools": [
            {"type": "function", "name": "found", "parameters": {"type": "object", "properties": {}}}]})),
        1 => Just(json!({"type": "additional_tools", "tools": [{"type": "function", "name": "extra", "parameters": {"type": "object"}}]})),
        1 => Just(json!({"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBORw0KGgo="})),
        1 => "[a-z_]{1,12}".prop_map(|t| json!({"type": t, "data": 1})),
    ]
}

fn schema() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        4 => prop::collection::vec(
            ("[a-z]{1,6}", prop::sample::select(&["string", "integer", "number", "boolean", "array", "object", "null"][..])),
            0..4,
        )
        .prop_map(|props| {
            let required: Vec<&String> = props.iter().map(|(k, _)| k).collect();
            let properties: Map<String, Value> =
                props.iter().map(|(k, t)| (k.clone(), json!({"type": t}))).collect();
            json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
        }),
        1 => Just(json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}})),
        1 => Just(json!({"type": "string"})),
        1 => Just(json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1e300}}})),
        1 => Just(json!(true)),
        1 => Just(json!({})),
    ]
}

fn function_tool() -> impl Strategy<Value = Value> + Clone {
    (
        name(),
        opt(text()),
        schema(),
        opt(any::<bool>().prop_map(Value::Bool)),
    )
        .prop_map(|(n, d, p, strict)| {
            obj(vec![
                ("type", Some(json!("function"))),
                ("name", Some(n)),
                ("description", d),
                ("parameters", Some(p)),
                ("strict", strict),
            ])
        })
}

fn tool() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        6 => function_tool(),
        2 => (name(), prop::sample::select(&[
            "start: \"*** Begin Patch\" /.+/s",
            "start: WORD\n%import common.WORD",
            "start: (",
        ][..])).prop_map(|(n, g)| json!({"type": "custom", "name": n, "format": {"type": "grammar", "syntax": "lark", "definition": g}})),
        1 => name().prop_map(|n| json!({"type": "custom", "name": n, "format": {"type": "text"}})),
        1 => (name(), prop::collection::vec(function_tool(), 0..3)).prop_map(|(n, tools)| json!({"type": "namespace", "name": n, "description": "d", "tools": tools})),
        1 => Just(json!({"type": "web_search", "filters": {"allowed_domains": ["example.com"]}})),
        1 => Just(json!({"type": "file_search", "vector_store_ids": ["vs_1"]})),
        1 => Just(json!({"type": "mcp", "server_label": "s", "server_url": "https://example.invalid/mcp", "require_approval": "never"})),
        1 => Just(json!({"type": "local_shell"})),
        1 => Just(json!({"type": "shell"})),
        1 => Just(json!({"type": "apply_patch"})),
        1 => Just(json!({"type": "image_generation"})),
        1 => Just(json!({"type": "tool_search"})),
        1 => (name(), any::<bool>()).prop_map(|(n, d)| json!({"type": "function", "name": n, "defer_loading": d, "parameters": {"type": "object"}})),
        1 => "[a-z_]{1,12}".prop_map(|t| json!({"type": t})),
    ]
}

fn tool_choice() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        prop::sample::select(&["auto", "none", "required", "sometimes"][..]).prop_map(|s| json!(s)),
        name().prop_map(|n| json!({"type": "function", "name": n})),
        name().prop_map(|n| json!({"type": "custom", "name": n})),
        Just(
            json!({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "shell"}]})
        ),
        Just(json!({"type": "web_search"})),
    ]
}

fn text_config() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        Just(json!({"format": {"type": "text"}})),
        Just(json!({"format": {"type": "json_object"}})),
        schema().prop_map(|s| json!({"format": {"type": "json_schema", "name": "out", "schema": s, "strict": true}})),
        Just(json!({"verbosity": "low"})),
    ]
}

fn metadata() -> impl Strategy<Value = Value> + Clone {
    // Mostly within the bounds (16 pairs, keys of 64, values of 512), sometimes past them.
    let pairs = prop_oneof![
        8 => prop::collection::vec(("[a-z]{1,20}", "[a-z ]{0,40}"), 0..6),
        1 => prop::collection::vec(("[a-z]{1,70}", "[a-z ]{0,600}"), 0..20),
    ];
    pairs.prop_map(|pairs| Value::Object(pairs.into_iter().map(|(k, v)| (k, json!(v))).collect()))
}

fn number(range: std::ops::Range<f64>) -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        range.prop_map(|f| json!(f)),
        prop::sample::select(&[0, 1, 2][..]).prop_map(|n| json!(n)),
    ]
}

/// A `POST /v1/responses` body as clients send them.
pub(super) fn request() -> impl Strategy<Value = Value> {
    let input = prop_oneof![
        1 => text(),
        4 => prop::collection::vec(item(), 0..6).prop_map(Value::Array),
    ];
    let head = (
        // The model is required: usually there, so that normalisation goes past it.
        prop::option::weighted(
            0.9,
            prop::sample::select(&["gpt-4o-mini", "deepseek-chat", "m"][..]).prop_map(|m| json!(m)),
        ),
        prop::option::weighted(0.9, input),
        opt(text()),
        opt(prop::collection::vec(tool(), 0..5).prop_map(Value::Array)),
        opt(tool_choice()),
        opt(any::<bool>().prop_map(Value::Bool)),
        opt(number(0.0..2.5)),
        opt(number(0.0..1.0)),
    );
    let tail = (
        opt(prop::sample::select(&[1u64, 64, 4096, 1 << 40][..]).prop_map(|n| json!(n))),
        opt(prop_oneof![
            text(),
            prop::collection::vec(text(), 0..5).prop_map(Value::Array)
        ]),
        opt(metadata()),
        opt(any::<bool>().prop_map(Value::Bool)),
        opt(any::<bool>().prop_map(Value::Bool)),
        opt(text_config()),
        opt(prop::sample::select(
            &["minimal", "low", "medium", "high", "xhigh", "none", "max"][..],
        )
        .prop_map(|e| json!({"effort": e, "summary": "auto"}))),
        opt(Just(json!([
            "reasoning.encrypted_content",
            "message.output_text.logprobs"
        ]))),
        opt(prop::sample::select(&["resp_1", "resp_unknown", ""][..]).prop_map(|p| json!(p))),
    );
    let extra = (
        opt(prop::sample::select(&["auto", "disabled"][..]).prop_map(|t| json!(t))),
        opt(text()),
        opt(Just(json!(false))),
        opt(Just(json!({"include_obfuscation": false}))),
        opt(Just(json!({"id": "conv_1"}))),
        opt(Just(json!("generate"))),
    );
    (head, tail, extra).prop_map(
        |(
            (model, input, instructions, tools, choice, parallel, temperature, top_p),
            (max, stop, metadata, store, stream, text, reasoning, include, previous),
            (truncation, cache_key, background, stream_options, conversation, client_metadata),
        )| {
            obj(vec![
                ("model", model),
                ("input", input),
                ("instructions", instructions),
                ("tools", tools),
                ("tool_choice", choice),
                ("parallel_tool_calls", parallel),
                ("temperature", temperature),
                ("top_p", top_p),
                ("max_output_tokens", max),
                ("stop", stop),
                ("metadata", metadata),
                ("store", store),
                ("stream", stream),
                ("text", text),
                ("reasoning", reasoning),
                ("include", include),
                ("previous_response_id", previous),
                ("truncation", truncation),
                ("prompt_cache_key", cache_key),
                ("background", background),
                ("stream_options", stream_options),
                ("conversation", conversation),
                (
                    "client_metadata",
                    client_metadata.map(|_| json!({"x-codex-turn-metadata": "{}"})),
                ),
            ])
        },
    )
}
