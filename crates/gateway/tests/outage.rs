//! Store and bus outages, end to end (issue 15): a TCP proxy of the test's own sits between the
//! gateway and PostgreSQL (127.0.0.1:5432) or Redis (127.0.0.1:6379), and is paused (bytes stop
//! flowing, connections stay open) or stopped (connections closed, new ones closed at once).
//! Each PostgreSQL test gets a database of its own. Short store timeouts keep the outages short;
//! the waits here are safety nets, not timing assertions.
//!
//! Budgets under concurrency, and the charge of a failed and of a dropped stream, are here too:
//! they read the ledger through the store's `KeyStore` API.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolbridge_gateway::config::{Config, FileConfig};
use toolbridge_gateway::{ResponseInfo, SessionEvent};
use toolbridge_gateway::{budget_labels, hash_secret};
use toolbridge_store::{KeyStore, ResponseStore, SqlStore};
use toolbridge_testkit::chaos::{Mode, Proxy};
use toolbridge_testkit::chat::{chunk, completion, usage, usage_chunk};
use toolbridge_testkit::postgres::fresh_database;
use toolbridge_testkit::{FakeUpstream, Reply};

/// A safety net against a hung test (a stalled store used to hang requests for 30 s and more).
const PATIENCE: Duration = Duration::from_secs(15);

/// The store settings of every gateway here: failures show within a couple of seconds.
const FAST_STORE: &str = "store_acquire_timeout_ms = 1000\nstore_timeout_ms = 2000\nstore_circuit_failures = 3\nstore_circuit_cooldown_ms = 500\n";

/// A gateway on 127.0.0.1:0 with `extra` config, storing at `store_url`, routing every model
/// to `upstream` (Chat).
async fn gateway(upstream: &FakeUpstream, store_url: &str, extra: &str) -> SocketAddr {
    gateway_with(upstream, store_url, FAST_STORE, extra).await
}

