//! Gateway keys, budgets and rate limits, end to end: `toolbridge keys` through the real binary
//! against a temporary SQLite store; in-process gateways on 127.0.0.1:0 reading that store; the
//! real Redis at 127.0.0.1:6379 shared by two gateways.
//!
//! The model, tool and budget checks run through the real middleware and [`admission::admit`] /
//! [`admission::charge`], the functions the `/v1/responses` handler calls, mounted on a minimal
//! handler here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::process::Command;
use toolbridge_gateway::AppState;
use toolbridge_gateway::admission;
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_gateway::hash_secret;

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");

/// A config with one provider that is never called, `extra` on top.
fn config(extra: &str, store_url: &str, redis: Option<&str>) -> Config {
    let text = format!(
        "{extra}\n[providers.up]\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
    );
    let file: FileConfig = toml::from_str(&text).expect("test config parses");
    let store_url = store_url.to_owned();
    let redis = redis.map(str::to_owned);
    let env = move |k: &str| match k {
        "TOOLBRIDGE_STORE_URL" => Some(store_url.clone()),
        "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
        "TOOLBRIDGE_REDIS_URL" => redis.clone(),
        _ => None,
    };
    Config::from_file(file, &env).expect("test config is valid")
}

/// Serves the whole app for `config` on 127.0.0.1:0; stops when the sender drops.
async fn serve(config: Config) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(toolbridge_gateway::serve_on(listener, config, async move {
        let _ = stopped.await;
    }));
    (addr, stop)
}

async fn get_models(addr: SocketAddr, key: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(format!("http://{addr}/v1/models"));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.unwrap()
}

/// Runs `toolbridge keys ARGS` against `store_url`: (success, stdout, stderr).
async fn keys_cli(store_url: &str, args: &[&str]) -> (bool, String, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new(BIN)
            .arg("keys")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TOOLBRIDGE_STORE_URL", store_url)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the binary exits in time")
    .expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn field<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no `{name}:` line in {text}"))
}

#[tokio::test]
async fn keys_are_created_listed_and_revoked_by_the_binary_and_a_revoked_key_is_refused() {
    let store = toolbridge_testkit::temp_store_url();
    let (ok, created, err) = keys_cli(
        &store,
        &[
            "create",
            "--name",
            "ci bot",
            "--models",
            "cheap-*,glm-4.6",
            "--daily-tokens",
            "1000",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let id = field(&created, "id").to_owned();
    let secret = field(&created, "secret").to_owned();
    assert!(secret.starts_with("tb-") && secret.len() == 67, "{created}");
    let (ok, other, err) = keys_cli(&store, &["create", "--name", "other"]).await;
    assert!(ok, "{err}");
    let other_secret = field(&other, "secret").to_owned();

    let (ok, listed, err) = keys_cli(&store, &["list"]).await;
    assert!(ok, "{err}");
    assert!(
        listed.contains(&id) && listed.contains("ci bot"),
        "{listed}"
    );
    assert!(
        listed.contains("cheap-*") && listed.contains("1000"),
        "{listed}"
    );
    assert!(!listed.contains(&secret), "a secret is never listed");
    assert!(!listed.contains(&hash_secret(&secret)), "nor its hash");

    // A key cache of 0 s: a revocation shows on the very next request.
    let (addr, _stop) = serve(config("key_cache_secs = 0", &store, None)).await;
    assert_eq!(
        get_models(addr, None).await.status(),
        401,
        "store keys turn auth on"
    );
    assert_eq!(get_models(addr, Some("tb-unknown")).await.status(), 401);
    assert_eq!(get_models(addr, Some(&secret)).await.status(), 200);

    let (ok, revoked, err) = keys_cli(&store, &["revoke", &id]).await;
    assert!(ok, "{err}");
    assert!(revoked.contains("revoked"), "{revoked}");
    let refused = get_models(addr, Some(&secret)).await;
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key");
    assert_eq!(get_models(addr, Some(&other_secret)).await.status(), 200);

    let (ok, listed, _) = keys_cli(&store, &["list"]).await;
    assert!(ok);
    let line = listed.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        !line.contains("\t-\t"),
        "the revocation time is listed: {line}"
    );
    let (ok, _, err) = keys_cli(&store, &["revoke", &id]).await;
    assert!(!ok && err.contains("no active key"), "{err}");
}

/// The handler's part, as `/v1/responses` does it: parse, [`admission::admit`], then
/// [`admission::charge`] with the usage (60 tokens here).
async fn admit_and_charge(State(state): State<AppState>, body: Bytes) -> Response {
    let req = match toolbridge_gateway::parse_request(&body) {
        Ok(req) => req,
        Err(e) => return toolbridge_gateway::GatewayError::from(e).into_response(),
    };
    match admission::admit(&state, &req).await {
        Ok(key) => {
            admission::charge(&state, key.as_ref(), "up", 60).await;
            "admitted".into_response()
        }
        Err(e) => e.into_response(),
    }
}

async fn scoped_app(config: Config) -> SocketAddr {
    let (state, _force) = AppState::new(config).await.unwrap();
    let router = axum::Router::new()
        .route("/v1/responses", axum::routing::post(admit_and_charge))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            toolbridge_gateway::authenticate,
        ))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

