//! Ring 2: refusals and the small endpoints. Every error is OpenAI-shaped with a stable code.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;

fn assert_error(body: &Value, code: &str, param: Option<&str>) {
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert!(body["error"]["type"].is_string());
    match param {
        Some(p) => assert_eq!(body["error"]["param"], p, "{body}"),
        None => assert_eq!(body["error"]["param"], Value::Null, "{body}"),
    }
}

async fn raw_post(h: &Harness, body: &'static str) -> (u16, Value) {
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn malformed_json_is_a_400_naming_the_problem() {
    let h = Harness::with_preset("generic").await;
    let (status, body) = raw_post(&h, r#"{"model": "m", "input": "hi""#).await;
    assert_eq!(status, 400);
    assert_error(&body, "invalid_json", None);
    assert!(h.upstream.requests().is_empty(), "nothing went upstream");
}

#[tokio::test]
async fn a_wrong_type_names_the_json_path() {
    let h = Harness::with_preset("generic").await;
    let (status, body) =
        raw_post(&h, r#"{"model": "m", "input": "hi", "temperature": "hot"}"#).await;
    assert_eq!(status, 400);
    assert_error(&body, "invalid_json", Some("temperature"));

    let (status, body) = raw_post(
        &h,
        r#"{"model": "m", "input": [{"role": "user", "content": "a"}, {"type": "function_call", "call_id": 7, "name": "x", "arguments": "{}"}]}"#,
    )
    .await;
    assert_eq!(status, 400);
    assert_error(&body, "invalid_json", Some("input[1].call_id"));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call_id"),
        "{body}"
    );
}

#[tokio::test]
async fn semantic_problems_name_their_field() {
    let h = Harness::with_preset("generic").await;
    let cases = [
        (
            json!({"input": "hi"}),
            "missing_required_parameter",
            "model",
        ),
        (json!({"model": "m"}), "missing_required_parameter", "input"),
        (
            json!({"model": "m", "input": "x", "temperature": 3.5}),
            "invalid_value",
            "temperature",
        ),
        (
            json!({"model": "m", "input": [{"role": "wizard", "content": "x"}]}),
            "invalid_value",
            "input[0].role",
        ),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}),
            "unsupported_value",
            "input[0].content[0]",
        ),
        (
            json!({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": 12}}}}),
            "invalid_json_schema",
            "text.format.schema",
        ),
    ];
    for (request, code, param) in cases {
        let (status, body) = h.post_json(&request).await;
        assert_eq!(status, 400, "{request} → {body}");
        assert_error(&body, code, Some(param));
    }
    assert!(h.upstream.requests().is_empty());
}

#[tokio::test]
async fn an_unknown_model_is_a_404_listing_the_known_ones() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.ds]
base_url = "{url}"
preset = "deepseek"

[[routes]]
model = "fast"
provider = "ds"
upstream_model = "deepseek-v4-flash"

[[routes]]
model = "deepseek-*"
provider = "ds"
"#
        )
    })
    .await;
    let (status, body) = h.post_json(&json!({"model": "gpt-9", "input": "x"})).await;
    assert_eq!(status, 404);
    assert_error(&body, "model_not_found", Some("model"));
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("fast") && message.contains("deepseek-v4-pro"),
        "{message}"
    );

    // An alias route rewrites the model name sent upstream.
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "hi", "stop",
        )));
    let (status, body) = h.post_json(&json!({"model": "fast", "input": "x"})).await;
    assert_eq!(status, 200);
    assert_eq!(h.upstream.last_body()["model"], "deepseek-v4-flash");
    assert_eq!(body["model"], "fast");

    let models: Value = h
        .client
        .get(h.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    let fast = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "fast")
        .unwrap();
    assert_eq!(fast["context_window"], 1_000_000);
    assert_eq!(fast["object"], "model");
    assert!(
        models["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == "deepseek-chat")
    );
}

