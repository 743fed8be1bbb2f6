//! Ring 3: stored state across processes. A gateway killed with SIGKILL in the middle of a stored
//! stream leaves that response marked failed after the next start, never half-written; and two
//! gateway processes sharing one PostgreSQL database continue each other's conversations.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use toolbridge_testkit::chat::{chunk, completion};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");

async fn gateway(upstream: &FakeUpstream, store_url: &str) -> GatewayProcess {
    GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
            ("TOOLBRIDGE_STORE_URL", store_url.to_owned()),
        ],
    )
    .await
}

async fn post(gateway: &GatewayProcess, body: &Value) -> Value {
    reqwest::Client::new()
        .post(gateway.url("/v1/responses"))
        .json(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn get(gateway: &GatewayProcess, id: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(gateway.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// The status of response `id` in the SQLite store at `store_url`, read directly, once it is
/// there (polled for up to ten seconds); `None` if it never came.
async fn stored_status(store_url: &str, id: &str) -> Option<String> {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(store_url).await.unwrap();
    for _ in 0..200 {
        let row = sqlx::query("SELECT status FROM toolbridge_responses WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
        if let Some(row) = row {
            return Some(sqlx::Row::get::<String, _>(&row, 0));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

#[tokio::test]
async fn a_stream_killed_mid_way_is_failed_after_restart_and_finished_ones_are_intact() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let upstream = FakeUpstream::start().await;
        let store = toolbridge_testkit::temp_store_url();
        let first = gateway(&upstream, &store).await;

        upstream.push(Reply::json(completion("kept", "stop")));
        let done = post(&first, &json!({"model": "m", "input": "before"})).await;
        assert_eq!(done["status"], "completed");

        // A slow stored stream: read its first events, then kill the process outright.
        let mut pieces = vec![format!(
            "data: {}\n\n",
            chunk(json!({"content": "partial"}), None)
        )];
        pieces
            .extend((0..40).map(|_| format!("data: {}\n\n", chunk(json!({"content": "."}), None))));
        upstream.push(Reply::Stream {
            pieces,
            pause: Duration::from_millis(100),
        });
        let response = reqwest::Client::new()
            .post(first.url("/v1/responses"))
            .json(&json!({"model": "m", "input": "during", "stream": true}))
            .send()
            .await
            .unwrap();
        let mut body = response.bytes_stream();
        let mut seen = String::new();
        while !seen.contains("response.output_text.delta") {
            seen.push_str(&String::from_utf8_lossy(
                &body.next().await.unwrap().unwrap(),
            ));
        }
        let created = toolbridge_testkit::sse::parse(
            seen.split("\n\n")
                .find(|b| b.contains("response.created"))
                .map(|b| format!("{b}\n\n"))
                .unwrap()
                .as_str(),
        );
        let killed_id = created[0].data["response"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        // The `in_progress` record is written beside the stream, not before its first event:
        // the kill comes once it is in the store (it lands within milliseconds).
        assert_eq!(
            stored_status(&store, &killed_id).await.as_deref(),
            Some("in_progress")
        );
        let status = std::process::Command::new("kill")
            .args(["-KILL", &first.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        drop(body);
        first.kill().await;

        let second = gateway(&upstream, &store).await;
        let (status, killed) = get(&second, &killed_id).await;
        assert_eq!(status, 200, "{killed}");
        assert_eq!(
            killed["status"], "failed",
            "never left in_progress: {killed}"
        );
        let (status, kept) = get(&second, done["id"].as_str().unwrap()).await;
        assert_eq!(status, 200);
        assert_eq!(kept, done);
        second.kill().await;
    })
    .await
    .expect("the test finishes in time");
}

#[tokio::test]
async fn two_gateways_sharing_postgres_continue_each_others_conversations() {
    let Some(db) = toolbridge_testkit::postgres::fresh_database("scale").await else {
        return;
    };
    let url = db.url.clone();

    tokio::time::timeout(Duration::from_secs(60), async {
        let upstream = FakeUpstream::start().await;
        let a = gateway(&upstream, &url).await;
        let b = gateway(&upstream, &url).await;
        upstream.push(Reply::json(completion("Blue.", "stop")));
        let first = post(&a, &json!({"model": "m", "input": "Sky colour?"})).await;
        upstream.push(Reply::json(completion(
            "Because of Rayleigh scattering.",
            "stop",
        )));
        let second = post(
            &b,
            &json!({"model": "m", "previous_response_id": first["id"], "input": "Why?"}),
        )
        .await;
        assert_eq!(second["status"], "completed", "{second}");
        assert_eq!(
            upstream.last_body()["messages"],
            json!([
                {"role": "user", "content": "Sky colour?"},
                {"role": "assistant", "content": "Blue."},
                {"role": "user", "content": "Why?"},
            ])
        );
        let (status, from_a) = get(&a, second["id"].as_str().unwrap()).await;
        assert_eq!(status, 200);
        assert_eq!(from_a, second);
        a.kill().await;
        b.kill().await;
    })
    .await
    .expect("the test finishes in time");
    db.remove().await;
}
