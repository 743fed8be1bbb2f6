//! Issue 41: a `previous_response_id` turn uses the chain the gateway holds in memory (confirmed
//! by one query of ids) instead of reading and parsing every stored response again. What goes
//! upstream must be the same bytes either way (the provider's prompt cache relies on it), and a
//! chain the store no longer has must not be served from memory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::Served;
use serde_json::{Value, json};
use toolbridge_testkit::chat::{completion, tool_calls_completion};
use toolbridge_testkit::postgres::fresh_database;
use toolbridge_testkit::{FakeUpstream, Reply};

/// A safety net against a hung test, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(30);

async fn gateway(upstream: &FakeUpstream, store_url: &str) -> Served {
    Served::routing_to(upstream, store_url).await
}

async fn post(addr: SocketAddr, body: &Value) -> (u16, Value) {
    let response = tokio::time::timeout(
        PATIENCE,
        reqwest::Client::new()
            .post(format!("http://{addr}/v1/responses"))
            .json(body)
            .send(),
    )
    .await
    .expect("the gateway answers in time")
    .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

const TOOLS: &str = r#"[{"type":"function","name":"read_file","description":"Reads a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]"#;

/// Three stored turns: a question answered with a call, the call's output answered with text.
async fn session(addr: SocketAddr, upstream: &FakeUpstream) -> Vec<String> {
    let tools: Value = serde_json::from_str(TOOLS).unwrap();
    upstream.push(Reply::json(tool_calls_completion(&[(
        "call_1",
        "read_file",
        json!({"path": "src/main.rs"}),
    )])));
    let (status, first) = post(
        addr,
        &json!({"model": "m", "instructions": "Be brief.", "tools": tools,
                "input": [{"role": "user", "content": "What does main do?"}]}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    upstream.push(Reply::json(completion("It prints a greeting.", "stop")));
    let (status, second) = post(
        addr,
        &json!({"model": "m", "instructions": "Be brief.", "tools": tools,
                "previous_response_id": first["id"],
                "input": [{"type": "function_call_output", "call_id": "call_1",
                           "output": "fn main() { println!(\"hello\"); }"}]}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    vec![
        first["id"].as_str().unwrap().to_owned(),
        second["id"].as_str().unwrap().to_owned(),
    ]
}

/// The next turn after `previous`, as the upstream got it.
async fn next_turn(addr: SocketAddr, upstream: &FakeUpstream, previous: &str) -> Value {
    let tools: Value = serde_json::from_str(TOOLS).unwrap();
    upstream.push(Reply::json(completion("Done.", "stop")));
    let (status, body) = post(
        addr,
        &json!({"model": "m", "instructions": "Be brief.", "tools": tools, "store": false,
                "previous_response_id": previous,
                "input": [{"role": "user", "content": "And the tests?"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    upstream.last_body()
}

async fn metrics(addr: SocketAddr) -> String {
    let response = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    response.text().await.unwrap()
}

/// `toolbridge_chain_reads_total` of `source`.
fn reads(metrics: &str, source: &str) -> f64 {
    let prefix = format!("toolbridge_chain_reads_total{{source=\"{source}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// One test, the parts in turn: the metrics it reads are the test process's, shared by every
/// gateway it starts.
#[tokio::test]
async fn chains_are_held_in_memory_and_used_only_when_the_store_confirms_them() {
    a_chain_continued_on_sqlite_is_held_and_let_go_with_its_responses().await;
    a_chain_held_in_memory_sends_the_bytes_a_chain_read_from_the_store_sends().await;
}

async fn a_chain_held_in_memory_sends_the_bytes_a_chain_read_from_the_store_sends() {
    let Some(db) = fresh_database("chain_memory").await else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    let holding = gateway(&upstream, &db.url).await;
    let holder = holding.addr;
    let before = |source| async move { reads(&metrics(holder).await, source) };
    let (memory, store) = (before("memory").await, before("store").await);
    let ids = session(holder, &upstream).await;
    // The holder wrote both turns: it continues from memory (twice: the same bytes each time).
    let from_memory = next_turn(holder, &upstream, &ids[1]).await;
    assert_eq!(next_turn(holder, &upstream, &ids[1]).await, from_memory);
    // Another process holds nothing: it reads the chain from the store.
    let reading = gateway(&upstream, &db.url).await;
    let reader = reading.addr;
    let from_store = next_turn(reader, &upstream, &ids[1]).await;
    // Counted where each came from (the two processes share this test's metrics): the holder's
    // turns from memory (its second turn continued the first from memory too), the reader's
    // from the store.
    let metrics = metrics(holder).await;
    assert_eq!(reads(&metrics, "memory") - memory, 3.0, "{metrics}");
    assert_eq!(reads(&metrics, "store") - store, 1.0, "{metrics}");
    assert_eq!(
        serde_json::to_string(&from_memory).unwrap(),
        serde_json::to_string(&from_store).unwrap(),
        "memory and store give the same upstream body"
    );
    let messages = from_memory["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 6, "{from_memory}");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(messages[3]["role"], "tool");

    // The other process deletes the first turn: the holder's memory is not used for a chain
    // the store no longer has whole.
    let deleted = reqwest::Client::new()
        .delete(format!("http://{reader}/v1/responses/{}", ids[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 200);
    upstream.push(Reply::json(completion("Done.", "stop")));
    let (status, refused) = post(
        holder,
        &json!({"model": "m", "previous_response_id": ids[1], "input": "again"}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["error"]["code"], "previous_response_not_found",
        "{refused}"
    );
    db.remove().await;
}

async fn a_chain_continued_on_sqlite_is_held_and_let_go_with_its_responses() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, &toolbridge_testkit::temp_store_url()).await;
    let addr = gateway.addr;
    let ids = session(addr, &upstream).await;
    let once = next_turn(addr, &upstream, &ids[1]).await;
    // A fork from the first turn: its call never answered gets the gateway's placeholder
    // result, then the new question (system, user, call, result, user).
    let fork = next_turn(addr, &upstream, &ids[0]).await;
    assert_eq!(fork["messages"].as_array().unwrap().len(), 5, "{fork}");
    assert_eq!(next_turn(addr, &upstream, &ids[1]).await, once);
    let deleted = reqwest::Client::new()
        .delete(format!("http://{addr}/v1/responses/{}", ids[1]))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 200);
    let (status, refused) = post(
        addr,
        &json!({"model": "m", "previous_response_id": ids[1], "input": "again"}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], "previous_response_not_found");
}