/// [`gateway`] with the store settings `store` instead of [`FAST_STORE`].
async fn gateway_with(
    upstream: &FakeUpstream,
    store_url: &str,
    store: &str,
    extra: &str,
) -> SocketAddr {
    let text = format!(
        "{store}{extra}\n[providers.up]\nbase_url = \"{}\"\napi_key_env = \"FAKE_UPSTREAM_KEY\"\npreset = \"generic\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
        upstream.base_url()
    );
    let file: FileConfig = toml::from_str(&text).expect("test config parses");
    let store_url = store_url.to_owned();
    let env = move |k: &str| match k {
        "TOOLBRIDGE_STORE_URL" => Some(store_url.clone()),
        "FAKE_UPSTREAM_KEY" => Some("sk-upstream".to_owned()),
        "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
        _ => None,
    };
    let config = Config::from_file(file, &env).expect("test config is valid");
    let listener = TcpListener::bind(config.listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(toolbridge_gateway::serve_on(
        listener,
        config,
        std::future::pending::<()>(),
    ));
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    addr
}

async fn post(addr: SocketAddr, key: Option<&str>, body: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}/v1/responses"))
        .json(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    tokio::time::timeout(PATIENCE, request.send())
        .await
        .expect("the gateway answers in time")
        .unwrap()
}

async fn post_json(addr: SocketAddr, body: &Value) -> (u16, Value) {
    let response = post(addr, None, body).await;
    let status = response.status().as_u16();
    let text = tokio::time::timeout(PATIENCE, response.text())
        .await
        .expect("the body ends in time")
        .unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Issue 17: a stored stream's first events do not wait for its `in_progress` record. With the
/// store paused, and a store timeout of a minute, the stream starts and its text arrives; once the
/// store is back both writes land, and the terminal event says the response is stored.
#[tokio::test]
async fn a_stored_stream_starts_while_the_store_is_paused() {
    let Some(db) = fresh_database("outage_stream_start").await else {
        return;
    };
    let proxy = Proxy::start("127.0.0.1:5432").await;
    let url = format!("postgres://postgres@{}/{}", proxy.addr(), db.name);
    let upstream = FakeUpstream::start().await;
    let patient_store = "store_acquire_timeout_ms = 60000\nstore_timeout_ms = 60000\n";
    let addr = gateway_with(&upstream, &url, patient_store, "").await;
    // Warm: the key check and the pool's connection are in place before the pause.
    upstream.push(Reply::json(completion("Warm.", "stop")));
    let (status, warm) = post_json(addr, &json!({"model": "m", "input": "x"})).await;
    assert_eq!(status, 200, "{warm}");
    assert_eq!(warm["store"], true, "{warm}");

    proxy.set(Mode::Paused);
    upstream.push(Reply::sse(vec![
        chunk(json!({"content": "Blue."}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(11, 7),
    ]));
    let response = post(
        addr,
        None,
        &json!({"model": "m", "input": "x", "stream": true}),
    )
    .await;
    assert_eq!(response.status().as_u16(), 200);
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    tokio::time::timeout(PATIENCE, async {
        while !seen.contains("response.output_text.delta") {
            let piece = body.next().await.expect("the stream goes on").unwrap();
            seen.push_str(&String::from_utf8_lossy(&piece));
        }
    })
    .await
    .expect("the text arrives while the store is paused");
    assert!(
        !seen.contains("response.completed"),
        "the terminal event waits for the final write: {seen}"
    );

    proxy.set(Mode::Open);
    tokio::time::timeout(PATIENCE, async {
        while let Some(piece) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&piece.unwrap()));
        }
    })
    .await
    .expect("the stream ends once the store is back");
    let events = toolbridge_testkit::sse::parse(&seen);
    let terminal = &events.last().expect("events").data;
    assert_eq!(terminal["type"], "response.completed", "{seen}");
    assert_eq!(terminal["response"]["store"], true, "{terminal}");
    let id = terminal["response"]["id"].as_str().unwrap();
    assert_eq!(get_status(addr, id).await, 200);
}

/// A streamed request's terminal event (`response.completed` / `failed` / `incomplete`).
async fn post_stream_terminal(addr: SocketAddr, body: &Value) -> Value {
    let response = post(addr, None, body).await;
    assert_eq!(response.status().as_u16(), 200);
    let text = tokio::time::timeout(PATIENCE, response.text())
        .await
        .expect("the stream ends in time")
        .unwrap();
    let events = toolbridge_testkit::sse::parse(&text);
    events
        .iter()
        .rev()
        .find(|e| {
            matches!(
                e.data["type"].as_str(),
                Some("response.completed" | "response.failed" | "response.incomplete")
            )
        })
        .map(|e| e.data.clone())
        .unwrap_or_else(|| panic!("no terminal event in {text}"))
}

async fn get_status(addr: SocketAddr, id: &str) -> u16 {
    let response = tokio::time::timeout(
        PATIENCE,
        reqwest::Client::new()
            .get(format!("http://{addr}/v1/responses/{id}"))
            .send(),
    )
    .await
    .expect("the gateway answers in time")
    .unwrap();
    response.status().as_u16()
}

fn has_store_diagnostic(response: &Value) -> bool {
    response["toolbridge_diagnostics"]
        .as_array()
        .is_some_and(|d| d.iter().any(|d| d["code"] == "store_unavailable"))
}

/// Every `store: true` answer during the outage is either durable (fetchable) or says
/// `store: false`; `store: false` traffic passes; the store comes back.
async fn through_an_outage(mode: Mode, tag: &str) {
    let Some(db) = fresh_database(&format!("outage_{tag}")).await else {
        return;
    };
    let proxy = Proxy::start("127.0.0.1:5432").await;
    let url = format!("postgres://postgres@{}/{}", proxy.addr(), db.name);
    let upstream = FakeUpstream::start().await;
    upstream.set_fallback(Reply::json(completion("Blue.", "stop")));
    // `key_cache_secs = 0`: every request asks the store whether keys exist.
    let addr = gateway(&upstream, &url, "key_cache_secs = 0\n").await;
    let ask = |store: bool| json!({"model": "m", "input": "Sky colour?", "store": store});

    let (status, before) = post_json(addr, &ask(true)).await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(before["store"], true);
    assert_eq!(get_status(addr, before["id"].as_str().unwrap()).await, 200);

    proxy.set(mode);
    for _ in 0..4 {
        let (status, answer) = post_json(addr, &ask(true)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["status"], "completed", "{answer}");
        assert_eq!(
            answer["store"], false,
            "a response reported stored during the outage: {answer}"
        );
        assert!(has_store_diagnostic(&answer), "{answer}");
    }
    upstream.push(Reply::sse(vec![
        chunk(json!({"content": "Blue."}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(11, 7),
    ]));
    let streamed =
        post_stream_terminal(addr, &json!({"model": "m", "input": "x", "stream": true})).await;
    assert_eq!(streamed["type"], "response.completed", "{streamed}");
    assert_eq!(streamed["response"]["store"], false, "{streamed}");
    assert!(has_store_diagnostic(&streamed["response"]), "{streamed}");
    // A background start is answered `queued` only once the queued record exists.
    let (status, refused) = post_json(
        addr,
        &json!({"model": "m", "input": "x", "background": true}),
    )
    .await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["error"]["code"], "store_unavailable");
    for _ in 0..3 {
        let (status, answer) = post_json(addr, &ask(false)).await;
        assert_eq!(status, 200, "store: false passes: {answer}");
        assert_eq!(answer["status"], "completed");
    }
    // Liveness holds; readiness says the store is away.
    let client = reqwest::Client::new();
    let live = client
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    assert_eq!(live.headers()["x-toolbridge-store"], "unavailable");
    let ready = tokio::time::timeout(
        PATIENCE,
        client.get(format!("http://{addr}/healthz?ready")).send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(ready.status(), 503);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(
        ready,
        json!({"status": "not_ready", "store": "unavailable"})
    );

    proxy.set(Mode::Open);
    // The circuit lets a probe through after its cool-down; then answers are stored again.
    let mut stored = None;
    for _ in 0..50 {
        let (status, answer) = post_json(addr, &ask(true)).await;
        assert_eq!(status, 200, "{answer}");
        if answer["store"] == true {
            stored = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stored = stored.expect("the store came back");
    assert_eq!(get_status(addr, stored["id"].as_str().unwrap()).await, 200);
    let ready = client
        .get(format!("http://{addr}/healthz?ready"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
}

/// Issue 15: with PostgreSQL stalled, a `store: true` request came back `200 completed` and
/// was then 404, and every request hung on the keys-exist check.
#[tokio::test]
async fn a_paused_store_never_reports_a_missing_response_as_stored() {
    through_an_outage(Mode::Paused, "paused").await;
}

#[tokio::test]
async fn a_stopped_store_never_reports_a_missing_response_as_stored() {
    through_an_outage(Mode::Stopped, "stopped").await;
}

const SECRET: &str = "tb-outage-test-secret-0123456789abcdef0123456789abcdef";

fn budget_key(daily: u64) -> String {
    format!(
        "[[keys]]\nid = \"budgeted\"\nname = \"budgeted\"\nhash = \"{}\"\ndaily_tokens = {daily}\n",
        hash_secret(SECRET)
    )
}

/// The key's count today.
async fn used_today(url: &str) -> i64 {
    let store = SqlStore::open(url).await.unwrap();
    let labels = budget_labels(toolbridge_gateway::now());
    store.usage("budgeted", &labels).await.unwrap()[0]
}

/// Issue 15: twenty parallel requests against a budget worth five all passed (3.35×
/// overspend). Each request here uses 80 tokens and reserves a little more.
#[tokio::test]
async fn parallel_requests_do_not_overspend_a_budget() {
    let Some(db) = fresh_database("budget").await else {
        return;
    };
    let url = db.url;
    let upstream = FakeUpstream::start().await;
    let mut answer = completion("Blue.", "stop");
    answer["usage"] = usage(10, 70);
    upstream.set_fallback(Reply::Delayed {
        pause: Duration::from_millis(300),
        reply: Box::new(Reply::json(answer)),
    });
    let budget = 5 * 80;
    let addr = gateway(&upstream, &url, &budget_key(budget)).await;
    let body = json!({"model": "m", "input": "x", "max_output_tokens": 90, "store": false});
    let estimate = 90 + 2;
    let requests = (0..20).map(|_| {
        let body = body.clone();
        tokio::spawn(async move {
            let response = post(addr, Some(SECRET), &body).await;
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            (status, body)
        })
    });
    let mut admitted = 0;
    for request in requests.collect::<Vec<_>>() {
        let (status, body) = request.await.unwrap();
        match status {
            200 => admitted += 1,
            429 => assert_eq!(body["error"]["code"], "budget_exhausted"),
            other => panic!("{other}: {body}"),
        }
    }
    let used = used_today(&url).await;
    assert!(
        used <= budget as i64 + estimate,
        "{admitted} admitted, {used} tokens used of a budget of {budget}"
    );
    assert_eq!(used, 80 * admitted);
}

/// Issue 44: a key whose budget was under the flat 1,024-token output reservation served one
/// request at a time when requests set no `max_output_tokens`. Now a request reserves about
/// what its route's answers use, so five run side by side, and the ledger is still exact.
#[tokio::test]
async fn a_small_budget_serves_requests_side_by_side_reserving_what_answers_use() {
    let Some(db) = fresh_database("budget_observed").await else {
        return;
    };
    let url = db.url;
    let upstream = FakeUpstream::start().await;
    let mut answer = completion("Blue.", "stop");
    answer["usage"] = usage(10, 20);
    upstream.set_fallback(Reply::Delayed {
        pause: Duration::from_millis(500),
        reply: Box::new(Reply::json(answer)),
    });
    let budget = 900;
    let addr = gateway(&upstream, &url, &budget_key(budget)).await;
    let body = json!({"model": "m", "input": "x", "store": false});
    // The first answer on the route is what the next reservations go by.
    assert_eq!(post(addr, Some(SECRET), &body).await.status().as_u16(), 200);
    let requests: Vec<_> = (0..5)
        .map(|_| {
            let body = body.clone();
            tokio::spawn(async move {
                let response = post(addr, Some(SECRET), &body).await;
                let status = response.status().as_u16();
                (status, response.text().await.unwrap())
            })
        })
        .collect();
    for request in requests {
        let (status, body) = request.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(used_today(&url).await, 6 * 30);
}

/// Issue 44: a request's budget charge that met a store outage was lost: the ledger kept the
/// reservation made at admission for good. Now the charge waits for the store and lands once
/// it is back, so the ledger ends exact.
#[tokio::test]
async fn a_budget_charge_refused_during_a_store_outage_lands_once_it_is_back() {
    let Some(db) = fresh_database("budget_late_charge").await else {
        return;
    };
    let proxy = Proxy::start("127.0.0.1:5432").await;
    let url = format!("postgres://postgres@{}/{}", proxy.addr(), db.name);
    let direct = format!("postgres://postgres@127.0.0.1:5432/{}", db.name);
    let upstream = FakeUpstream::start().await;
    let mut answer = completion("Blue.", "stop");
    answer["usage"] = usage(10, 70);
    upstream.set_fallback(Reply::Delayed {
        pause: Duration::from_millis(800),
        reply: Box::new(Reply::json(answer)),
    });
    let addr = gateway(&upstream, &url, &budget_key(100_000)).await;
    let body = json!({"model": "m", "input": "x", "max_output_tokens": 90, "store": false});
    let request = tokio::spawn(async move { post(addr, Some(SECRET), &body).await.status() });
    // Admitted (the reservation is in the ledger), then the store stalls before the answer.
    tokio::time::timeout(PATIENCE, async {
        while used_today(&direct).await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the reservation is made");
    let reserved = used_today(&direct).await;
    assert!(
        reserved > 90,
        "the reservation covers 90 out and the input: {reserved}"
    );
    proxy.set(Mode::Paused);
    assert_eq!(request.await.unwrap().as_u16(), 200);
    // The charge met the stall and waits; the ledger still holds the reservation.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(used_today(&direct).await, reserved);

    proxy.set(Mode::Open);
    tokio::time::timeout(PATIENCE, async {
        while used_today(&direct).await != 80 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the charge lands once the store is back: the ledger holds the usage, 80");
}

/// A stream's chunks: `words` text deltas, then (optionally) the usage and the end.
fn stream_pieces(words: usize, end: bool) -> Vec<String> {
    let mut pieces: Vec<String> = (0..words)
        .map(|i| {
            format!(
                "data: {}\n\n",
                chunk(json!({"content": format!("word{i} ")}), None)
            )
        })
        .collect();
    if end {
        pieces.push(format!("data: {}\n\n", chunk(json!({}), Some("stop"))));
        pieces.push(format!("data: {}\n\n", usage_chunk(10, 70)));
        pieces.push("data: [DONE]\n\n".to_owned());
    }
    pieces
}

/// Issue 15: a stream that failed midway, or whose client went away, was charged nothing (the
/// upstream reports usage at the end). Now it is charged an estimate of what it used, and its
/// reservation (about 1000 tokens here) is settled.
#[tokio::test]
async fn failed_and_dropped_streams_are_charged_what_they_used() {
    let Some(db) = fresh_database("charge").await else {
        return;
    };
    let url = db.url;
    let upstream = FakeUpstream::start().await;
    let addr = gateway(&upstream, &url, &budget_key(1_000_000)).await;
    let body = json!({"model": "m", "input": "Tell me a story.", "stream": true, "store": false, "max_output_tokens": 1000});

    // Failed: the upstream connection breaks after some words.
    upstream.push(Reply::StreamThenReset {
        pieces: stream_pieces(20, false),
    });
    let response = post(addr, Some(SECRET), &body).await;
    let text = tokio::time::timeout(PATIENCE, response.text())
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(text.contains("response.failed"), "{text}");
    let failed = used_today(&url).await;
    assert!(
        failed > 0 && failed < 500,
        "a failed stream is charged what it used, not nothing nor its reservation: {failed}"
    );

    // Dropped: the client reads the start of a slow stream and goes away.
    upstream.push(Reply::Stream {
        pieces: stream_pieces(200, true),
        pause: Duration::from_millis(50),
    });
    let response = post(addr, Some(SECRET), &body).await;
    let mut bytes = response.bytes_stream();
    let mut seen = 0;
    while seen < 3 {
        let piece = tokio::time::timeout(PATIENCE, bytes.next()).await.unwrap();
        if let Some(Ok(piece)) = piece {
            seen += usize::from(String::from_utf8_lossy(&piece).contains("output_text.delta"));
        }
    }
    drop(bytes);
    let mut dropped = 0;
    for _ in 0..100 {
        dropped = used_today(&url).await - failed;
        if dropped > 0 && dropped < 500 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        dropped > 0 && dropped < 500,
        "a dropped stream is charged what it used, not nothing nor its reservation: {dropped}"
    );
}

/// Issue 15: a side-channel subscriber whose Redis connection dropped never received another
/// event. Now it subscribes again, is told it may have missed events, and goes on.
#[tokio::test]
async fn a_redis_subscriber_receives_events_again_after_the_connection_returns() {
    let proxy = Proxy::start("127.0.0.1:6379").await;
    let prefix = format!("toolbridge-outage:{}:", uuid::Uuid::new_v4());
    let sessions = |redis: String| {
        let text = format!(
            "[sessions]\nredis_url = \"redis://{redis}\"\nchannel_prefix = \"{prefix}\"\n\n[providers.up]\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        );
        let file: FileConfig = toml::from_str(&text).unwrap();
        let env = |k: &str| match k {
            "TOOLBRIDGE_STORE_URL" => Some("none".to_owned()),
            "TOOLBRIDGE_LISTEN" => Some("127.0.0.1:0".to_owned()),
            _ => None,
        };
        Config::from_file(file, &env).unwrap()
    };
    let (through_proxy, _a) = toolbridge_gateway::AppState::new(sessions(proxy.addr().to_string()))
        .await
        .unwrap();
    let (direct, _b) = toolbridge_gateway::AppState::new(sessions("127.0.0.1:6379".to_owned()))
        .await
        .unwrap();
    let mut events = Box::pin(
        through_proxy
            .sessions()
            .subscribe(&toolbridge_store::Tenant::open(), "s")
            .await
            .unwrap(),
    );
    let first = SessionEvent::ResponseStarted(ResponseInfo::new("resp_1", 1));
    direct
        .sessions()
        .publish(&toolbridge_store::Tenant::open(), "s", first);
    let got = tokio::time::timeout(PATIENCE, events.next()).await.unwrap();
    match got {
        Some(SessionEvent::ResponseStarted(info)) => assert_eq!(info.response_id, "resp_1"),
        other => panic!("{other:?}"),
    }

    proxy.set(Mode::Stopped);
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set(Mode::Open);
    let marker = tokio::time::timeout(PATIENCE, events.next()).await.unwrap();
    assert_eq!(
        marker,
        Some(SessionEvent::StreamReconnected {}),
        "the subscriber is told it may have missed events"
    );
    let again = SessionEvent::ResponseStarted(ResponseInfo::new("resp_2", 2));
    direct
        .sessions()
        .publish(&toolbridge_store::Tenant::open(), "s", again);
    let got = tokio::time::timeout(PATIENCE, events.next()).await.unwrap();
    match got {
        Some(SessionEvent::ResponseStarted(info)) => assert_eq!(info.response_id, "resp_2"),
        other => panic!("{other:?}"),
    }
}

/// The gateway's own view of a stored response, read straight from the database.
async fn stored_status(store: &SqlStore, id: &str) -> Option<String> {
    store
        .get(&toolbridge_store::Tenant::open(), id)
        .await
        .ok()
        .flatten()
        .map(|r| r.status)
}

/// Issue 44: a stored stream in flight when the store failed stayed `in_progress` for good
/// (its client told `store: false`, rightly), and chaining on it was accepted. Now its final
/// record is written once the store is back, and a chain naming a response that has not ended
/// is refused.
#[tokio::test]
async fn a_stream_whose_final_write_failed_ends_in_the_store_once_it_is_back() {
    let Some(db) = fresh_database("outage_late_final").await else {
        return;
    };
    let proxy = Proxy::start("127.0.0.1:5432").await;
    let url = format!("postgres://postgres@{}/{}", proxy.addr(), db.name);
    let direct = SqlStore::open(&format!("postgres://postgres@127.0.0.1:5432/{}", db.name))
        .await
        .unwrap();
    let upstream = FakeUpstream::start().await;
    let addr = gateway(&upstream, &url, "").await;
    upstream.push(Reply::json(completion("Warm.", "stop")));
    let (status, warm) = post_json(addr, &json!({"model": "m", "input": "x"})).await;
    assert_eq!(status, 200, "{warm}");

    let mut pieces: Vec<String> = ["Blue", " sky", " and", " green", " grass", "."]
        .iter()
        .map(|word| format!("data: {}\n\n", chunk(json!({"content": word}), None)))
        .collect();
    pieces.push(format!("data: {}\n\n", chunk(json!({}), Some("stop"))));
    pieces.push(format!("data: {}\n\n", usage_chunk(11, 7)));
    pieces.push("data: [DONE]\n\n".to_owned());
    upstream.push(Reply::Stream {
        pieces,
        pause: Duration::from_millis(400),
    });
    let response = post(
        addr,
        None,
        &json!({"model": "m", "input": "x", "stream": true}),
    )
    .await;
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    tokio::time::timeout(PATIENCE, async {
        while !seen.contains("response.output_text.delta") {
            let piece = body.next().await.expect("the stream goes on").unwrap();
            seen.push_str(&String::from_utf8_lossy(&piece));
        }
    })
    .await
    .expect("the text starts");
    let created = toolbridge_testkit::sse::parse(&seen);
    let id = created[0].data["response"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::timeout(PATIENCE, async {
        while stored_status(&direct, &id).await.as_deref() != Some("in_progress") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the start is stored");

    // The store stalls before the stream ends: the client is told the truth.
    proxy.set(Mode::Paused);
    tokio::time::timeout(PATIENCE, async {
        while let Some(piece) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&piece.unwrap()));
        }
    })
    .await
    .expect("the stream ends while the store is paused");
    let events = toolbridge_testkit::sse::parse(&seen);
    let terminal = &events.last().expect("events").data;
    assert_eq!(terminal["type"], "response.completed", "{seen}");
    assert_eq!(terminal["response"]["store"], false, "{terminal}");
    assert!(has_store_diagnostic(&terminal["response"]), "{terminal}");
    assert_eq!(
        stored_status(&direct, &id).await.as_deref(),
        Some("in_progress")
    );

    // A chain naming a response that has not ended is refused (one written unfinished here,
    // as another process's run would be).
    let running = toolbridge_store::StoredResponse {
        id: "resp_still_running".to_owned(),
        created_at: 1,
        status: "in_progress".to_owned(),
        model: "m".to_owned(),
        previous_response_id: None,
        expires_at: None,
        response: json!({"id": "resp_still_running", "object": "response", "status": "in_progress", "output": []}),
        input_items: vec![],
        output_items: vec![],
    };
    direct
        .put(&toolbridge_store::Tenant::open(), &running)
        .await
        .unwrap();

    proxy.set(Mode::Open);
    tokio::time::timeout(PATIENCE, async {
        while stored_status(&direct, &id).await.as_deref() == Some("in_progress") {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the final record lands once the store is back");
    assert_eq!(
        stored_status(&direct, &id).await.as_deref(),
        Some("completed")
    );
    let stored = direct
        .get(&toolbridge_store::Tenant::open(), &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.response["output"][0]["content"][0]["text"],
        "Blue sky and green grass."
    );

    let (status, refused) = post_json(
        addr,
        &json!({"model": "m", "input": "next", "previous_response_id": "resp_still_running"}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(
        refused["error"]["param"], "previous_response_id",
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("still in_progress"),
        "{refused}"
    );
}
