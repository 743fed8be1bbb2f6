//! Ring 2: `POST /v1/alpha/search`, Codex's standalone web search, answered by the gateway's
//! search backend: a fake SearXNG on 127.0.0.1 for `search_query`, a fake site for `open` and
//! `find` (both reached through the SSRF-safe client, allowed to these loopback ports only),
//! the refusal without a backend, and the key scopes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::{FakeUpstream, Reply};

fn port_of(url: &str) -> String {
    url.trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .to_owned()
}

/// Codex's request shape (codex-rs `SearchRequest`), with `commands`.
fn request(commands: Value) -> Value {
    json!({
        "id": "01a23214-1d91-7792-bcfe-ac8e7cd3d083",
        "model": "gpt-5.5",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "find it"}]}],
        "commands": commands,
        "settings": {"allowed_callers": ["direct"], "external_web_access": true},
        "max_output_tokens": 10000
    })
}

async fn gateway_with_search(extra: &str) -> (Harness, FakeUpstream, FakeUpstream) {
    let search = FakeUpstream::start().await;
    search.set_fallback(Reply::json(json!({"results": [
        {"title": "Axum WebSocket guide", "url": "https://docs.example/axum-ws",
         "content": "How to upgrade a <b>connection</b> with axum."},
        {"title": "tokio-tungstenite", "url": "https://docs.example/tungstenite",
         "content": "A WebSocket library."}
    ]})));
    let site = FakeUpstream::start().await;
    site.set_fallback(Reply::Raw {
        status: 200,
        content_type: "text/plain".to_owned(),
        body: "Intro line\nThe upgrade handler returns a response.\nClosing line\n".to_owned(),
    });
    let search_url = search.base_url();
    let ports = format!("{}, {}", port_of(&search_url), port_of(&site.base_url()));
    let extra = extra.to_owned();
    let h = Harness::with_toml(|url| {
        format!(
            r#"
{extra}

[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[routes]]
model = "*"
provider = "up"

[gateway_tools]
jq_isolation = false

[gateway_tools.web_search]
backend = "searxng"
url = "{search_url}"
allow_loopback_ports = [{ports}]
"#
        )
    })
    .await;
    (h, search, site)
}

