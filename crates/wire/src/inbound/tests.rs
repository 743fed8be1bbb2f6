//! Errors name the leaf field and read as plain JSON words; unknown shapes still pass.

use serde_json::json;

use super::*;
use crate::responses::CreateResponse;

/// What the gateway answers for `body`: the path and the message (`None` when it parses).
fn refusal(body: &Value) -> Option<(Option<String>, String)> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    let parsed: Result<CreateResponse, _> = serde_path_to_error::deserialize(&mut de);
    parsed.err().map(|e| {
        let path = e.path().to_string();
        explain(&path, &e.into_inner().to_string())
    })
}

const RUST_WORDS: &[&str] = &[
    "Vec",
    "String",
    "enum",
    "struct",
    "InputItem",
    "serde",
    "u64",
    "u32",
    "f64",
    "untagged",
    "sequence",
    "a map",
    "Option",
];

fn assert_plain(message: &str) {
    for word in RUST_WORDS {
        assert!(!message.contains(word), "`{word}` in: {message}");
    }
}

#[test]
fn errors_deep_inside_items_name_the_leaf_field() {
    let user =
        |content: Value| json!({"model": "m", "input": [{"role": "user", "content": content}]});
    let cases = [
        (
            user(
                json!([{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}, {"type": 5}]),
            ),
            "input[0].content[2].type",
            "expected a string",
        ),
        (
            user(json!([{"type": "input_text", "text": "a"}, {"type": "input_text", "text": 7}])),
            "input[0].content[1].text",
            "expected a string",
        ),
        (
            user(json!([{"text": "no type"}])),
            "input[0].content[0].type",
            "missing field `type`",
        ),
        (
            user(json!(12)),
            "input[0].content",
            "a string or a list of content parts",
        ),
        (
            user(json!([{"type": "refusal"}])),
            "input[0].content[0].refusal",
            "missing field `refusal`",
        ),
        (
            json!({"model": "m", "input": [
                {"role": "user", "content": "a"},
                {"type": "function_call", "call_id": 7, "name": "x", "arguments": "{}"},
            ]}),
            "input[1].call_id",
            "expected a string",
        ),
        (
            json!({"model": "m", "input": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": []}]}]}),
            "input[0].summary[0].text",
            "invalid type: array, expected a string",
        ),
        (
            json!({"model": "m", "input": [{"role": "assistant", "content": [{"type": "output_text", "text": "x", "annotations": {}}]}]}),
            "input[0].content[0].annotations",
            "invalid type: object, expected an array",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": 3}]}),
            "tools[1].name",
            "expected a string",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"name": "a"}]}),
            "tools[0].type",
            "missing field `type`",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [
                {"type": "web_search"},
                {"type": "custom", "name": "c"},
                {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f", "strict": "yes"}]},
            ]}),
            "tools[2].tools[0].strict",
            "expected a boolean",
        ),
    ];
    for (body, path, words) in cases {
        let (param, message) = refusal(&body).unwrap_or_else(|| panic!("{body} parsed"));
        assert_eq!(param.as_deref(), Some(path), "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
        assert_plain(&message);
    }
}

