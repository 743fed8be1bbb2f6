//! Tests of the strings tool: every operation, grapheme handling, and every cap.

use super::*;

fn run(args: Value) -> Result<Value, ToolError> {
    Strings::run(&args, 16 * 1024 * 1024)
}

fn result(args: Value) -> Value {
    run(args).unwrap()["result"].clone()
}

#[test]
fn length_counts_graphemes_chars_and_bytes() {
    let out = result(json!({"operation": "length", "text": "e\u{301}👍🏽🇫🇷a"}));
    assert_eq!(out["graphemes"], 4);
    assert_eq!(out["chars"], 7);
    assert_eq!(out["bytes"], 3 + 8 + 8 + 1);
    assert_eq!(out["utf16_units"], 2 + 4 + 4 + 1);
}

#[test]
fn reverse_keeps_graphemes_whole() {
    assert_eq!(
        result(json!({"operation": "reverse", "text": "ae\u{301}👍🏽"})),
        "👍🏽e\u{301}a"
    );
}

#[test]
fn substring_uses_grapheme_indices() {
    let text = "h\u{e9}llo 👍🏽 world";
    assert_eq!(
        result(json!({"operation": "substring", "text": text, "start": 6, "end": 7})),
        "👍🏽"
    );
    assert_eq!(
        result(json!({"operation": "substring", "text": text, "start": -5})),
        "world"
    );
    assert_eq!(
        result(json!({"operation": "substring", "text": text, "end": 2})),
        "hé"
    );
    assert_eq!(
        result(json!({"operation": "substring", "text": text, "start": 100})),
        ""
    );
    assert_eq!(
        result(json!({"operation": "substring", "text": text, "start": 5, "end": 2})),
        ""
    );
    let out =
        run(json!({"operation": "substring", "text": "abc", "start": -100, "end": 100})).unwrap();
    assert_eq!(out["result"], "abc");
    assert_eq!(out["start"], 0);
    assert_eq!(out["end"], 3);
}

#[test]
fn split_and_join() {
    assert_eq!(
        result(json!({"operation": "split", "text": "a,b,,c", "separator": ","})),
        json!(["a", "b", "", "c"])
    );
    assert_eq!(
        result(json!({"operation": "split", "text": "a,b,c", "separator": ",", "limit": 2})),
        json!(["a", "b,c"])
    );
    assert_eq!(
        result(json!({"operation": "split", "text": "  a \n b  "})),
        json!(["a", "b"])
    );
    assert_eq!(
        result(json!({"operation": "split", "text": "a b c", "limit": 2})),
        json!(["a", "b"])
    );
    assert_eq!(
        result(json!({"operation": "split", "text": "e\u{301}x", "separator": ""})),
        json!(["e\u{301}", "x"])
    );
    assert_eq!(
        result(json!({"operation": "join", "parts": ["a", "b", "c"], "separator": "-"})),
        "a-b-c"
    );
    assert_eq!(result(json!({"operation": "join", "parts": []})), "");
    let err = run(json!({"operation": "join"})).unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/parts"));
}

#[test]
fn replace_is_literal_and_counted() {
    let out =
        run(json!({"operation": "replace", "text": "a.b.c", "pattern": ".", "replacement": "::"}))
            .unwrap();
    assert_eq!(out["result"], "a::b::c");
    assert_eq!(out["replacements"], 2);
    assert_eq!(
        result(
            json!({"operation": "replace", "text": "aaa", "pattern": "a", "replacement": "b", "count": 2})
        ),
        "bba"
    );
    let err = run(json!({"operation": "replace", "text": "a", "pattern": "", "replacement": "b"}))
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/pattern"));
}

#[test]
fn trim() {
    assert_eq!(
        result(json!({"operation": "trim", "text": "  hi \n"})),
        "hi"
    );
    assert_eq!(
        result(json!({"operation": "trim", "text": "  hi  ", "side": "start"})),
        "hi  "
    );
    assert_eq!(
        result(json!({"operation": "trim", "text": "  hi  ", "side": "end"})),
        "  hi"
    );
    assert_eq!(
        result(json!({"operation": "trim", "text": "xxhixy", "characters": "xy"})),
        "hi"
    );
}

