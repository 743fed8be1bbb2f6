//! Tests of [`RawJson`], the long-text writer and reader, and the fast escaper.

use super::*;
use serde_json::json;

/// A text read through [`text`]: the string serde_json decodes, from the cache the second
/// time; a value that is not a string fails as `String` fails, at the field's path.
#[test]
fn texts_are_decoded_once_and_fail_as_strings_do() {
    #[derive(Deserialize)]
    struct Part {
        #[serde(deserialize_with = "text")]
        text: String,
    }
    let long = "a \"quoted\" line\n\ttab \u{1} é \u{1F600} \\ ".repeat(200);
    for value in [long.clone(), "short \n".to_owned(), String::new()] {
        let body = serde_json::to_string(&json!({"text": value})).unwrap();
        for _ in 0..2 {
            let part: Part = serde_json::from_str(&body).unwrap();
            assert_eq!(part.text, value);
            let from_value: Part = serde_json::from_value(json!({"text": value})).unwrap();
            assert_eq!(from_value.text, value);
        }
    }
    let cases = [
        (
            r#"{"text": 7}"#,
            "invalid type: integer `7`, expected a string",
        ),
        (
            r#"{"text": -7}"#,
            "invalid type: integer `-7`, expected a string",
        ),
        (
            r#"{"text": 1.5}"#,
            "invalid type: floating point `1.5`, expected a string",
        ),
        (r#"{"text": null}"#, "invalid type: null, expected a string"),
        (
            r#"{"text": true}"#,
            "invalid type: boolean `true`, expected a string",
        ),
        (
            r#"{"text": ["b"]}"#,
            "invalid type: sequence, expected a string",
        ),
        (
            r#"{"text": {"b": 1}}"#,
            "invalid type: map, expected a string",
        ),
    ];
    for (body, message) in cases {
        let mut de = serde_json::Deserializer::from_str(body);
        let Err(e) = serde_path_to_error::deserialize::<_, Part>(&mut de) else {
            panic!("{body} was read");
        };
        assert_eq!(e.path().to_string(), "text", "{body}");
        assert!(
            e.inner().to_string().starts_with(message),
            "{body}: {}",
            e.inner()
        );
        let plain = serde_json::from_str::<Part>(body)
            .err()
            .map(|e| e.to_string());
        let string = serde_json::from_str::<StringPart>(body)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            plain.as_deref().map(|m| m.split(" at line").next()),
            string.as_deref().map(|m| m.split(" at line").next()),
            "{body}"
        );
    }
    #[derive(Deserialize)]
    struct StringPart {
        #[allow(dead_code)]
        text: String,
    }
}

/// A long text is written as serde_json writes it, from the cache the second time (the
/// same literal), and the cache keeps within its budget however many texts pass.
#[test]
fn long_texts_are_escaped_once_and_the_cache_is_bounded() {
    let long = "line \"one\"\n\ttab \u{1} é ".repeat(400);
    assert!(long.len() >= literals::CACHED);
    let first = serde_json::to_string(&LongStr(&long)).unwrap();
    assert_eq!(first, serde_json::to_string(&long).unwrap());
    let again = literals::literal(&long, |_| unreachable!("cached"));
    assert_eq!(&*again, first.as_str());
    // Many distinct texts: the oldest go, the budget holds, the output stays right.
    for i in 0..600 {
        let text = format!("{i} {}", "x\n".repeat(2048));
        let written = serde_json::to_string(&LongStr(&text)).unwrap();
        assert_eq!(written, serde_json::to_string(&text).unwrap());
    }
    let (entries, bytes) = literals::size();
    assert!(bytes <= literals::BUDGET, "{bytes}");
    assert!(entries > 1 && entries < 600, "{entries}");
    // A text larger than the whole budget is escaped, not kept.
    let huge = "y".repeat(literals::BUDGET);
    let written = serde_json::to_string(&LongStr(&huge)).unwrap();
    assert_eq!(written.len(), huge.len() + 2);
    assert!(literals::size().1 <= literals::BUDGET);
}