#[test]
fn top_level_type_errors_read_as_json_words() {
    let cases = [
        (
            json!({"max_output_tokens": "many"}),
            "max_output_tokens",
            "a non-negative integer",
        ),
        (json!({"temperature": "hot"}), "temperature", "a number"),
        (json!({"stop": 5}), "stop", "not of an accepted type"),
        (
            json!({"text": {"format": {"type": "xml"}}}),
            "text.format.type",
            "unknown value `xml`",
        ),
        (
            json!({"text": {"format": {"type": "json_schema"}}}),
            "text.format.name",
            "missing field `name`",
        ),
        (
            json!({"text": {"format": 3}}),
            "text.format",
            "expected an object",
        ),
        (json!({"reasoning": []}), "reasoning", "expected an object"),
        (json!({"include": "all"}), "include", "expected an array"),
        (json!({"metadata": [1]}), "metadata", "expected an object"),
        (
            json!({"input": 4}),
            "input",
            "a string or a list of input items",
        ),
    ];
    for (body, path, words) in cases {
        let (param, message) = refusal(&body).unwrap_or_else(|| panic!("{body} parsed"));
        assert_eq!(param.as_deref(), Some(path), "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
        assert_plain(&message);
    }
}

#[test]
fn unknown_types_and_fields_still_pass_through() {
    let body = json!({
        "model": "m",
        "input": [
            {"type": "future_item", "payload": {"a": 1}},
            {"role": "user", "content": [{"type": "input_audio", "data": 5}, {"type": "input_text", "text": "hi", "cache": true}]},
        ],
        "tools": [{"type": "computer_use", "display": 7}],
        "future_option": [1, 2],
    });
    assert!(refusal(&body).is_none());
    let parsed: CreateResponse = serde_json::from_value(body).unwrap_or_default();
    let Some(Input::Items(items)) = &parsed.input else {
        panic!("no items");
    };
    assert!(matches!(&items[0], InputItem::Other(m) if m["type"] == "future_item"));
    let InputItem::Message(message) = &items[1] else {
        panic!("not a message");
    };
    let MessageContent::Parts(parts) = &message.content else {
        panic!("no parts");
    };
    assert!(
        matches!(&parts[0], ContentPart::Other(m) if m["type"] == "input_audio" && m["data"] == 5)
    );
    assert!(matches!(&parts[1], ContentPart::InputText { text, .. } if text == "hi"));
    assert_eq!(
        parsed.tools.as_ref().map(|t| t[0].kind()),
        Some("computer_use")
    );
    assert_eq!(parsed.extra["future_option"], json!([1, 2]));
}

#[test]
fn plain_rewrites_rust_words() {
    let cases = [
        (
            "invalid type: string \"x\", expected u64 at line 1 column 9",
            "invalid type: string \"x\", expected a non-negative integer at line 1 column 9",
        ),
        (
            "invalid type: map, expected struct FunctionTool",
            "invalid type: object, expected an object",
        ),
        (
            "data did not match any variant of untagged enum Stop at line 1 column 3",
            "the value is not of an accepted type at line 1 column 3",
        ),
        (
            "unknown variant `xml`, expected one of `text`, `json_object`",
            "unknown value `xml`, expected one of `text`, `json_object`",
        ),
        (
            "invalid type: sequence, expected a map",
            "invalid type: array, expected an object",
        ),
        (
            "invalid value: integer `-1`, expected u32",
            "invalid value: integer `-1`, expected a non-negative integer",
        ),
        ("expected f64", "expected a number"),
        // A word that only starts like a type is left alone.
        ("expected u640x", "expected u640x"),
    ];
    for (serde, plain_words) in cases {
        assert_eq!(plain(serde), plain_words);
    }
}

#[test]
fn paths_join_across_levels() {
    assert_eq!(
        join_path("input[3]", Some("content[1].type")).as_deref(),
        Some("input[3].content[1].type")
    );
    assert_eq!(join_path("tools", Some("[2]")).as_deref(), Some("tools[2]"));
    assert_eq!(join_path(".", Some("type")).as_deref(), Some("type"));
    assert_eq!(
        join_path("temperature", None).as_deref(),
        Some("temperature")
    );
    assert_eq!(join_path(".", None), None);
    assert_eq!(split_path("at `a.b`: no"), (Some("a.b"), "no"));
    assert_eq!(split_path("no path"), (None, "no path"));
}

/// `value` with the keys of every object in reverse order (`type` last).
fn reversed(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reversed(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

#[test]
fn type_first_objects_read_in_place_as_buffered_ones_read() {
    let body = json!({
        "model": "m",
        "instructions": "be brief\nplease",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules \"quoted\""}], "phase": 2},
            {"type": "message", "id": "m1", "role": "assistant", "content": [{"type": "output_text", "text": "x", "annotations": []}, {"type": "refusal", "refusal": "no"}], "status": "completed"},
            {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "s"}], "encrypted_content": "e"},
            {"type": "function_call", "call_id": "c1", "name": "exec", "arguments": "{}", "namespace": "ns"},
            {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "ok"}]},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "tool_search_output", "call_id": "c3", "tools": [], "execution": "client"},
            {"type": "future_item", "payload": {"b": 1, "a": 2}},
            {"role": "user", "content": [{"type": "input_image", "image_url": "data:"}, {"type": "input_text", "text": "hi"}]},
        ],
        "tools": [
            {"type": "function", "name": "exec", "description": "d", "parameters": {"type": "object"}, "strict": false, "defer_loading": true},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]},
            {"type": "web_search", "external_web_access": false},
        ],
        "tool_choice": "auto",
        "reasoning": {"effort": "high", "context": 1},
        "store": false,
        "client_metadata": {"k": "v"},
    });
    let in_place: CreateResponse = serde_json::from_slice(body.to_string().as_bytes()).unwrap();
    let buffered: CreateResponse =
        serde_json::from_slice(reversed(&body).to_string().as_bytes()).unwrap();
    // Unknown objects keep their own key order, so they are compared as JSON values.
    assert_eq!(
        serde_json::to_value(&in_place).unwrap(),
        serde_json::to_value(&buffered).unwrap()
    );
    assert_eq!(in_place.extra["client_metadata"], json!({"k": "v"}));
    assert!(
        matches!(&in_place.tools.as_ref().unwrap()[0], Tool::Function(f) if f.extra["defer_loading"] == true)
    );
    // The same from a `Value` (the store's and the tests' path).
    let from_value: CreateResponse = serde_json::from_value(body).unwrap();
    assert_eq!(from_value, in_place);
}