#[test]
fn case_conversions() {
    let text = "parseHTTPServer response_code-2xx  Done";
    let table = [
        ("upper", "PARSEHTTPSERVER RESPONSE_CODE-2XX  DONE"),
        ("lower", "parsehttpserver response_code-2xx  done"),
        ("title", "Parsehttpserver Response_code-2xx  Done"),
        ("snake", "parse_http_server_response_code_2xx_done"),
        ("kebab", "parse-http-server-response-code-2xx-done"),
        ("camel", "parseHttpServerResponseCode2xxDone"),
    ];
    for (op, want) in table {
        assert_eq!(result(json!({"operation": op, "text": text})), want, "{op}");
    }
    assert_eq!(
        result(json!({"operation": "upper", "text": "straße"})),
        "STRASSE"
    );
    assert_eq!(
        result(json!({"operation": "snake", "text": "ÉcoleNormale"})),
        "école_normale"
    );
    assert_eq!(
        result(json!({"operation": "camel", "text": "hello world"})),
        "helloWorld"
    );
    assert_eq!(
        result(json!({"operation": "title", "text": "hELLO wORLD"})),
        "Hello World"
    );
}

#[test]
fn limits() {
    let over = "a".repeat(MAX_TEXT_BYTES + 1);
    assert_eq!(
        run(json!({"operation": "length", "text": over}))
            .unwrap_err()
            .code(),
        "limit_exceeded"
    );
    let many = ",".repeat(MAX_PARTS);
    assert_eq!(
        run(json!({"operation": "split", "text": many, "separator": ","}))
            .unwrap_err()
            .code(),
        "limit_exceeded"
    );
    let just = ",".repeat(MAX_PARTS - 1);
    assert_eq!(
        result(json!({"operation": "split", "text": just, "separator": ","}))
            .as_array()
            .unwrap()
            .len(),
        MAX_PARTS
    );
    assert!(run(json!({"operation": "split", "text": ",".repeat(MAX_PARTS), "separator": ",", "limit": 5})).is_ok());
    let parts = vec!["x"; MAX_PARTS + 1];
    assert_eq!(
        run(json!({"operation": "join", "parts": parts}))
            .unwrap_err()
            .code(),
        "limit_exceeded"
    );
    let big = vec!["y".repeat(1024); 1100];
    assert_eq!(
        run(json!({"operation": "join", "parts": big}))
            .unwrap_err()
            .code(),
        "limit_exceeded"
    );
    // A replacement that would grow past the output limit is refused before it is built.
    let text = "a".repeat(MAX_TEXT_BYTES);
    let err = Strings::run(
        &json!({"operation": "replace", "text": text, "pattern": "a", "replacement": "b".repeat(1000)}),
        1024 * 1024,
    )
    .unwrap_err();
    assert_eq!(err, ToolError::OutputTooLarge { limit: 1024 * 1024 });
}

#[test]
fn errors_name_the_field() {
    let err = run(json!({"operation": "upper"})).unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/text"));
    let err = run(json!({"operation": "shout", "text": "a"})).unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/operation"));
    let err = run(json!({"operation": "trim", "text": "a", "side": "middle"})).unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/side"));
    let err = run(json!({"operation": "substring", "text": "a", "start": "1"})).unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/start"));
}

#[tokio::test]
async fn execute_applies_the_output_limit() {
    let ctx = ToolContext::with_timeout(std::time::Duration::from_secs(5), 32);
    let err = Strings
        .execute(json!({"operation": "upper", "text": "a".repeat(64)}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::OutputTooLarge { limit: 32 });
    let out = Strings
        .execute(
            json!({"operation": "upper", "text": "abc"}),
            &ToolContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(out["result"], "ABC");
}
