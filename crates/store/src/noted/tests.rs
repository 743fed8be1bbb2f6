//! The noted outline against reading the text back, on the same values.

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::*;
use crate::ResponseRecord;

/// The record from the noted outline, and the record read back from the same text.
fn both(value: &Value) -> (ResponseRecord, ResponseRecord, bool) {
    let text = ResponseText::serialize(value, true);
    assert_eq!(
        **text.text(),
        serde_json::to_string(value).unwrap_or_default()
    );
    let noted = text.outline.is_some();
    let body = Arc::clone(text.text());
    let input = [json!({"id": "in_1", "type": "message"})];
    let from_outline = ResponseRecord::from_text(text, &input, Some(5));
    let read_back = ResponseRecord::from_json(body, &input, Some(5));
    match (from_outline, read_back) {
        (Ok(a), Ok(b)) => (a, b, noted),
        (a, b) => panic!("{a:?} / {b:?}"),
    }
}

#[test]
fn the_noted_record_is_the_record_read_back() {
    let cases = [
        json!({
            "id": "resp_1", "object": "response", "created_at": 1_700_000_000,
            "status": "completed", "model": "glm-4.6",
            "previous_response_id": "resp_0",
            "output": [
                {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}]},
                {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "a\nb \"q\" \\ é"}]},
                {"type": "function_call", "call_id": "c", "arguments": "{\"id\":\"inner\"}", "id": "fc_1"},
            ],
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}],
            "usage": {"input_tokens": 3, "output_tokens": 4},
            "metadata": {"output": [1, 2], "id": "not this"},
        }),
        // Escapes in the columns, odd types, items that are not objects or lack an id.
        json!({
            "id": "resp_\"2\"\t", "created_at": -7, "status": "in_progress", "model": "m\u{1}x/y",
            "previous_response_id": null,
            "output": [3, "s", null, [1, {"id": "deep"}], {"id": 4}, {"content": [{"id": "nested"}]}, {}],
        }),
        json!({"id": 3, "created_at": "x", "status": ["s"], "model": {"m": 1}, "output": {}}),
        json!({"created_at": 1.5, "output": null}),
        json!({"created_at": u64::MAX, "output": "no"}),
        json!({"output": []}),
        json!({}),
    ];
    for case in &cases {
        let (noted, read_back, was_noted) = both(case);
        assert!(was_noted, "{case}");
        assert_eq!(noted, read_back, "{case}");
    }
    // The first case, spelled out (the comparison would pass if both read nothing).
    let (record, _, _) = both(&cases[0]);
    assert_eq!(record.id(), "resp_1");
    assert_eq!(record.created_at, 1_700_000_000);
    assert_eq!(record.previous_response_id.as_deref(), Some("resp_0"));
    let ids: Vec<_> = record
        .output_items
        .iter()
        .map(|i| i.id.as_deref())
        .collect();
    assert_eq!(ids, [Some("rs_1"), Some("msg_1"), Some("fc_1")]);
    let texts: Vec<_> = record.items().map(|i| i.3.to_owned()).collect();
    assert_eq!(
        serde_json::from_str::<Value>(&texts[2]).unwrap_or_default(),
        cases[0]["output"][1]
    );
    let (odd, _, _) = both(&cases[1]);
    assert_eq!(odd.id(), "resp_\"2\"\t");
    assert_eq!(odd.model, "m\u{1}x/y");
    assert_eq!(odd.created_at, -7);
    assert_eq!(odd.output_items.len(), 7);
    assert!(odd.output_items.iter().all(|i| i.id.is_none()));
}

#[test]
fn what_is_not_followed_is_read_back() {
    // Not an object: both refuse it.
    let text = ResponseText::serialize(&json!([1, 2]), true);
    assert!(text.outline.is_none());
    let e = ResponseRecord::from_text(text, &[], None).unwrap_err();
    assert_eq!(e.code(), "store_corrupt");
    // A raw value as a column's value or as an output item: read back, the same record.
    #[derive(Serialize)]
    struct WithRaw<'a> {
        id: &'a RawValue,
        output: Vec<&'a RawValue>,
    }
    let id = RawValue::from_string("\"resp_raw\"".to_owned()).unwrap();
    let item = RawValue::from_string("{\"id\":\"msg_raw\"}".to_owned()).unwrap();
    for value in [
        WithRaw {
            id: &id,
            output: vec![],
        },
        WithRaw {
            id: &item,
            output: vec![&item],
        },
    ] {
        let text = ResponseText::serialize(&value, true);
        assert!(text.outline.is_none());
        let body = Arc::clone(text.text());
        let record = ResponseRecord::from_text(text, &[], None).unwrap();
        assert_eq!(record, ResponseRecord::from_json(body, &[], None).unwrap());
    }
    let text = ResponseText::serialize(
        &WithRaw {
            id: &id,
            output: vec![&item],
        },
        true,
    );
    let record = ResponseRecord::from_text(text, &[], None).unwrap();
    assert_eq!(record.id(), "resp_raw");
    assert_eq!(record.output_items[0].id.as_deref(), Some("msg_raw"));
    // A raw value deep inside a field (a tool's schema) changes nothing noted.
    #[derive(Serialize)]
    struct DeepRaw<'a> {
        id: &'a str,
        tools: Vec<&'a RawValue>,
    }
    let text = ResponseText::serialize(
        &DeepRaw {
            id: "r",
            tools: vec![&item],
        },
        true,
    );
    assert_eq!(
        text.outline.as_ref().and_then(|o| o.id.as_deref()),
        Some("r")
    );
    // Without noting, the text is the same and the record reads it back.
    let plain = ResponseText::serialize(&json!({"id": "r"}), false);
    assert!(plain.outline.is_none());
    assert_eq!(&**plain.text(), r#"{"id":"r"}"#);
}
