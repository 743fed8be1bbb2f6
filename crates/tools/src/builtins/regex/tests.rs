//! Unit tests of the regex tool: operations, limits and error paths.

use super::*;

async fn run(args: Value) -> Result<Value, ToolError> {
    RegexTool.execute(args, &ToolContext::default()).await
}

async fn path_of(args: Value) -> String {
    match run(args).await.unwrap_err() {
        ToolError::InvalidArguments { path, .. } => path,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn match_reports_the_first_match() {
    let out = run(json!({"operation": "match", "pattern": r"\d+", "text": "ab 12 34"}))
        .await
        .unwrap();
    assert_eq!(out["matched"], true);
    assert_eq!(out["match"], json!({"text": "12", "start": 3, "end": 5}));
    let out = run(json!({"operation": "match", "pattern": "HELLO", "text": "hello", "case_insensitive": true})).await.unwrap();
    assert_eq!(out["matched"], true);
    let out = run(json!({"operation": "match", "pattern": "^b", "text": "a\nb"}))
        .await
        .unwrap();
    assert_eq!(out["matched"], false);
    assert_eq!(out["match"], Value::Null);
    let out =
        run(json!({"operation": "match", "pattern": "^b", "text": "a\nb", "multi_line": true}))
            .await
            .unwrap();
    assert_eq!(out["matched"], true);
    let out = run(json!({"operation": "match", "pattern": "a.b", "text": "a\nb", "dot_matches_new_line": true})).await.unwrap();
    assert_eq!(out["matched"], true);
    let out = run(json!({"operation": "match", "pattern": "a b # spaced", "text": "ab", "ignore_whitespace": true})).await.unwrap();
    assert_eq!(out["matched"], true);
}

#[tokio::test]
async fn find_all_stops_at_the_limit() {
    let out = run(json!({"operation": "find_all", "pattern": r"\w+", "text": "héllo big world"}))
        .await
        .unwrap();
    assert_eq!(out["count"], 3);
    assert_eq!(out["truncated"], false);
    assert_eq!(
        out["matches"][0],
        json!({"text": "héllo", "start": 0, "end": 6})
    );
    let out =
        run(json!({"operation": "find_all", "pattern": r"\w+", "text": "a b c d", "limit": 2}))
            .await
            .unwrap();
    assert_eq!(out["count"], 2);
    assert_eq!(out["truncated"], true);
    let text = "x".repeat(DEFAULT_LIMIT + 5);
    let out = run(json!({"operation": "find_all", "pattern": "x", "text": text}))
        .await
        .unwrap();
    assert_eq!(out["count"], DEFAULT_LIMIT);
    assert_eq!(out["truncated"], true);
}

#[tokio::test]
async fn captures_numbered_and_named() {
    let out = run(json!({
        "operation": "captures",
        "pattern": r"(?P<year>\d{4})-(\d{2})(-(?P<day>\d{2}))?",
        "text": "2024-05 and 2025-12-31",
    }))
    .await
    .unwrap();
    assert_eq!(out["count"], 2);
    let first = &out["matches"][0];
    assert_eq!(first["match"]["text"], "2024-05");
    assert_eq!(first["groups"][0]["text"], "2024");
    assert_eq!(first["groups"][1]["text"], "05");
    assert_eq!(first["groups"][2], Value::Null);
    assert_eq!(first["named"]["year"]["text"], "2024");
    assert_eq!(first["named"]["day"], Value::Null);
    assert_eq!(out["matches"][1]["named"]["day"]["text"], "31");
}

#[tokio::test]
async fn replace_expands_or_inserts_literally() {
    let out = run(json!({"operation": "replace", "pattern": r"(?P<first>\w+) (?P<last>\w+)", "text": "Ada Lovelace", "replacement": "${last}, $first"})).await.unwrap();
    assert_eq!(out["result"], "Lovelace, Ada");
    assert_eq!(out["replacements"], 1);
    let out = run(json!({"operation": "replace", "pattern": "a", "text": "aaa", "replacement": "$$1", "literal": true, "limit": 2})).await.unwrap();
    assert_eq!(out["result"], "$$1$$1a");
    assert_eq!(out["replacements"], 2);
    let out =
        run(json!({"operation": "replace", "pattern": "a", "text": "aaa", "replacement": "$$"}))
            .await
            .unwrap();
    assert_eq!(out["result"], "$$$");
    assert_eq!(
        path_of(json!({"operation": "replace", "pattern": "a", "text": "a"})).await,
        "/replacement"
    );
}

#[tokio::test]
async fn split_by_pattern() {
    let out = run(json!({"operation": "split", "pattern": r"\s*,\s*", "text": "a , b,c"}))
        .await
        .unwrap();
    assert_eq!(out["parts"], json!(["a", "b", "c"]));
    let out = run(json!({"operation": "split", "pattern": ",", "text": "a,b,c", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(out["parts"], json!(["a", "b,c"]));
}

#[tokio::test]
async fn limits() {
    let code = |r: Result<Value, ToolError>| r.unwrap_err().code();
    let pattern = "a".repeat(MAX_PATTERN_BYTES + 1);
    assert_eq!(
        code(run(json!({"operation": "match", "pattern": pattern, "text": ""})).await),
        "limit_exceeded"
    );
    let text = "a".repeat(MAX_TEXT_BYTES + 1);
    assert_eq!(
        code(run(json!({"operation": "match", "pattern": "a", "text": text})).await),
        "limit_exceeded"
    );
    // A pattern whose compiled program is too big.
    let huge = r"\w{1000}\w{1000}\w{1000}";
    assert_eq!(
        code(run(json!({"operation": "match", "pattern": huge, "text": "a"})).await),
        "limit_exceeded"
    );
    // Nesting beyond the limit is a pattern error.
    let deep = format!("{}a{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(
        path_of(json!({"operation": "match", "pattern": deep, "text": "a"})).await,
        "/pattern"
    );
    let splits = ",".repeat(MAX_LIMIT);
    assert_eq!(
        code(run(json!({"operation": "split", "pattern": ",", "text": splits})).await),
        "limit_exceeded"
    );
    assert_eq!(
        path_of(
            json!({"operation": "find_all", "pattern": "a", "text": "a", "limit": MAX_LIMIT + 1})
        )
        .await,
        "/limit"
    );
    // `$0$0…` at every position would grow without bound; it stops at the output limit. The
    // time budget is generous: these cases are about the caps, and an unoptimised build on a
    // loaded machine must still reach them before the clock does.
    let ctx = ToolContext::with_timeout(std::time::Duration::from_secs(120), 64 * 1024);
    let err = RegexTool
        .execute(json!({"operation": "replace", "pattern": "a", "text": "a".repeat(MAX_TEXT_BYTES), "replacement": "$0".repeat(1000)}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::OutputTooLarge { limit: 64 * 1024 });
    // An empty match at every position keeps the output small but the work large: capped.
    let template = "${0}".repeat(MAX_REPLACEMENT_BYTES / 4);
    let err = RegexTool
        .execute(json!({"operation": "replace", "pattern": "", "text": "a".repeat(MAX_TEXT_BYTES), "replacement": template}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "limit_exceeded");
    let long = "x".repeat(MAX_REPLACEMENT_BYTES + 1);
    assert_eq!(
        code(
            run(json!({"operation": "replace", "pattern": "a", "text": "a", "replacement": long}))
                .await
        ),
        "limit_exceeded"
    );
}

#[tokio::test]
async fn hostile_patterns_stay_linear() {
    // The classic catastrophic-backtracking pattern is linear here.
    let text = format!("{}!", "a".repeat(100_000));
    let out = run(json!({"operation": "match", "pattern": "(a+)+$", "text": text}))
        .await
        .unwrap();
    assert_eq!(out["matched"], false);
    // Look-around and backreferences are not supported: a clear pattern error.
    assert_eq!(
        path_of(json!({"operation": "match", "pattern": "(?=a)", "text": "a"})).await,
        "/pattern"
    );
    assert_eq!(
        path_of(json!({"operation": "match", "pattern": r"(a)\1", "text": "aa"})).await,
        "/pattern"
    );
}

#[tokio::test]
async fn cached_patterns_keep_their_flags() {
    for _ in 0..2 {
        let sensitive = run(json!({"operation": "match", "pattern": "ABC", "text": "abc"}))
            .await
            .unwrap();
        assert_eq!(sensitive["matched"], false);
        let insensitive = run(json!({"operation": "match", "pattern": "ABC", "text": "abc", "case_insensitive": true})).await.unwrap();
        assert_eq!(insensitive["matched"], true);
    }
    // More distinct patterns than the cache holds still compile and match.
    for i in 0..(CACHE_SIZE + 5) {
        let out = run(
            json!({"operation": "match", "pattern": format!("x{i}y"), "text": format!("ax{i}y")}),
        )
        .await
        .unwrap();
        assert_eq!(out["matched"], true);
    }
    assert!(CACHE.lock().unwrap().len() <= CACHE_SIZE);
}

#[tokio::test]
async fn bad_arguments_name_the_field() {
    assert_eq!(
        path_of(json!({"operation": "match", "pattern": "(", "text": "a"})).await,
        "/pattern"
    );
    assert_eq!(
        path_of(json!({"operation": "grep", "pattern": "a", "text": "a"})).await,
        "/operation"
    );
    assert_eq!(
        path_of(json!({"operation": "match", "pattern": "a"})).await,
        "/text"
    );
    assert_eq!(
        path_of(json!({"operation": "match", "pattern": "a", "text": "a", "replacement": "b"}))
            .await,
        "/replacement"
    );
    assert_eq!(
        path_of(
            json!({"operation": "match", "pattern": "a", "text": "a", "case_insensitive": "yes"})
        )
        .await,
        "/case_insensitive"
    );
}
