//! Ring 2: no stored response is left in limbo (issue 15). A stored stream whose client goes
//! away after `response.created` is finished and stored whole (the default) or stopped and
//! stored `cancelled` (`on_client_disconnect = "cancel"`); one left while the gateway shuts down
//! still ends stored; `POST /v1/responses/{id}/cancel` stops a foreground stream at once; and a
//! response running here reads `in_progress` before anything of it is stored.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::time::Duration;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_store::ResponseStore;
use toolbridge_testkit::chat::chunk;
use toolbridge_testkit::{FakeUpstream, Reply};

fn config(url: &str, extra: &str) -> String {
    format!(
        r#"
{extra}

[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "generic"

[[routes]]
model = "*"
provider = "up"
"#
    )
}

/// A Chat stream of `pieces` text chunks, `pause` before each write.
fn slow_stream(pieces: usize, pause: Duration) -> Reply {
    let mut out = vec![format!(
        "data: {}\n\n",
        chunk(json!({"role": "assistant", "content": ""}), None)
    )];
    for i in 0..pieces {
        out.push(format!(
            "data: {}\n\n",
            chunk(json!({"content": format!("w{i} ")}), None)
        ));
    }
    out.push(format!("data: {}\n\n", chunk(json!({}), Some("stop"))));
    out.push("data: [DONE]\n\n".to_owned());
    Reply::Stream { pieces: out, pause }
}

/// The text of `pieces` chunks of [`slow_stream`].
fn slow_text(pieces: usize) -> String {
    (0..pieces).map(|i| format!("w{i} ")).collect()
}

/// Starts a stored stream at `base` and reads it until `response.created`: the open response
/// (drop it to leave) and the response id.
async fn start_stream(client: &reqwest::Client, base: &str) -> (reqwest::Response, String) {
    let mut response = client
        .post(format!("{base}/v1/responses"))
        .json(&json!({"model": "m", "input": "x", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("the stream starts")
            .unwrap()
            .expect("the stream is open");
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = text
            .lines()
            .find(|l| l.starts_with("data: ") && l.contains("response.created"))
        {
            let event: Value = serde_json::from_str(&line["data: ".len()..]).unwrap();
            let id = event["response"]["id"].as_str().unwrap().to_owned();
            return (response, id);
        }
    }
}

/// A client sending `key` as its bearer token.
fn with_key(key: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {key}").parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// Polls `GET /v1/responses/{id}` until it is no longer `in_progress` (at most 20 s).
async fn ended(client: &reqwest::Client, base: &str, id: &str) -> Value {
    for _ in 0..200 {
        let body: Value = client
            .get(format!("{base}/v1/responses/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if body["status"] != "in_progress" {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{id} is still in_progress: left in limbo");
}

#[tokio::test]
async fn a_stored_stream_its_client_left_is_read_to_the_end_and_stored_complete() {
    let h = Harness::with_toml(|url| config(url, "")).await;
    h.upstream.push(slow_stream(8, Duration::from_millis(50)));
    let base = h.url("");
    let (open, id) = start_stream(&h.client, &base).await;
    drop(open);
    let stored = ended(&h.client, &base, &id).await;
    assert_eq!(stored["status"], "completed", "{stored:#}");
    assert_eq!(stored["output"][0]["content"][0]["text"], slow_text(8));
    assert_eq!(h.upstream.abandoned_streams(), 0, "the upstream was read");
}

#[tokio::test]
async fn with_on_client_disconnect_cancel_a_left_stream_stops_the_upstream_and_is_cancelled() {
    let h = Harness::with_toml(|url| config(url, r#"on_client_disconnect = "cancel""#)).await;
    h.upstream.push(slow_stream(200, Duration::from_millis(50)));
    let base = h.url("");
    let (open, id) = start_stream(&h.client, &base).await;
    drop(open);
    let stored = ended(&h.client, &base, &id).await;
    assert_eq!(stored["status"], "cancelled", "{stored:#}");
    for _ in 0..100 {
        if h.upstream.abandoned_streams() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        h.upstream.abandoned_streams(),
        1,
        "the upstream was stopped"
    );
}

#[tokio::test]
async fn cancel_stops_a_foreground_stream_in_progress() {
    let h = Harness::with_toml(|url| config(url, "")).await;
    h.upstream.push(slow_stream(200, Duration::from_millis(50)));
    let base = h.url("");
    let (open, id) = start_stream(&h.client, &base).await;
    let answer = h
        .client
        .post(h.url(&format!("/v1/responses/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["status"], "cancelled", "{answer:#}");
    // The client still reading hears the end: the protocol's failure event, status cancelled.
    let rest = tokio::time::timeout(Duration::from_secs(10), open.text())
        .await
        .expect("the stream ends at once")
        .unwrap();
    let events = toolbridge_testkit::sse::parse(&rest);
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.failed", "{last:#}");
    assert_eq!(last["response"]["status"], "cancelled");
    let stored = ended(&h.client, &base, &id).await;
    assert_eq!(stored["status"], "cancelled", "{stored:#}");
}

/// A key of another tenant cancels nothing: its `/cancel` is the 404 of an unknown id, and the
/// stream goes on; the owner's cancel then works.
#[tokio::test]
async fn another_tenant_cannot_cancel_a_stream_in_progress() {
    let h = Harness::with_toml(|url| config(url, "api_keys = [\"key-a\", \"key-b\"]")).await;
    h.upstream.push(slow_stream(200, Duration::from_millis(50)));
    let (a, b) = (with_key("key-a"), with_key("key-b"));
    let base = h.url("");
    let (open, id) = start_stream(&a, &base).await;
    let refused = b
        .post(h.url(&format!("/v1/responses/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(
        refused["error"]["code"], "response_not_found",
        "{refused:#}"
    );
    let answer = a
        .post(h.url(&format!("/v1/responses/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        200,
        "the stream was still running for its owner"
    );
    let rest = tokio::time::timeout(Duration::from_secs(10), open.text())
        .await
        .expect("the stream ends at once")
        .unwrap();
    let events = toolbridge_testkit::sse::parse(&rest);
    let last = &events.last().unwrap().data;
    assert_eq!(last["response"]["status"], "cancelled");
}

#[tokio::test]
async fn a_stream_left_while_the_gateway_shuts_down_still_ends_stored() {
    let upstream = FakeUpstream::start().await;
    // Far longer than the grace period: the forced stop ends it.
    upstream.push(slow_stream(600, Duration::from_millis(100)));
    let store_url = toolbridge_testkit::temp_store_url();
    let text = config(&upstream.base_url(), "shutdown_grace_secs = 1");
    let file: FileConfig = toml::from_str(&text).unwrap();
    let env = |k: &str| match k {
        "TOOLBRIDGE_STORE_URL" => Some(store_url.clone()),
        "FAKE_UPSTREAM_KEY" => Some("sk-upstream-secret".to_owned()),
        "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
        _ => None,
    };
    let config = Config::from_file(file, &env).unwrap();
    let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(toolbridge_gateway::serve_on(listener, config, async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    let (open, id) = start_stream(&client, &base).await;
    drop(open);
    drop(client);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("the gateway stops")
        .unwrap()
        .unwrap();
    // The gateway is gone; what it stored is final.
    let store = toolbridge_store::SqlStore::open(&store_url).await.unwrap();
    let stored = store
        .get(&toolbridge_store::Tenant::open(), &id)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(stored.status, "failed", "{:#}", stored.response);
    assert_eq!(stored.response["error"]["code"], "server_error");
    assert_eq!(
        stored.response["error"]["toolbridge_code"],
        "server_shutting_down"
    );
}

/// Starts a stored whole answer whose upstream sends its body `pause` after its headers (in
/// two halves), through `client`; the answer in flight and its response id, heard on the
/// session side channel once the upstream accepted the request.
async fn start_whole(
    h: &Harness,
    client: &reqwest::Client,
    session: &str,
    pause: Duration,
) -> (
    tokio::task::JoinHandle<reqwest::Result<reqwest::Response>>,
    String,
) {
    let body = toolbridge_testkit::chat::completion("too late", "stop").to_string();
    let (head, tail) = body.split_at(body.len() / 2);
    h.upstream.push(Reply::Stream {
        pieces: vec![head.to_owned(), tail.to_owned()],
        pause,
    });
    let mut events = client
        .get(h.url(&format!("/v1/sessions/{session}/events")))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let answer = tokio::spawn(
        client
            .post(h.url("/v1/responses"))
            .header("session-id", session)
            .json(&json!({"model": "m", "input": "x"}))
            .send(),
    );
    let mut seen = String::new();
    let id = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), events.chunk())
            .await
            .expect("the session hears the start")
            .unwrap()
            .expect("the side channel is open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        let started = seen
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|e| e["type"] == "response.started");
        if let Some(started) = started {
            break started["response_id"].as_str().unwrap().to_owned();
        }
    };
    (answer, id)
}

#[tokio::test]
async fn cancel_stops_a_foreground_whole_answer_in_progress() {
    let h = Harness::with_toml(|url| config(url, "")).await;
    // The headers at once, the body five seconds later.
    let (answer, id) = start_whole(&h, &h.client, "sess-whole", Duration::from_secs(5)).await;
    let cancelled = h
        .client
        .post(h.url(&format!("/v1/responses/{id}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 200);
    let answer = tokio::time::timeout(Duration::from_secs(4), answer)
        .await
        .expect("the answer ends at once, not with the upstream's body")
        .unwrap()
        .unwrap();
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["status"], "cancelled", "{answer:#}");
    let stored = ended(&h.client, &h.url(""), &id).await;
    assert_eq!(stored["status"], "cancelled", "{stored:#}");
}

/// `GET /v1/responses/{id}` through `client`: the status and the body.
async fn read(client: &reqwest::Client, h: &Harness, id: &str) -> (u16, Value) {
    let answer = client
        .get(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

/// A whole answer is stored only at its end; while it runs here, `GET` answers its start
/// (`in_progress`), to its own tenant only, then the stored response.
#[tokio::test]
async fn a_response_running_here_reads_in_progress_before_it_is_stored() {
    let h = Harness::with_toml(|url| config(url, "api_keys = [\"key-a\", \"key-b\"]")).await;
    let (a, b) = (with_key("key-a"), with_key("key-b"));
    let (answer, id) = start_whole(&h, &a, "sess-read", Duration::from_millis(1500)).await;
    let (status, running) = read(&a, &h, &id).await;
    assert_eq!(status, 200);
    assert_eq!(running["id"], id.as_str(), "{running:#}");
    assert_eq!(running["status"], "in_progress", "{running:#}");
    assert_eq!(running["output"], json!([]), "{running:#}");
    let (status, _) = read(&b, &h, &id).await;
    assert_eq!(status, 404, "another tenant's response in flight");
    let answer = answer.await.unwrap().unwrap();
    assert_eq!(answer.status(), 200);
    let done = ended(&a, &h.url(""), &id).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(done["output"][0]["content"][0]["text"], "too late");
}

/// A stored stream can be read from its first event: `in_progress` until its end.
#[tokio::test]
async fn a_stored_stream_reads_in_progress_from_its_first_event() {
    let h = Harness::with_toml(|url| config(url, "")).await;
    h.upstream.push(slow_stream(20, Duration::from_millis(50)));
    let base = h.url("");
    let (open, id) = start_stream(&h.client, &base).await;
    let (_, running) = read(&h.client, &h, &id).await;
    assert_eq!(running["status"], "in_progress", "{running:#}");
    open.text().await.unwrap();
    let done = ended(&h.client, &base, &id).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(done["output"][0]["content"][0]["text"], slow_text(20));
}