#[tokio::test]
async fn a_search_query_is_answered_from_the_backend() {
    let (h, search, _site) = gateway_with_search("").await;
    let (status, body) = h
        .post_path_json(
            "/v1/alpha/search",
            &request(json!({"search_query": [{"q": "rust axum websocket"}]})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let output = body["output"].as_str().unwrap();
    assert!(
        output.starts_with("# search_query: rust axum websocket"),
        "{output}"
    );
    assert!(output.contains("1. Axum WebSocket guide"), "{output}");
    assert!(
        output.contains("ref_id: https://docs.example/axum-ws"),
        "{output}"
    );
    // Markup is stripped from snippets.
    assert!(
        output.contains("upgrade a connection with axum"),
        "{output}"
    );
    assert!(output.contains("2. tokio-tungstenite"));
    // The backend got the query, in SearXNG's JSON form.
    let asked = search.requests();
    assert_eq!(asked.len(), 1);
    let query = asked[0].query.clone().unwrap_or_default();
    assert!(query.contains("q=rust+axum+websocket"), "{query}");
    assert!(query.contains("format=json"), "{query}");
    // The model never went upstream: a search costs no model call.
    assert!(h.upstream.requests().is_empty());
}

#[tokio::test]
async fn open_and_find_read_the_page_through_the_guarded_client() {
    let (h, _search, site) = gateway_with_search("").await;
    let page = format!("{}/guide", site.base_url());
    let (status, body) = h
        .post_path_json(
            "/v1/alpha/search",
            &request(json!({
                "open": [{"ref_id": page}],
                "find": [{"ref_id": page, "pattern": "UPGRADE"}],
                "finance": [{"ticker": "AAPL", "type": "equity"}]
            })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let output = body["output"].as_str().unwrap();
    assert!(output.contains(&format!("# open: {page}")), "{output}");
    assert!(
        output.contains("L2: The upgrade handler returns a response."),
        "{output}"
    );
    assert!(output.contains("# find: `UPGRADE`"), "{output}");
    assert!(!output.contains("L1: Intro line\nL2") || output.contains("# open"));
    // Commands the gateway cannot serve are named, not failed.
    assert!(output.contains("does not serve `finance`"), "{output}");
    // Not a URL: said in the output.
    let (status, body) = h
        .post_path_json(
            "/v1/alpha/search",
            &request(json!({"open": [{"ref_id": "turn0search1"}]})),
        )
        .await;
    assert_eq!(status, 200);
    assert!(body["output"].as_str().unwrap().contains("is not a URL"));
}

#[tokio::test]
async fn a_page_outside_the_allowed_ports_is_refused_by_the_guard() {
    let (h, _search, _site) = gateway_with_search("").await;
    let elsewhere = FakeUpstream::start().await;
    let (status, body) = h
        .post_path_json(
            "/v1/alpha/search",
            &request(json!({"open": [{"ref_id": format!("{}/x", elsewhere.base_url())}]})),
        )
        .await;
    assert_eq!(status, 200);
    let output = body["output"].as_str().unwrap();
    assert!(output.contains("failed"), "{output}");
    assert!(elsewhere.requests().is_empty(), "the guard let it through");
}

#[tokio::test]
async fn nothing_to_run_and_too_many_operations_are_refused() {
    let (h, _search, _site) = gateway_with_search("").await;
    let (status, body) = h
        .post_path_json(
            "/v1/alpha/search",
            &request(json!({"image_query": [{"q": "cats"}]})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "commands.image_query");
    let many: Vec<Value> = (0..9).map(|i| json!({"q": format!("q{i}")})).collect();
    let (status, body) = h
        .post_path_json("/v1/alpha/search", &request(json!({"search_query": many})))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "commands");
}

#[tokio::test]
async fn without_a_backend_the_search_is_refused_in_openais_shape() {
    let h = Harness::with_preset("generic").await;
    let (status, body) = h
        .post_path_json(
            "/v1/alpha/search",
            &request(json!({"search_query": [{"q": "anything"}]})),
        )
        .await;
    assert_eq!(status, 501, "{body}");
    assert_eq!(body["error"]["code"], "web_search_unavailable");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[gateway_tools.web_search]")
    );
}

#[tokio::test]
async fn key_scopes_apply_to_the_search() {
    let searcher = "tb-search-test-secret-0123456789abcdef0123456789abcdef".to_owned();
    let limited = "tb-limited-test-secret-0123456789abcdef0123456789abcdef".to_owned();
    let searcher_hash = toolbridge_gateway::hash_secret(&searcher);
    let limited_hash = toolbridge_gateway::hash_secret(&limited);
    let keys = format!(
        r#"
[[keys]]
name = "searcher"
hash = "{searcher_hash}"
models = ["gpt-*"]

[[keys]]
name = "no-search"
hash = "{limited_hash}"
tools = ["function"]
"#
    );
    let (h, _search, _site) = gateway_with_search(&keys).await;
    let post = |key: String, body: Value| {
        let h = &h;
        async move {
            let response = h
                .client
                .post(h.url("/v1/alpha/search"))
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let query = json!({"search_query": [{"q": "axum"}]});
    let (status, _) = post(searcher.clone(), request(query.clone())).await;
    assert_eq!(status, 200);
    let mut other_model = request(query.clone());
    other_model["model"] = json!("claude-x");
    let (status, body) = post(searcher, other_model).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "model_not_allowed");
    let (status, body) = post(limited, request(query)).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "tool_not_allowed");
    // No key at all.
    let response = h
        .client
        .post(h.url("/v1/alpha/search"))
        .json(&request(json!({"search_query": [{"q": "axum"}]})))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}