async fn post(addr: SocketAddr, key: &str, body: Value) -> (u16, Option<String>, Value) {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/responses"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    (
        status,
        retry,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

const SCOPED_SECRET: &str = "tb-scoped-test-secret-0123456789abcdef0123456789abcdef";

fn scoped_keys(daily: u64) -> String {
    format!(
        "[[keys]]\nid = \"scoped\"\nname = \"scoped\"\nhash = \"{}\"\nmodels = [\"cheap-*\"]\ntools = [\"function:get_*\"]\ndaily_tokens = {daily}\n",
        hash_secret(SCOPED_SECRET)
    )
}

#[tokio::test]
async fn a_key_cannot_reach_a_model_or_tool_outside_its_scope() {
    let store = toolbridge_testkit::temp_store_url();
    let addr = scoped_app(config(&scoped_keys(1_000_000), &store, None)).await;
    let (status, _, body) = post(
        addr,
        SCOPED_SECRET,
        json!({"model": "cheap-1", "input": "x"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let (status, _, body) =
        post(addr, SCOPED_SECRET, json!({"model": "gpt-5", "input": "x"})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "model_not_allowed");
    assert_eq!(body["error"]["param"], "model");

    let tools = json!([
        {"type": "function", "name": "get_weather", "parameters": {}},
        {"type": "function", "name": "delete_everything", "parameters": {}}
    ]);
    let (status, _, body) = post(
        addr,
        SCOPED_SECRET,
        json!({"model": "cheap-1", "input": "x", "tools": tools}),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "tool_not_allowed");
    assert_eq!(body["error"]["param"], "tools[1]");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("delete_everything")
    );
}

#[tokio::test]
async fn a_budget_stops_a_key_with_a_clear_error() {
    let store = toolbridge_testkit::temp_store_url();
    let addr = scoped_app(config(&scoped_keys(100), &store, None)).await;
    let request = json!({"model": "cheap-1", "input": "x"});
    // 0 used, then 60: both admitted; 120 used: refused until the day ends.
    assert_eq!(post(addr, SCOPED_SECRET, request.clone()).await.0, 200);
    assert_eq!(post(addr, SCOPED_SECRET, request.clone()).await.0, 200);
    let (status, retry, body) = post(addr, SCOPED_SECRET, request).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "budget_exhausted");
    assert_eq!(body["error"]["type"], "insufficient_quota");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("daily token budget of 100"), "{message}");
    assert!(
        message.contains("120 used") && message.contains("resets at"),
        "{message}"
    );
    let retry: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=86_400).contains(&retry), "{retry}");
}

#[tokio::test]
async fn an_in_process_limit_answers_429_with_retry_after() {
    let store = toolbridge_testkit::temp_store_url();
    let (addr, _stop) = serve(config(
        "[limits]\nkey_requests_per_minute = 2\n",
        &store,
        None,
    ))
    .await;
    assert_eq!(get_models(addr, None).await.status(), 200);
    assert_eq!(get_models(addr, None).await.status(), 200);
    let refused = get_models(addr, None).await;
    assert_eq!(refused.status(), 429);
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(body["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn the_rate_limit_holds_across_two_gateways_sharing_redis() {
    // A prefix of its own, so that runs never share counters.
    let prefix = format!(
        "toolbridge-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let limits = format!(
        "[limits]\nredis_url = \"redis://127.0.0.1:6379\"\nredis_prefix = \"{prefix}\"\nkey_requests_per_minute = 5\n"
    );
    let (a, _stop_a) = serve(config(&limits, &toolbridge_testkit::temp_store_url(), None)).await;
    let (b, _stop_b) = serve(config(&limits, &toolbridge_testkit::temp_store_url(), None)).await;
    let mut allowed = [0, 0];
    let mut refused = 0;
    for i in 0..12 {
        let (which, addr) = if i % 2 == 0 { (0, a) } else { (1, b) };
        let response = get_models(addr, None).await;
        match response.status().as_u16() {
            200 => allowed[which] += 1,
            429 => {
                refused += 1;
                let retry: u64 = response.headers()["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((1..=60).contains(&retry), "{retry}");
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(allowed[0] + allowed[1], 5, "{allowed:?}");
    assert!(
        allowed[0] > 0 && allowed[1] > 0,
        "both gateways served: {allowed:?}"
    );
    assert_eq!(refused, 7);
}