#[test]
fn text_passes_through_byte_for_byte() {
    let text =
        r#"{"type":"object","properties":{"q":{"type":"string","description":"a \"quoted\" é"}}}"#;
    let raw: RawJson = serde_json::from_str(text).unwrap();
    assert_eq!(raw.text(), text);
    assert_eq!(serde_json::to_string(&raw).unwrap(), text);
    assert_eq!(raw.value()["properties"]["q"]["type"], "string");
}

#[test]
fn nested_in_a_struct_and_through_values() {
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct T {
        name: String,
        parameters: Option<RawJson>,
    }
    let v = json!({"name": "f", "parameters": {"type": "object", "required": ["a"]}});
    let from_value: T = serde_json::from_value(v.clone()).unwrap();
    let from_ref = T::deserialize(&v).unwrap();
    let from_text: T = serde_json::from_str(&v.to_string()).unwrap();
    assert_eq!(from_value, from_text);
    assert_eq!(from_ref, from_text);
    assert_eq!(serde_json::to_value(&from_text).unwrap(), v);
    assert_eq!(serde_json::to_string(&from_value).unwrap(), v.to_string());
}

#[test]
fn behind_flatten_it_reads_the_buffered_value() {
    #[derive(Deserialize)]
    struct Outer {
        #[serde(flatten)]
        inner: Inner2,
    }
    #[derive(Deserialize)]
    struct Inner2 {
        parameters: RawJson,
        scalar: RawJson,
        list: RawJson,
    }
    let text = r#"{"parameters":{"type":"object"},"scalar":3,"list":[1,"x",null]}"#;
    let outer: Outer = serde_json::from_str(text).unwrap();
    assert_eq!(outer.inner.parameters, json!({"type": "object"}));
    assert_eq!(outer.inner.scalar.text(), "3");
    assert_eq!(outer.inner.list.text(), r#"[1,"x",null]"#);
}

#[test]
fn the_fast_escaper_writes_what_serde_json_writes() {
    let mut samples: Vec<String> = vec![
        String::new(),
        "plain ascii text that runs past eight bytes".into(),
        "quote \" backslash \\ newline \n tab \t cr \r".into(),
        "é ü 中文 🙂 and \u{7f} \u{80} \u{ff}".into(),
    ];
    // Every byte below 0x80 at every offset of a run of sixteen.
    for b in 0u8..0x80 {
        for offset in 0..20 {
            let mut s = "x".repeat(offset);
            s.push(char::from(b));
            s.push_str("tail-of-the-string");
            samples.push(s);
        }
    }
    // Two bytes to escape in one step, among multi-byte characters.
    for first in 0..10 {
        for second in first + 1..12 {
            let mut chars: Vec<char> = "éabcdefghijkl🙂".chars().collect();
            chars[first] = '"';
            chars[second] = '\u{1}';
            samples.push(chars.into_iter().collect());
        }
    }
    samples.push("line\n".repeat(500));
    for s in samples {
        assert_eq!(
            json_literal(&s),
            serde_json::to_string(&s).unwrap(),
            "{s:?}"
        );
        assert_eq!(
            serde_json::to_string(&LongStr(&s)).unwrap(),
            serde_json::to_string(&s).unwrap()
        );
    }
    let long = "a \"quoted\" line\n".repeat(40);
    assert_eq!(serde_json::to_value(LongStr(&long)).unwrap(), json!(long));
}

#[test]
fn equality_is_of_values() {
    let a: RawJson = serde_json::from_str(r#"{"a": 1, "b": 2}"#).unwrap();
    let b = RawJson::from(json!({"b": 2, "a": 1}));
    assert_eq!(a, b);
    assert_ne!(a, RawJson::from(json!({"a": 1})));
}
