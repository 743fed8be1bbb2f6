//! Ring 2: the headers Codex 0.171 reads from an answer and sends with a request: `openai-model`
//! (the model that served; Codex shows "model rerouted" when it differs), `x-models-etag` (the
//! catalog's version: a changed value makes Codex fetch the catalog again),
//! `x-codex-turn-state` (issued by the gateway, replayed by Codex within a turn: a turn a
//! fallback answered stays on it) and `x-codex-routing-hint` (`model=…;tier=…`, a routing
//! input).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::json;
use toolbridge_testkit::chat::completion;
use toolbridge_testkit::{FakeUpstream, Reply};

fn server_error() -> Reply {
    Reply::error(
        500,
        json!({"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}),
    )
}

/// A route to `primary` with `backup` as its fallback, and a `fast` tier routed elsewhere.
async fn harness(backup: &FakeUpstream) -> Harness {
    let backup_url = backup.base_url();
    Harness::with_toml(move |url| {
        format!(
            r#"
[providers.primary]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = 0

[providers.backup]
base_url = "{backup_url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = 0

[[routes]]
model = "coder"
tier = "fast"
provider = "backup"
upstream_model = "backup-fast"

[[routes]]
model = "coder"
provider = "primary"
upstream_model = "primary-model"
fallbacks = [{{ provider = "backup", upstream_model = "backup-model" }}]
"#
        )
    })
    .await
}

async fn post(
    h: &Harness,
    headers: &[(&str, &str)],
) -> (reqwest::header::HeaderMap, serde_json::Value) {
    let mut request = h
        .client
        .post(h.url("/v1/responses"))
        .json(&json!({"model": "coder", "input": "hi"}));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    (headers, response.json().await.unwrap())
}

#[tokio::test]
async fn the_served_model_the_catalog_version_and_the_turn_state_are_sent() {
    let backup = FakeUpstream::start().await;
    let h = harness(&backup).await;

    // The route's own target: the requested name, and a turn state naming it.
    h.upstream.push(Reply::json(completion("Hello.", "stop")));
    let (headers, _) = post(&h, &[]).await;
    assert_eq!(headers["openai-model"], "coder");
    let own_state = headers["x-codex-turn-state"].to_str().unwrap().to_owned();
    assert!(own_state.starts_with("tb1."), "{own_state}");
    assert!(!own_state.contains("primary"), "no names: {own_state}");

    // The catalog's version, the same on the catalog and on every answer.
    let etag = headers["x-models-etag"].to_str().unwrap().to_owned();
    let catalog = h
        .client
        .get(h.url("/v1/models?client_version=0.171.0"))
        .send()
        .await
        .unwrap();
    assert_eq!(catalog.headers()["x-models-etag"].to_str().unwrap(), etag);

    // A fallback answered: Codex is told the model was rerouted, and the turn state names the
    // fallback.
    h.upstream.push(server_error());
    backup.push(Reply::json(completion("From the backup.", "stop")));
    let (headers, body) = post(&h, &[]).await;
    assert_eq!(body["status"], "completed", "{body:#}");
    assert_eq!(headers["openai-model"], "backup-model");
    let state = headers["x-codex-turn-state"].to_str().unwrap().to_owned();
    assert_ne!(state, own_state);

    // Replayed within the turn, the state sends the next request to the fallback first: the
    // primary is not asked again.
    let asked_primary = h.upstream.requests().len();
    backup.push(Reply::json(completion("Still the backup.", "stop")));
    let (headers, _) = post(&h, &[("x-codex-turn-state", &state)]).await;
    assert_eq!(h.upstream.requests().len(), asked_primary);
    assert_eq!(backup.requests().len(), 2);
    assert_eq!(headers["x-codex-turn-state"].to_str().unwrap(), state);

    // A state the gateway did not issue changes nothing.
    h.upstream.push(Reply::json(completion("Hello.", "stop")));
    let (headers, _) = post(&h, &[("x-codex-turn-state", "tb1.0000000000000000")]).await;
    assert_eq!(headers["openai-model"], "coder");
}

#[tokio::test]
async fn a_routing_hint_tier_picks_its_route() {
    let backup = FakeUpstream::start().await;
    let h = harness(&backup).await;
    backup.push(Reply::json(completion("Fast.", "stop")));
    let (_, body) = post(&h, &[("x-codex-routing-hint", "model=coder;tier=fast")]).await;
    assert_eq!(body["status"], "completed", "{body:#}");
    assert_eq!(backup.last_body()["model"], "backup-fast");
    assert!(h.upstream.requests().is_empty());
    // Another tier, or none: the plain route.
    h.upstream.push(Reply::json(completion("Plain.", "stop")));
    post(&h, &[("x-codex-routing-hint", "model=coder;tier=flex")]).await;
    assert_eq!(h.upstream.last_body()["model"], "primary-model");
}
