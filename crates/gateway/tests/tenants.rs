//! Tenants through the real routes: what one key stores, another key's tenant cannot read,
//! list, delete, cancel, chain onto, reference or extend — every attempt is the same 404 a
//! never-existing id gets, and nothing of it goes upstream; keys naming one tenant share; an
//! admin key reads across tenants and changes nothing of theirs; the session side channel does
//! not cross tenants, in process and over Redis. Run on SQLite and on PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::time::Duration;

use common::Served;
use common::keyed::{self, secret};
use futures::StreamExt;
use serde_json::{Value, json};
use toolbridge_testkit::chat::completion;
use toolbridge_testkit::{FakeUpstream, Reply};

/// A safety net against a hung test, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(30);

struct Gateway {
    served: Served,
    client: reqwest::Client,
}

impl Gateway {
    async fn start(upstream: &FakeUpstream, store_url: &str, sessions: &str) -> Self {
        let tables = format!(
            "[sessions]\n{sessions}\n[providers.up]\nbase_url = \"{}\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
            upstream.base_url()
        );
        Self {
            served: keyed::start("keepalive_secs = 1\n", &tables, store_url).await,
            client: reqwest::Client::new(),
        }
    }

    /// `method path` with `key`'s secret and an optional JSON body: status and JSON body.
    async fn call(&self, key: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .client
            .request(method.parse().unwrap(), self.served.url(path))
            .bearer_auth(secret(key));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Subscribes to `session` as `key`; returns once the 200 arrived.
    async fn watch(&self, key: &str, session: &str) -> Watch {
        let response = self
            .client
            .get(self.served.url(&format!("/v1/sessions/{session}/events")))
            .bearer_auth(secret(key))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        Watch {
            body: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }

    /// A stored response made by `key` on `session`; its id.
    async fn respond(&self, upstream: &FakeUpstream, key: &str, session: &str) -> String {
        upstream.push(Reply::json(completion("ok", "stop")));
        let response = self
            .client
            .post(self.served.url("/v1/responses"))
            .bearer_auth(secret(key))
            .header("session-id", session)
            .json(&json!({"model": "m", "input": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let body: Value = response.json().await.unwrap();
        body["id"].as_str().unwrap().to_owned()
    }
}

/// The `response.started` events of one session subscription, in order.
struct Watch {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl Watch {
    /// The response id of the next `response.started` event.
    async fn next_started(&mut self) -> String {
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                if !frame.starts_with("event: response.started") {
                    continue;
                }
                let data = frame
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .unwrap();
                let event: Value = serde_json::from_str(data).unwrap();
                return event["response_id"].as_str().unwrap().to_owned();
            }
            let chunk = tokio::time::timeout(PATIENCE, self.body.next())
                .await
                .expect("the event stream stalled")
                .expect("the event stream ended")
                .unwrap();
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

/// The error of an answer, with the id it names replaced, so that "another tenant's" and
/// "never existed" can be compared.
fn error_shape(status: u16, body: &Value, id: &str) -> (u16, String) {
    (status, body["error"].to_string().replace(id, "ID"))
}

async fn isolation(store_url: &str) {
    let upstream = FakeUpstream::start().await;
    let gw = Gateway::start(&upstream, store_url, "").await;

    // team-a stores a response and a conversation.
    upstream.push(Reply::json(completion("Blue.", "stop")));
    let (status, first) = gw
        .call(
            "a1",
            "POST",
            "/v1/responses",
            Some(json!({"model": "m", "input": "Sky colour?"})),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    let item = first["output"][0]["id"].as_str().unwrap().to_owned();
    let (status, conversation) = gw
        .call(
            "a1",
            "POST",
            "/v1/conversations",
            Some(json!({"items": [{"type": "message", "role": "user", "content": "remember 42"}]})),
        )
        .await;
    assert_eq!(status, 200, "{conversation}");
    let conv = conversation["id"].as_str().unwrap().to_owned();
    let upstream_calls = upstream.requests().len();

    // What another tenant gets is exactly what an id that never existed gets.
    let missing = "resp_0000000000000000000000000000";
    let missing_conv = "conv_0000000000000000000000000000";
    let probes: Vec<(&str, String, Option<Value>, &str)> = vec![
        ("GET", format!("/v1/responses/{id}"), None, &id),
        ("DELETE", format!("/v1/responses/{id}"), None, &id),
        ("GET", format!("/v1/responses/{id}/input_items"), None, &id),
        ("POST", format!("/v1/responses/{id}/cancel"), None, &id),
        (
            "POST",
            "/v1/responses".to_owned(),
            Some(json!({"model": "m", "previous_response_id": id, "input": "Why?"})),
            &id,
        ),
        (
            "POST",
            "/v1/responses".to_owned(),
            Some(json!({"model": "m", "input": [{"type": "item_reference", "id": item}]})),
            &item,
        ),
        (
            "POST",
            "/v1/responses".to_owned(),
            Some(json!({"model": "m", "conversation": conv, "input": "What number?"})),
            &conv,
        ),
        ("GET", format!("/v1/conversations/{conv}"), None, &conv),
        (
            "GET",
            format!("/v1/conversations/{conv}/items"),
            None,
            &conv,
        ),
        (
            "POST",
            format!("/v1/conversations/{conv}/items"),
            Some(json!({"items": [{"type": "message", "role": "user", "content": "x"}]})),
            &conv,
        ),
        ("DELETE", format!("/v1/conversations/{conv}"), None, &conv),
    ];
    for (method, path, body, named) in &probes {
        let fake = if named.starts_with("conv_") {
            missing_conv
        } else {
            missing
        };
        let never = path.replace(named, fake);
        let never_body = body
            .as_ref()
            .map(|b| serde_json::from_str(&b.to_string().replace(named, fake)).unwrap());
        let (never_status, never_answer) = gw.call("b", method, &never, never_body).await;
        // A route's object not found is a 404; a request field naming one is OpenAI's 400
        // `previous_response_not_found` / `item_reference_not_found` / 404 for conversations.
        assert!(
            matches!(never_status, 400 | 404)
                && never_answer["error"]["code"]
                    .as_str()
                    .unwrap()
                    .ends_with("not_found"),
            "{method} {never}: {never_answer}"
        );
        for key in ["b", "ops"] {
            if key == "ops" && matches!(*method, "GET") {
                continue; // the admin reads; checked below
            }
            if key == "ops"
                && path.starts_with("/v1/responses")
                && *method == "POST"
                && body.is_some()
            {
                continue; // the admin may chain onto what it may read; checked below
            }
            let (status, answer) = gw.call(key, method, path, body.clone()).await;
            assert_eq!(
                error_shape(status, &answer, named),
                error_shape(never_status, &never_answer, fake),
                "{key}: {method} {path}"
            );
        }
    }
    assert_eq!(
        upstream.requests().len(),
        upstream_calls,
        "nothing of team-a's went upstream"
    );

    // team-a's other key shares the history.
    let (status, again) = gw
        .call("a2", "GET", &format!("/v1/responses/{id}"), None)
        .await;
    assert_eq!((status, &again), (200, &first));
    upstream.push(Reply::json(completion("Rayleigh scattering.", "stop")));
    let (status, second) = gw
        .call(
            "a2",
            "POST",
            "/v1/responses",
            Some(json!({"model": "m", "previous_response_id": id, "input": "Why?"})),
        )
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        upstream.last_body()["messages"],
        json!([
            {"role": "user", "content": "Sky colour?"},
            {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Why?"},
        ])
    );
    let (status, items) = gw
        .call(
            "a2",
            "GET",
            &format!("/v1/conversations/{conv}/items"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert!(items["data"].to_string().contains("remember 42"), "{items}");

    // The admin reads across tenants (and chains onto it), but deletes and cancels nothing.
    let (status, read) = gw
        .call("ops", "GET", &format!("/v1/responses/{id}"), None)
        .await;
    assert_eq!((status, &read), (200, &first));
    let (status, _) = gw
        .call("ops", "GET", &format!("/v1/conversations/{conv}"), None)
        .await;
    assert_eq!(status, 200);
    let (status, listed) = gw
        .call(
            "ops",
            "GET",
            &format!("/v1/responses/{id}/input_items"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{listed}");
    // The deletes above did nothing: team-a still has everything.
    let (status, still) = gw
        .call("a1", "GET", &format!("/v1/responses/{id}"), None)
        .await;
    assert_eq!((status, &still), (200, &first));
    let (status, _) = gw
        .call("a1", "GET", &format!("/v1/conversations/{conv}"), None)
        .await;
    assert_eq!(status, 200);
    // The admin's own answers are its own: team-a cannot read them.
    upstream.push(Reply::json(completion("Support answer.", "stop")));
    let (status, support) = gw
        .call(
            "ops",
            "POST",
            "/v1/responses",
            Some(json!({"model": "m", "previous_response_id": id, "input": "Check"})),
        )
        .await;
    assert_eq!(status, 200, "{support}");
    let support_id = support["id"].as_str().unwrap();
    let (status, _) = gw
        .call("a1", "GET", &format!("/v1/responses/{support_id}"), None)
        .await;
    assert_eq!(status, 404);
    // The owner can still delete its own.
    let (status, deleted) = gw
        .call("a2", "DELETE", &format!("/v1/responses/{id}"), None)
        .await;
    assert_eq!((status, deleted["deleted"].clone()), (200, json!(true)));
}

#[tokio::test]
async fn another_tenant_finds_nothing_on_sqlite() {
    tokio::time::timeout(
        PATIENCE * 2,
        isolation(&toolbridge_testkit::temp_store_url()),
    )
    .await
    .expect("the test finished in time");
}

#[tokio::test]
async fn another_tenant_finds_nothing_on_postgres() {
    let Some(db) = toolbridge_testkit::postgres::fresh_database("tenants").await else {
        return;
    };
    tokio::time::timeout(PATIENCE * 2, isolation(&db.url))
        .await
        .expect("the test finished in time");
}

/// Each watcher's first `response.started` is its own tenant's, though team-a published first
/// on the same session id: team-b's and the admin's watchers never see team-a's events.
async fn side_channel(publisher: &Gateway, watcher: &Gateway, upstream: &FakeUpstream) {
    let mut a2 = watcher.watch("a2", "shared-session").await;
    let mut b = watcher.watch("b", "shared-session").await;
    let mut ops = watcher.watch("ops", "shared-session").await;
    let from_a = publisher.respond(upstream, "a1", "shared-session").await;
    assert_eq!(a2.next_started().await, from_a, "team-a's own key sees it");
    let from_b = publisher.respond(upstream, "b", "shared-session").await;
    let from_ops = publisher.respond(upstream, "ops", "shared-session").await;
    assert_eq!(
        b.next_started().await,
        from_b,
        "team-b saw nothing of team-a's"
    );
    assert_eq!(ops.next_started().await, from_ops, "nor did the admin");
}

#[tokio::test]
async fn the_side_channel_does_not_cross_tenants() {
    let upstream = FakeUpstream::start().await;
    let gw = Gateway::start(&upstream, "none", "").await;
    tokio::time::timeout(PATIENCE, side_channel(&gw, &gw, &upstream))
        .await
        .expect("the test finished in time");
}

#[tokio::test]
async fn the_side_channel_does_not_cross_tenants_over_redis() {
    let prefix = format!("toolbridge-test:{}:", uuid::Uuid::new_v4());
    let sessions = format!("redis_url = \"redis://127.0.0.1:6379\"\nchannel_prefix = \"{prefix}\"");
    let upstream = FakeUpstream::start().await;
    let one = Gateway::start(&upstream, "none", &sessions).await;
    let two = Gateway::start(&upstream, "none", &sessions).await;
    tokio::time::timeout(PATIENCE, side_channel(&one, &two, &upstream))
        .await
        .expect("the test finished in time");
}

/// `toolbridge keys create --tenant`: store keys naming one tenant share what they store, a key
/// without one is its own tenant; `--admin` reads across.
#[tokio::test]
async fn store_keys_made_by_the_cli_carry_their_tenant() {
    let store_url = toolbridge_testkit::temp_store_url();
    let create = |args: &'static [&'static str]| {
        let store_url = store_url.clone();
        async move {
            let out = tokio::time::timeout(
                PATIENCE,
                tokio::process::Command::new(env!("CARGO_BIN_EXE_toolbridge"))
                    .arg("keys")
                    .arg("create")
                    .args(args)
                    .env_clear()
                    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                    .env("TOOLBRIDGE_STORE_URL", &store_url)
                    .kill_on_drop(true)
                    .output(),
            )
            .await
            .expect("the binary exits in time")
            .expect("the binary runs");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let secret = stdout
                .lines()
                .find_map(|l| l.strip_prefix("secret: "))
                .unwrap()
                .to_owned();
            (secret, stdout)
        }
    };
    let (one, printed) = create(&["--name", "one", "--tenant", "team-x"]).await;
    assert!(printed.contains("\"tenant\":\"team-x\""), "{printed}");
    let (two, _) = create(&["--name", "two", "--tenant", "team-x"]).await;
    let (other, _) = create(&["--name", "other"]).await;
    let (support, printed) = create(&["--name", "support", "--admin"]).await;
    assert!(printed.contains("\"admin\":true"), "{printed}");

    let upstream = FakeUpstream::start().await;
    let text = format!(
        "[providers.up]\nbase_url = \"{}\"\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
        upstream.base_url()
    );
    let gateway = Served::start(&text, &store_url).await;
    let addr = gateway.addr;
    let client = reqwest::Client::new();
    upstream.push(Reply::json(completion("stored", "stop")));
    let made: Value = client
        .post(format!("http://{addr}/v1/responses"))
        .bearer_auth(&one)
        .json(&json!({"model": "m", "input": "hi"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let path = format!(
        "http://{addr}/v1/responses/{}",
        made["id"].as_str().unwrap()
    );
    for (secret, expected) in [(&two, 200), (&other, 404), (&support, 200)] {
        let status = client
            .get(&path)
            .bearer_auth(secret)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        assert_eq!(status, expected);
    }
}