#[test]
fn a_field_given_twice_is_refused() {
    let refused = serde_json::from_str::<CreateResponse>(r#"{"model":"a","model":"b"}"#);
    assert!(refused.is_err_and(|e| e.to_string().contains("duplicate field `model`")));
}

#[test]
fn chat_answers_keep_unknown_keys_drop_bookkeeping_and_read_null_choices_as_none() {
    use crate::chat::{ChatChunk, ChatResponse};
    let text = r#"{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m",
        "choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null,
        "system_fingerprint":"fp","service_tier":"default"}"#;
    let chunk: ChatChunk = serde_json::from_str(text).unwrap();
    assert_eq!(chunk.id.as_deref(), Some("c1"));
    assert_eq!(chunk.choices[0].delta.content, Some("Hi".into()));
    // The bookkeeping every answer carries is read and dropped; other keys are kept.
    assert_eq!(chunk.extra.len(), 1, "{:?}", chunk.extra);
    assert_eq!(chunk.extra["service_tier"], "default");
    // Read from a `Value` (the buffered path) the same way; written back whole.
    let value: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        serde_json::from_value::<ChatChunk>(value.clone()).unwrap(),
        chunk
    );
    assert_eq!(
        serde_json::to_value(&chunk).unwrap()["service_tier"],
        "default"
    );
    let error = json!({"choices": null, "base_resp": {"status_code": 1004}});
    let whole: ChatResponse = serde_json::from_value(error).unwrap();
    assert!(whole.choices.is_empty());
    assert_eq!(whole.extra["base_resp"]["status_code"], 1004);
    let twice = serde_json::from_str::<ChatChunk>(r#"{"id":"a","id":"b"}"#);
    assert!(
        twice
            .unwrap_err()
            .to_string()
            .contains("duplicate field `id`")
    );
}

#[test]
fn a_key_repeated_at_any_depth_is_found_with_its_path() {
    use super::duplicate_key;
    let found = |text: &str| duplicate_key(text).map(|(path, key)| format!("{path} {key}"));
    assert_eq!(
        found(r#"{"model":"a","input":[{"a":1},{"b":[1,{"c":2}]}]}"#),
        None
    );
    // Issue 44: a repeat inside an input item was accepted (the last one won).
    assert_eq!(
        found(r#"{"input":[{"type":"message","role":"user","role":"assistant","content":"x"}]}"#)
            .as_deref(),
        Some("input[0].role role")
    );
    assert_eq!(found(r#"{"a":1,"a":2}"#).as_deref(), Some("a a"));
    assert_eq!(
        found(r#"{"input":[1,[2,{"x":{"k":1,"j":{},"k":2}}]]}"#).as_deref(),
        Some("input[1][1].x.k k")
    );
    assert_eq!(
        found(r#"{"metadata":{"k":"a","\u006b":"b"}}"#).as_deref(),
        Some("metadata.k k")
    );
    // Keys of sibling objects, and text that looks like keys inside strings, are not repeats.
    assert_eq!(
        found(r#"{"a":{"k":1},"b":{"k":1},"c":"\"k\":1,\"k\":2","d":"\\"}"#),
        None
    );
    // A large object (past the linear look) still finds its repeat.
    let mut many: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
    assert_eq!(found(&format!("{{{}}}", many.join(","))), None);
    many.push("\"k7\":0".to_owned());
    assert_eq!(
        found(&format!("{{\"tools\":[{{{}}}]}}", many.join(","))).as_deref(),
        Some("tools[0].k7 k7")
    );
}