#[tokio::test]
async fn upstream_errors_are_mapped_faithfully() {
    // No retries: each scripted answer is the one the client sees.
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.up]
base_url = "{url}"
max_retries = 0

[[routes]]
model = "*"
provider = "up"
"#
        )
    })
    .await;
    let error =
        |msg: &str, code: &str| json!({"error": {"message": msg, "type": "x", "code": code}});
    let cases = [
        (
            401,
            error("bad key", "invalid_api_key"),
            401,
            "upstream_unauthorized",
        ),
        (
            403,
            error("no access", "forbidden"),
            403,
            "upstream_forbidden",
        ),
        (
            404,
            error("no such model", "model_not_found"),
            404,
            "upstream_not_found",
        ),
        (
            400,
            error("Incorrect role information", "1214"),
            400,
            "upstream_bad_request",
        ),
        (500, error("boom", "internal"), 500, "upstream_server_error"),
        (
            503,
            error("busy", "overloaded"),
            503,
            "upstream_unavailable",
        ),
        (
            429,
            error("quota gone", "insufficient_quota"),
            429,
            "insufficient_quota",
        ),
    ];
    for (upstream_status, body, status, code) in cases {
        h.upstream.push(Reply::error(upstream_status, body.clone()));
        let (got, response) = h.post_json(&json!({"model": "m", "input": "x"})).await;
        assert_eq!(got, status, "{response}");
        assert_error(&response, code, None);
        let upstream_message = body["error"]["message"].as_str().unwrap();
        assert!(
            response["error"]["message"]
                .as_str()
                .unwrap()
                .contains(upstream_message),
            "{response}"
        );
    }

    // 429 keeps Retry-After, streaming or not, because the answer has not started.
    h.upstream.push(Reply::Json {
        status: 429,
        body: error("slow down", "rate_limit_exceeded"),
        headers: vec![("retry-after".into(), "3".into())],
    });
    let response = h
        .post(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "3");
    let body: Value = response.json().await.unwrap();
    assert_error(&body, "rate_limit_exceeded", None);
}

#[tokio::test]
async fn an_error_inside_a_200_is_an_error() {
    let h = Harness::with_preset("minimax").await;
    h.upstream.push(Reply::json(json!({
        "id": "x", "choices": null,
        "base_resp": {"status_code": 1002, "status_msg": "rate limit exceeded"}
    })));
    let (status, body) = h.post_json(&json!({"model": "m", "input": "x"})).await;
    assert_eq!(status, 429, "{body}");
    assert_error(&body, "rate_limit_exceeded", None);
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502() {
    let h = Harness::with_toml(|_| {
        r#"
[providers.gone]
base_url = "http://127.0.0.1:9/v1"

[[routes]]
model = "*"
provider = "gone"
"#
        .to_owned()
    })
    .await;
    let (status, body) = h.post_json(&json!({"model": "m", "input": "x"})).await;
    assert_eq!(status, 502);
    assert_error(&body, "upstream_unreachable", None);
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
body_limit_bytes = 1024

[providers.up]
base_url = "{url}"

[[routes]]
model = "*"
provider = "up"
"#
        )
    })
    .await;
    let big = "x".repeat(4096);
    let (status, body) = h.post_json(&json!({"model": "m", "input": big})).await;
    assert_eq!(status, 413);
    assert_error(&body, "request_too_large", None);
    assert!(h.upstream.requests().is_empty());
}

#[tokio::test]
async fn gateway_keys_are_enforced_when_configured() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
api_keys = ["tb-key-1"]

[providers.up]
base_url = "{url}"

[[routes]]
model = "*"
provider = "up"
"#
        )
    })
    .await;
    let request = json!({"model": "m", "input": "x"});
    let response = h.post(&request).await;
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let body: Value = response.json().await.unwrap();
    assert_error(&body, "invalid_api_key", None);

    let response = h
        .client
        .post(h.url("/v1/responses"))
        .bearer_auth("tb-key-2")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);

    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "hi", "stop",
        )));
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .bearer_auth("tb-key-1")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The gateway key never reaches the upstream; the upstream key (none here) is its own.
    assert!(
        h.upstream.requests()[0]
            .headers
            .get("authorization")
            .is_none()
    );

    // Health checks need no key.
    let health = h.client.get(h.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok");
}

#[tokio::test]
async fn unknown_paths_are_openai_shaped_404s() {
    let h = Harness::with_preset("generic").await;
    let response = h.client.get(h.url("/v1/nothing")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_error(&body, "not_found", None);
    assert!(response_header_free(&body));
}

fn response_header_free(body: &Value) -> bool {
    body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v1/nothing")
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let h = Harness::with_preset("generic").await;
    let response = h.post(&json!({"input": "x"})).await;
    let id = response.headers()["x-request-id"].to_str().unwrap();
    assert!(id.starts_with("req_"), "{id}");
}

fn two_providers(primary_retries: u32) -> impl FnOnce(&str) -> String {
    move |url| {
        format!(
            r#"
[providers.primary]
base_url = "{url}"
max_retries = {primary_retries}

[providers.backup]
base_url = "{url}"
preset = "deepseek"

[[routes]]
model = "smart"
provider = "primary"
upstream_model = "primary-model"
fallbacks = [{{ provider = "backup", upstream_model = "backup-model" }}]
"#
        )
    }
}

#[tokio::test]
async fn server_errors_and_rate_limits_are_retried_before_the_answer_starts() {
    let h = Harness::with_toml(two_providers(2)).await;
    let busy = || Reply::error(503, json!({"error": {"message": "busy"}}));
    h.upstream.push(busy());
    h.upstream.push(Reply::Json {
        status: 429,
        body: json!({"error": {"message": "slow down", "code": "rate_limit_exceeded"}}),
        headers: vec![("retry-after".into(), "1".into())],
    });
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "third time",
            "stop",
        )));
    let started = std::time::Instant::now();
    let (status, body) = h.post_json(&json!({"model": "smart", "input": "x"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["content"][0]["text"], "third time");
    let models: Vec<Value> = h
        .upstream
        .requests()
        .iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(models, ["primary-model", "primary-model", "primary-model"]);
    // The 429's Retry-After was honoured (this is a lower bound, not a timing assertion).
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
}

#[tokio::test]
async fn a_failing_provider_falls_back_along_the_route_and_says_so() {
    let h = Harness::with_toml(two_providers(0)).await;
    h.upstream.push(Reply::error(
        500,
        json!({"error": {"message": "primary down"}}),
    ));
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "from backup",
            "stop",
        )));
    let response = h
        .post(&json!({"model": "smart", "input": "x", "instructions": "be brief"}))
        .await;
    assert_eq!(response.status(), 200);
    let header = response.headers()["x-toolbridge-diagnostics"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["output"][0]["content"][0]["text"], "from backup");
    assert_eq!(body["model"], "smart");
    assert!(header.contains("upstream_fallback:model"), "{header}");
    let requests = h.upstream.requests();
    assert_eq!(requests[0].body["model"], "primary-model");
    assert_eq!(requests[1].body["model"], "backup-model");
    // The backup got a request translated for its own profile (DeepSeek: no developer role).
    assert_eq!(requests[1].body["messages"][0]["role"], "system");

    // A client error is not a reason to fall back.
    h.upstream
        .push(Reply::error(400, json!({"error": {"message": "bad"}})));
    let (status, body) = h.post_json(&json!({"model": "smart", "input": "x"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(h.upstream.requests().len(), 3);
}

#[tokio::test]
async fn a_retry_after_beyond_the_budget_goes_back_to_the_client() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::Json {
        status: 429,
        body: json!({"error": {"message": "come back later", "code": "rate_limit_exceeded"}}),
        headers: vec![("retry-after".into(), "120".into())],
    });
    let response = h.post(&json!({"model": "m", "input": "x"})).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "120");
    assert_eq!(h.upstream.requests().len(), 1);
}
