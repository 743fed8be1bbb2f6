//! A chaos test across processes: two `toolbridge serve` processes behind a round-robin TCP
//! balancer of the test's own, sharing PostgreSQL and Redis through TCP proxies of the test's own
//! (`toolbridge_testkit::chaos`). While SDK-like HTTP clients (stored requests, streamed and
//! whole, `previous_response_id` chains), WebSocket clients, a key with a token budget, bursts
//! against the per-minute request limit and, with `TOOLBRIDGE_TEST_CODEX`, real `codex exec`
//! runs (one over HTTP, one over WebSocket) go through the balancer, one gateway is killed with
//! SIGKILL and replaced, PostgreSQL is paused for 30 s and Redis is restarted (its proxy stopped,
//! every connection closed, then reopened).
//!
//! Afterwards, every violation is collected and reported together:
//! - every request completed, or got a clean retryable error (429 or 5xx with an OpenAI-shaped
//!   error and a code); a broken connection only for one in flight on the killed process;
//! - everything a client was told is stored (`store: true` in its final response) is fetchable,
//!   and final;
//! - no stored response is left `in_progress` or `queued`: a dead process's lease is 90 s from
//!   its last heartbeat and the sweep runs every 30 s, so this polls until [`SWEEP_PATIENCE`]
//!   after the kill;
//! - the request limit held across both gateways while Redis was up, and again once it was back;
//! - the budget ledger equals the usage the clients were told of, plus whole reservations of
//!   requests that died with the killed process (nothing could settle those); a budgeted whole
//!   request and a budgeted stream are admitted just before the pause and end during it, so
//!   their settlement meets the outage every run;
//! - the Codex tasks finished.
//!
//! The waits are safety nets, not timing assertions: every one is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use toolbridge_gateway::hash_secret;
use toolbridge_testkit::chaos::{Balancer, Mode, Proxy};
use toolbridge_testkit::chat::{chunk, completion, text_stream, usage_chunk};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::postgres::{Database, fresh_database};
use toolbridge_testkit::tempdir::TempDir;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
/// The whole test's bound.
const TEST_LIMIT: Duration = Duration::from_secs(240);
/// One request's bound: a request that hangs is a violation, not a hung test.
const REQUEST_LIMIT: Duration = Duration::from_secs(45);
/// How long PostgreSQL stays paused.
const PG_PAUSE: Duration = Duration::from_secs(30);
/// How long after the kill the killed process's unfinished responses may stay `in_progress`:
/// its lease (90 s from its last heartbeat, which is at most the kill) and one sweep period
/// (30 s), with a margin.
const SWEEP_PATIENCE: Duration = Duration::from_secs(135);
/// `key_requests_per_minute`: every key's limit, shared through Redis.
const RPM: usize = 150;
/// Requests in one burst against the limit.
const BURST: usize = 200;
const HTTP_CLIENTS: usize = 4;
const WS_CLIENTS: usize = 2;
/// Keys that read back what was stored (each has its own per-minute limit).
const AUDITORS: usize = 8;
/// The budgeted key's requests all have this input and output cap, so each reserves the same.
const BUDGET_INPUT: &str = "How much is left?";
const BUDGET_MAX_OUTPUT: u64 = 64;
const CODEX_MODEL: &str = "codex-chaos";
const CODEX_ANSWER: &str = "Checked the workspace through the chaos.";
/// The gateways' shared reasoning key (every gateway serving the same clients needs the same).
const REASONING_KEY: &str = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";

fn secret(name: &str) -> String {
    format!("tb-chaos-{name}")
}

// ---------------------------------------------------------------------------------------------
// The deployment: config, upstream script, processes.

/// The gateways' config: fast store timeouts, Redis for limits and session events, the keys.
/// The store's circuit keeps its defaults (5 failures, 10 s): while it is open a final write is
/// refused without being sent, so it is lost unless the gateway keeps it for later.
fn config(upstream: &FakeUpstream, redis: std::net::SocketAddr, prefix: &str) -> String {
    let mut text = format!(
        "store_acquire_timeout_ms = 1000\nstore_timeout_ms = 2000\n\
         reasoning_keys = [\"{REASONING_KEY}\"]\n\n\
         [limits]\nredis_url = \"redis://{redis}\"\nredis_prefix = \"{prefix}\"\n\
         key_requests_per_minute = {RPM}\n\n\
         [sessions]\nredis_url = \"redis://{redis}\"\nchannel_prefix = \"{prefix}:session:\"\n\n"
    );
    let mut key = |name: &str, secret: &str, extra: &str| {
        text.push_str(&format!(
            "[[keys]]\nname = \"{name}\"\nhash = \"{}\"\n{extra}\n",
            hash_secret(secret)
        ));
    };
    let shared = "tenant = \"chaos\"\n";
    for i in 0..HTTP_CLIENTS {
        key(&format!("http-{i}"), &secret(&format!("http-{i}")), shared);
    }
    for j in 0..WS_CLIENTS {
        key(&format!("ws-{j}"), &secret(&format!("ws-{j}")), shared);
    }
    for k in 0..AUDITORS {
        key(
            &format!("audit-{k}"),
            &secret(&format!("audit-{k}")),
            shared,
        );
    }
    key("doomed", &secret("doomed"), shared);
    key(
        "budgeted",
        &secret("budgeted"),
        "tenant = \"chaos\"\ndaily_tokens = 100000000\n",
    );
    // `CodexExec` presents `gateway-key`.
    key("codex", "gateway-key", shared);
    key("limited-1", &secret("limited-1"), "");
    key("limited-2", &secret("limited-2"), "");
    text.push_str(&format!(
        "[providers.up]\nbase_url = \"{}\"\napi_key_env = \"FAKE_UPSTREAM_KEY\"\n\n\
         [[routes]]\nmodel = \"*\"\nprovider = \"up\"\n",
        upstream.base_url()
    ));
    text
}

/// The upstream's answer to every request, by model and by whether it streams. Every answer
/// reports 11 + 7 tokens, except Codex's.
fn upstream_reply(request: &Recorded) -> Option<Reply> {
    let body = &request.body;
    let model = body["model"].as_str().unwrap_or_default();
    if model == CODEX_MODEL {
        return Some(codex_turn(body));
    }
    let streamed = body["stream"] == true;
    let stream = |pieces: &[&str], pause: u64| {
        let mut sse: Vec<String> = text_stream(pieces, "stop")
            .iter()
            .map(|c| format!("data: {c}\n\n"))
            .collect();
        sse.push("data: [DONE]\n\n".to_owned());
        Reply::Stream {
            pieces: sse,
            pause: Duration::from_millis(pause),
        }
    };
    let delayed = |ms: u64| Reply::Delayed {
        pause: Duration::from_millis(ms),
        reply: Box::new(Reply::json(completion("Blue.", "stop"))),
    };
    Some(match (model, streamed) {
        // The long streams: some 7 s, in flight across the kill or into the pause.
        ("chaos-long", true) => stream(&["word "; 16], 400),
        (_, true) => stream(&["The ", "sky ", "is ", "blue."], 150),
        // The budget probe, and a budgeted request whose answer comes during the pause.
        ("probe-slow", false) => delayed(2000),
        (_, false) => delayed(500),
    })
}

/// Codex's task: three shell commands, then the answer; each turn streams for some 5 s, so a
/// run is in flight across the kill and into the pause.
fn codex_turn(body: &Value) -> Reply {
    let results = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if results < 3 {
        for word in ["Checking ", "the ", "workspace, ", "step ", "by ", "step."] {
            chunks.push(chunk(json!({"content": word}), None));
        }
        chunks.push(chunk(
            json!({"tool_calls": [{"index": 0, "id": format!("call_chaos_{results}"),
                "type": "function", "function": {"name": "exec_command",
                "arguments": json!({"cmd": format!("echo chaos-step-{results}")}).to_string()}}]}),
            None,
        ));
        chunks.push(chunk(json!({}), Some("tool_calls")));
    } else {
        for word in CODEX_ANSWER.split_inclusive(' ') {
            chunks.push(chunk(json!({"content": word}), None));
        }
        chunks.push(chunk(json!({}), Some("stop")));
    }
    chunks.push(usage_chunk(100, 20));
    let mut pieces: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    pieces.push("data: [DONE]\n\n".to_owned());
    Reply::Stream {
        pieces,
        pause: Duration::from_millis(500),
    }
}

/// Everything the test runs against.
struct Deployment {
    _upstream: FakeUpstream,
    postgres: Proxy,
    redis: Proxy,
    balancer: Balancer,
    envs: Vec<(&'static str, String)>,
    _dir: TempDir,
}

impl Deployment {
    /// The upstream, the proxies, the config; no gateway yet.
    async fn new(db: &Database) -> Self {
        let upstream = FakeUpstream::start().await;
        upstream.set_gate(Arc::new(upstream_reply));
        // `postgres://user@host:port`: the proxy goes to `host:port`, the gateways to the proxy.
        let (user, server) = db.server.rsplit_once('@').expect("user@host:port");
        let postgres = Proxy::start(server).await;
        let redis = Proxy::start("127.0.0.1:6379").await;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let prefix = format!("toolbridge-chaos-{}-{nanos}", std::process::id());
        let dir = TempDir::new("chaos");
        let path = dir.write("toolbridge.toml", &config(&upstream, redis.addr(), &prefix));
        let envs = vec![
            ("TOOLBRIDGE_CONFIG", path.display().to_string()),
            (
                "TOOLBRIDGE_STORE_URL",
                format!("{user}@{}/{}", postgres.addr(), db.name),
            ),
            ("FAKE_UPSTREAM_KEY", "sk-upstream".to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ];
        Self {
            _upstream: upstream,
            postgres,
            redis,
            // Pointed at the gateways once they run.
            balancer: Balancer::start(vec![
                "127.0.0.1:9".parse().unwrap(),
                "127.0.0.1:9".parse().unwrap(),
            ])
            .await,
            envs,
            _dir: dir,
        }
    }

    async fn gateway(&self) -> GatewayProcess {
        GatewayProcess::start(Path::new(BIN), &self.envs).await
    }

    fn base(&self) -> String {
        format!("http://{}", self.balancer.addr())
    }
}

// ---------------------------------------------------------------------------------------------
// What the clients saw.

/// How one client request ended.
#[derive(Debug, Clone)]
enum Outcome {
    /// Completed; whether its final response said `store: true`.
    Completed { stored: bool },
    /// A clean retryable refusal: 429 or 5xx with an OpenAI-shaped error and a code.
    Retryable { status: u16, code: String },
    /// The connection broke: allowed only in flight on the killed process.
    Dropped(String),
    /// Anything else.
    Bad(String),
}

#[derive(Debug, Clone)]
struct Record {
    client: String,
    kind: String,
    /// When its connection was opened (for a WebSocket turn: the socket's).
    opened: Instant,
    ended: Instant,
    outcome: Outcome,
}

/// Every client's records, what they were told is stored, and the budgeted key's usage.
#[derive(Default)]
struct Journal {
    records: Mutex<Vec<Record>>,
    /// Response ids told stored, with the client that was told.
    stored: Mutex<Vec<(String, String)>>,
    /// The usage (`total_tokens`) of the budgeted key's completed responses.
    budget_used: Mutex<i64>,
}

impl Journal {
    fn record(&self, client: &str, kind: String, opened: Instant, outcome: Outcome) {
        self.records.lock().unwrap().push(Record {
            client: client.to_owned(),
            kind,
            opened,
            ended: Instant::now(),
            outcome,
        });
    }

    /// Records a create's outcome; the id of a response told stored.
    fn created(
        &self,
        client: &str,
        kind: String,
        opened: Instant,
        outcome: Outcome,
        response: Option<&Value>,
    ) -> Option<String> {
        let id = match (&outcome, response) {
            (Outcome::Completed { stored: true }, Some(r)) => r["id"].as_str().map(str::to_owned),
            _ => None,
        };
        if let Some(id) = &id {
            self.stored
                .lock()
                .unwrap()
                .push((id.clone(), client.to_owned()));
        }
        self.record(client, kind, opened, outcome);
        id
    }
}

/// A client like the OpenAI SDK's, but opening a connection per request, so that the balancer
/// spreads its requests over both gateways.
fn sdk_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// 429/5xx with `{"error": {"message", "code"}}` is retryable; anything else is not.
fn refusal(status: u16, text: &str) -> Outcome {
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let error = &body["error"];
    match (error["code"].as_str(), error["message"].as_str()) {
        (Some(code), Some(_)) if status == 429 || status >= 500 => Outcome::Retryable {
            status,
            code: code.to_owned(),
        },
        _ => Outcome::Bad(format!("{status}: {text}")),
    }
}

/// The last terminal event (`response.completed`/`failed`/`incomplete`, `error`) of an SSE body,
/// which may have been cut anywhere.
fn terminal(text: &str) -> Option<Value> {
    text.split("\n\n")
        .filter(|block| !block.starts_with(':'))
        .filter_map(|block| {
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect();
            serde_json::from_str::<Value>(&data).ok()
        })
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some("response.completed" | "response.failed" | "response.incomplete" | "error")
            )
        })
        .last()
}

/// `POST /v1/responses`: the outcome and, when completed, the final response object.
async fn create(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    body: &Value,
) -> (Outcome, Option<Value>) {
    let exchange = async {
        let response = match client
            .post(format!("{base}/v1/responses"))
            .bearer_auth(key)
            .json(body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return (Outcome::Dropped(format!("send: {e:?}")), None),
        };
        let status = response.status().as_u16();
        if status != 200 {
            let text = response.text().await.unwrap_or_default();
            return (refusal(status, &text), None);
        }
        let mut bytes = Vec::new();
        let mut body_stream = response.bytes_stream();
        while let Some(piece) = body_stream.next().await {
            match piece {
                Ok(piece) => bytes.extend_from_slice(&piece),
                Err(e) => return (Outcome::Dropped(format!("body cut: {e:?}")), None),
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        let final_response = if body["stream"] == true {
            match terminal(&text) {
                Some(e) if e["type"] == "response.completed" => e["response"].clone(),
                Some(e) => return (Outcome::Bad(format!("stream ended with {e}")), None),
                None => {
                    return (
                        Outcome::Bad(format!("stream ended without a terminal event: {text}")),
                        None,
                    );
                }
            }
        } else {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        };
        if final_response["status"] != "completed" {
            return (Outcome::Bad(format!("200 but not completed: {text}")), None);
        }
        let stored = final_response["store"] == true;
        (Outcome::Completed { stored }, Some(final_response))
    };
    tokio::time::timeout(REQUEST_LIMIT, exchange)
        .await
        .unwrap_or_else(|_| {
            (
                Outcome::Bad(format!("no answer within {REQUEST_LIMIT:?}")),
                None,
            )
        })
}

// ---------------------------------------------------------------------------------------------
// The clients.

/// Stored requests, streamed and whole in turn, chaining up to four links through
/// `previous_response_id` onto what it was told is stored.
async fn http_client(i: usize, base: String, journal: Arc<Journal>, stop: watch::Receiver<bool>) {
    let client = sdk_client();
    let name = format!("http-{i}");
    let key = secret(&name);
    let mut previous: Option<String> = None;
    let mut links = 0;
    let mut n = 0;
    while !*stop.borrow() {
        n += 1;
        let streamed = n % 2 == 0;
        let mut body = json!({"model": "chaos", "input": format!("client {i} turn {n}"),
            "store": true, "stream": streamed});
        let mut kind = if streamed { "http stream" } else { "http" }.to_owned();
        if let Some(previous) = &previous {
            body["previous_response_id"] = json!(previous);
            kind.push_str(" chained");
        }
        let opened = Instant::now();
        let (outcome, response) = create(&client, &base, &key, &body).await;
        let completed = matches!(outcome, Outcome::Completed { .. });
        match journal.created(&name, kind, opened, outcome, response.as_ref()) {
            Some(id) if links < 4 => {
                links += 1;
                previous = Some(id);
            }
            _ if completed => {
                links = 0;
                previous = None;
            }
            // Refused or cut: the chain is tried again.
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The budgeted key's requests: stored, streamed and whole in turn, all reserving the same.
async fn budget_client(base: String, journal: Arc<Journal>, stop: watch::Receiver<bool>) {
    let client = sdk_client();
    let mut n = 0;
    while !*stop.borrow() {
        n += 1;
        let streamed = n % 2 == 0;
        let kind = if streamed { "budget stream" } else { "budget" };
        budget_request(&client, &base, &journal, "chaos", streamed, kind).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One request of the budgeted key; the usage it was told of goes to the journal.
async fn budget_request(
    client: &reqwest::Client,
    base: &str,
    journal: &Journal,
    model: &str,
    streamed: bool,
    kind: &str,
) {
    let body = json!({"model": model, "input": BUDGET_INPUT, "store": true,
        "stream": streamed, "max_output_tokens": BUDGET_MAX_OUTPUT});
    let opened = Instant::now();
    let (outcome, response) = create(client, base, &secret("budgeted"), &body).await;
    if let Some(response) = &response {
        *journal.budget_used.lock().unwrap() += response["usage"]["total_tokens"]
            .as_i64()
            .expect("a completed response reports its usage");
    }
    journal.created(
        "budgeted",
        kind.to_owned(),
        opened,
        outcome,
        response.as_ref(),
    );
}

/// Two budgeted requests admitted before the pause that end during it: a whole one and a
/// stream, so that their settlement meets the pause every run.
fn budget_into_pause(base: &str, journal: &Arc<Journal>) -> Vec<JoinHandle<()>> {
    [("probe-slow", false), ("chaos-long", true)]
        .into_iter()
        .map(|(model, streamed)| {
            let (base, journal) = (base.to_owned(), journal.clone());
            tokio::spawn(async move {
                let kind = "budget (into the pause)";
                budget_request(&sdk_client(), &base, &journal, model, streamed, kind).await;
            })
        })
        .collect()
}

/// `count` stored streams of some 7 s each, started at once.
fn long_streams(
    base: &str,
    journal: &Arc<Journal>,
    count: usize,
    label: &str,
) -> Vec<JoinHandle<()>> {
    (0..count)
        .map(|n| {
            let (base, journal) = (base.to_owned(), journal.clone());
            let kind = format!("long stream ({label})");
            tokio::spawn(async move {
                let body = json!({"model": "chaos-long", "input": format!("long {n}"),
                    "store": true, "stream": true});
                let opened = Instant::now();
                let (outcome, response) =
                    create(&sdk_client(), &base, &secret("doomed"), &body).await;
                journal.created("doomed", kind, opened, outcome, response.as_ref());
            })
        })
        .collect()
}

/// `BURST` requests of `key` (a fresh connection each, so both gateways take them); the count of
/// 200s.
async fn burst(base: String, key: &'static str, journal: Arc<Journal>) -> usize {
    let client = sdk_client();
    let mut admitted = 0;
    for _ in 0..BURST {
        let opened = Instant::now();
        let answer = tokio::time::timeout(
            REQUEST_LIMIT,
            client
                .get(format!("{base}/v1/models"))
                .bearer_auth(secret(key))
                .send(),
        )
        .await;
        let outcome = match answer {
            Err(_) => Outcome::Bad("no answer in time".to_owned()),
            Ok(Err(e)) => Outcome::Dropped(format!("send: {e:?}")),
            Ok(Ok(r)) if r.status() == 200 => {
                admitted += 1;
                let _ = r.bytes().await;
                Outcome::Completed { stored: false }
            }
            Ok(Ok(r)) => {
                let status = r.status().as_u16();
                refusal(status, &r.text().await.unwrap_or_default())
            }
        };
        journal.record(key, "rate-limit burst".to_owned(), opened, outcome);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admitted
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws_connect(base: &str, key: &str) -> Result<Socket, Outcome> {
    let url = format!("{}/v1/responses", base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    match tokio::time::timeout(REQUEST_LIMIT, tokio_tungstenite::connect_async(request)).await {
        Err(_) => Err(Outcome::Bad("no upgrade in time".to_owned())),
        Ok(Ok((socket, _))) => Ok(socket),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
            let body = response.body().clone().unwrap_or_default();
            Err(refusal(
                response.status().as_u16(),
                &String::from_utf8_lossy(&body),
            ))
        }
        Ok(Err(e)) => Err(Outcome::Dropped(format!("connect: {e}"))),
    }
}

/// One `response.create` on `socket`: its outcome, its final response, and whether the socket
/// is still usable.
async fn ws_turn(socket: &mut Socket, frame: &Value) -> (Outcome, Option<Value>, bool) {
    if let Err(e) = socket.send(Message::text(frame.to_string())).await {
        return (Outcome::Dropped(format!("send: {e}")), None, false);
    }
    let deadline = tokio::time::Instant::now() + REQUEST_LIMIT;
    loop {
        let message = match tokio::time::timeout_at(deadline, socket.next()).await {
            Err(_) => {
                return (
                    Outcome::Bad("no terminal event in time".to_owned()),
                    None,
                    false,
                );
            }
            Ok(None) => return (Outcome::Dropped("socket ended".to_owned()), None, false),
            Ok(Some(Err(e))) => return (Outcome::Dropped(format!("read: {e}")), None, false),
            Ok(Some(Ok(message))) => message,
        };
        let text = match message {
            Message::Text(text) => text,
            Message::Close(close) => {
                return (
                    Outcome::Bad(format!("closed by the gateway: {close:?}")),
                    None,
                    false,
                );
            }
            _ => continue,
        };
        let event: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match event["type"].as_str() {
            Some("response.completed") => {
                let response = event["response"].clone();
                let stored = response["store"] == true;
                return (Outcome::Completed { stored }, Some(response), true);
            }
            Some("error") => {
                let status = event["status"].as_u64().unwrap_or(0) as u16;
                let body = json!({"error": event["error"]}).to_string();
                return (refusal(status, &body), None, true);
            }
            Some("response.failed" | "response.incomplete") => {
                return (Outcome::Bad(format!("ended with {text}")), None, true);
            }
            _ => {}
        }
    }
}

/// Stored responses over one socket at a time, chaining onto what it was told is stored; a
/// socket that breaks is replaced.
async fn ws_client(j: usize, base: String, journal: Arc<Journal>, stop: watch::Receiver<bool>) {
    let name = format!("ws-{j}");
    let key = secret(&name);
    let mut socket: Option<(Socket, Instant)> = None;
    let mut previous: Option<String> = None;
    let mut links = 0;
    let mut n = 0;
    while !*stop.borrow() {
        if socket.is_none() {
            let opened = Instant::now();
            match ws_connect(&base, &key).await {
                Ok(s) => socket = Some((s, opened)),
                Err(outcome) => {
                    journal.record(&name, "ws connect".to_owned(), opened, outcome);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
            }
        }
        let Some((ws, opened)) = socket.as_mut() else {
            continue;
        };
        n += 1;
        let mut frame = json!({"type": "response.create", "model": "chaos", "store": true,
            "stream": true, "input": [{"type": "message", "role": "user",
            "content": format!("socket client {j} turn {n}")}]});
        let mut kind = "ws".to_owned();
        if let Some(previous) = &previous {
            frame["previous_response_id"] = json!(previous);
            kind.push_str(" chained");
        }
        let started = Instant::now();
        let (outcome, response, usable) = ws_turn(ws, &frame).await;
        // A broken socket was in flight since it opened.
        let since = if matches!(outcome, Outcome::Dropped(_)) {
            *opened
        } else {
            started
        };
        let completed = matches!(outcome, Outcome::Completed { .. });
        match journal.created(&name, kind, since, outcome, response.as_ref()) {
            Some(id) if links < 4 => {
                links += 1;
                previous = Some(id);
            }
            _ if completed => {
                links = 0;
                previous = None;
            }
            _ => {}
        }
        if !usable {
            socket = None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if let Some((mut ws, _)) = socket {
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
    }
}

/// When a Codex task finished and the errors it got past, or what went wrong.
type CodexRun = Result<(Instant, Vec<String>), String>;

/// One `codex exec` task through the balancer: when it finished and the errors it got past,
/// or what went wrong.
async fn codex_task(codex: PathBuf, base: String, websockets: bool) -> CodexRun {
    let scratch = TempDir::new(if websockets {
        "chaos-codex-ws"
    } else {
        "chaos-codex-http"
    });
    let mut exec = CodexExec::new(&codex, &scratch.0, format!("{base}/v1"));
    exec.model = CODEX_MODEL.to_owned();
    // A turn cut by the kill is retried by Codex, as it would be in the field.
    exec.provider = format!("stream_max_retries = 5\nsupports_websockets = {websockets}");
    let run = tokio::time::timeout(
        Duration::from_secs(110),
        exec.run("Check the workspace with three shell commands, then say so."),
    )
    .await
    .map_err(|_| "codex did not finish within 110 s".to_owned())?;
    if run.last_message.trim() == CODEX_ANSWER {
        // What Codex went through: its error events (reconnections, retries).
        let troubles = run
            .stdout
            .lines()
            .filter(|l| l.contains("\"type\":\"error\"") && !l.contains("Model metadata"))
            .map(|l| l.chars().take(200).collect())
            .collect();
        Ok((Instant::now(), troubles))
    } else {
        Err(format!(
            "last message {:?}\nstdout (tail):\n{}\nstderr (tail):\n{}",
            run.last_message,
            tail(&run.stdout, 20),
            tail(&run.stderr, 20)
        ))
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ---------------------------------------------------------------------------------------------
// The audits.

/// The budgeted key's count today, read from the ledger table directly.
async fn ledger(pool: &sqlx::PgPool) -> i64 {
    let today = toolbridge_gateway::budget_labels(toolbridge_gateway::now())[0].clone();
    sqlx::query_scalar::<_, i64>(
        "SELECT tokens FROM toolbridge_usage WHERE key_id = 'budgeted' AND period = $1",
    )
    .bind(today)
    .fetch_optional(pool)
    .await
    .unwrap()
    .unwrap_or(0)
}

/// Stored responses not final: `(id, status, owner)`.
async fn unfinished(pool: &sqlx::PgPool) -> Vec<(String, String, Option<String>)> {
    sqlx::query_as(
        "SELECT id, status, owner FROM toolbridge_responses
         WHERE status IN ('in_progress', 'queued') ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// `GET /v1/responses/{id}` with auditor `k`'s key: whether it is there and final.
async fn fetch_stored(
    client: &reqwest::Client,
    base: &str,
    id: &str,
    k: usize,
) -> Result<(), String> {
    let key = secret(&format!("audit-{}", k % AUDITORS));
    for _ in 0..3 {
        let response = tokio::time::timeout(
            REQUEST_LIMIT,
            client
                .get(format!("{base}/v1/responses/{id}"))
                .bearer_auth(&key)
                .send(),
        )
        .await
        .map_err(|_| "no answer in time".to_owned())?
        .map_err(|e| format!("send: {e}"))?;
        let status = response.status().as_u16();
        let retry = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match status {
            200 if body["id"] == id && body["status"] == "completed" => return Ok(()),
            200 => return Err(format!("fetched but not completed: {}", body["status"])),
            429 => tokio::time::sleep(Duration::from_secs(retry.unwrap_or(5).min(20))).await,
            _ => return Err(format!("{status}: {body}")),
        }
    }
    Err("rate limited three times".to_owned())
}

/// What happened to the killed process.
struct Kill {
    started: Instant,
    ended: Instant,
    /// Connections through its slot at the kill, and opened while it died: the most requests
    /// that could break with it.
    exposed: usize,
}

/// Judges every record: the violations, and a summary by kind.
fn judge(records: &[Record], kill: &Kill) -> (Vec<String>, String) {
    let mut violations = Vec::new();
    let mut summary: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut dropped_in_flight = 0;
    for r in records {
        let label = match &r.outcome {
            Outcome::Completed { stored: true } => "completed, stored".to_owned(),
            Outcome::Completed { stored: false } => "completed, not stored".to_owned(),
            Outcome::Retryable { status, code } => format!("{status} {code}"),
            Outcome::Dropped(why) => {
                let in_flight = r.opened < kill.ended && r.ended >= kill.started;
                if in_flight {
                    dropped_in_flight += 1;
                } else {
                    violations.push(format!(
                        "[clients] {} ({}) lost its connection outside the kill ({:.1} s after it): {why}",
                        r.client,
                        r.kind,
                        r.opened.saturating_duration_since(kill.ended).as_secs_f64()
                    ));
                }
                "connection broken".to_owned()
            }
            Outcome::Bad(why) => {
                violations.push(format!("[clients] {} ({}): {why}", r.client, r.kind));
                "BAD".to_owned()
            }
        };
        *summary
            .entry(r.kind.clone())
            .or_default()
            .entry(label)
            .or_default() += 1;
    }
    if dropped_in_flight > kill.exposed {
        violations.push(format!(
            "[clients] {dropped_in_flight} requests broke at the kill, but only {} connections \
             went through the killed process's slot",
            kill.exposed
        ));
    }
    // Not vacuous: every kind of client got something stored.
    for kind in [
        "http",
        "http stream",
        "ws",
        "budget",
        "long stream (across the kill)",
    ] {
        let stored = |r: &&Record| matches!(r.outcome, Outcome::Completed { stored: true });
        if !records
            .iter()
            .filter(stored)
            .any(|r| r.kind.starts_with(kind))
        {
            violations.push(format!("[clients] no `{kind}` request was ever stored"));
        }
    }
    let text = summary
        .iter()
        .map(|(kind, outcomes)| format!("  {kind}: {outcomes:?}"))
        .collect::<Vec<_>>()
        .join("\n");
    (violations, text)
}

/// Whether Redis answers `PING` on 127.0.0.1:6379.
async fn redis_answers() -> bool {
    let ping = async {
        let mut conn = tokio::net::TcpStream::connect("127.0.0.1:6379")
            .await
            .ok()?;
        conn.write_all(b"PING\r\n").await.ok()?;
        let mut buf = [0u8; 7];
        conn.read_exact(&mut buf).await.ok()?;
        Some(buf.starts_with(b"+PONG"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), ping).await,
        Ok(Some(true))
    )
}

/// Says when each step happens, from the start of the chaos.
fn say(t0: Instant, what: &str) {
    eprintln!("chaos t+{:5.1} s: {what}", t0.elapsed().as_secs_f64());
}

async fn sleep_until(t0: Instant, at: Duration) {
    tokio::time::sleep_until((t0 + at).into()).await;
}

// ---------------------------------------------------------------------------------------------
// The test.

#[tokio::test(flavor = "multi_thread")]
async fn two_gateways_survive_a_kill_a_store_pause_and_a_redis_restart() {
    if !redis_answers().await {
        eprintln!("SKIPPED chaos: Redis does not answer on 127.0.0.1:6379");
        return;
    }
    let Some(db) = fresh_database("chaos").await else {
        eprintln!("SKIPPED chaos: PostgreSQL is not reachable");
        return;
    };
    tokio::time::timeout(TEST_LIMIT, chaos(&db))
        .await
        .expect("the chaos test ran past its time limit");
    db.remove().await;
}

async fn chaos(db: &Database) {
    let d = Deployment::new(db).await;
    let a = d.gateway().await;
    let b = d.gateway().await;
    d.balancer.replace(0, a.addr());
    d.balancer.replace(1, b.addr());
    let audit = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&db.url)
        .await
        .unwrap();
    let journal = Arc::new(Journal::default());
    let reserved = measure_reservation(&d.base(), &journal, &audit).await;

    let (stop, stopped) = watch::channel(false);
    let t0 = Instant::now();
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    for i in 0..HTTP_CLIENTS {
        let client = http_client(i, d.base(), journal.clone(), stopped.clone());
        clients.push(tokio::spawn(client));
    }
    for j in 0..WS_CLIENTS {
        let client = ws_client(j, d.base(), journal.clone(), stopped.clone());
        clients.push(tokio::spawn(client));
    }
    clients.push(tokio::spawn(budget_client(
        d.base(),
        journal.clone(),
        stopped,
    )));
    let mut run = unleash(&d, b, t0, &journal, &audit).await;
    say(t0, "clients stop");
    stop.send_replace(true);
    clients.append(&mut run.tasks);
    let mut violations = join(t0, clients, run.codex).await;

    let records = journal.records.lock().unwrap().clone();
    let (judged, summary) = judge(&records, &run.kill);
    violations.extend(judged);
    for (n, admitted) in run.admitted.iter().enumerate() {
        if *admitted > RPM {
            violations.push(format!(
                "[limits] burst {}: {admitted} of {BURST} requests admitted, over the limit of \
                 {RPM} a minute",
                n + 1
            ));
        }
    }
    violations.extend(audit_stored(t0, &d.base(), &journal).await);
    let (ledger_violation, ledger_text) = audit_ledger(&journal, &records, reserved, &audit).await;
    violations.extend(ledger_violation);
    violations.extend(audit_unfinished(t0, &run.kill, &journal, &audit).await);

    eprintln!(
        "chaos summary ({} requests; balancer connections per slot {:?}; limit bursts admitted \
         {:?} of {BURST} each at {RPM}/min; {ledger_text}):\n{summary}",
        records.len(),
        d.balancer.served(),
        run.admitted,
    );
    if !violations.is_empty() {
        let logs = [
            ("A", a.stderr()),
            ("B (killed)", run.killed_log),
            ("B (restarted)", run.restarted.stderr()),
        ];
        explain(&logs);
        panic!(
            "{} violations:\n{}",
            violations.len(),
            violations.join("\n")
        );
    }
}

/// What one budgeted request reserves: the ledger while a slow one is in flight. Its usage is
/// the journal's first.
async fn measure_reservation(base: &str, journal: &Journal, audit: &sqlx::PgPool) -> i64 {
    let probe = {
        let base = base.to_owned();
        tokio::spawn(async move {
            let body = json!({"model": "probe-slow", "input": BUDGET_INPUT, "store": true,
                "max_output_tokens": BUDGET_MAX_OUTPUT});
            create(&sdk_client(), &base, &secret("budgeted"), &body).await
        })
    };
    let mut reserved = 0;
    for _ in 0..100 {
        reserved = ledger(audit).await;
        if reserved > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (outcome, response) = probe.await.unwrap();
    let response = response.unwrap_or_else(|| panic!("the budget probe failed: {outcome:?}"));
    let used = response["usage"]["total_tokens"].as_i64().unwrap();
    assert!(reserved > used, "a reservation shows in flight: {reserved}");
    *journal.budget_used.lock().unwrap() = used;
    eprintln!("chaos: one budgeted request reserves {reserved} tokens and uses {used}");
    reserved
}

/// What the chaos left for the audits.
struct Run {
    kill: Kill,
    /// The killed process's log, and its replacement.
    killed_log: String,
    restarted: GatewayProcess,
    /// The 200s of each burst against the limit.
    admitted: Vec<usize>,
    /// Requests started for one step (long streams, budgeted requests into the pause).
    tasks: Vec<JoinHandle<()>>,
    codex: Vec<(&'static str, JoinHandle<CodexRun>)>,
}

/// The chaos itself, while the clients run: the kill of `b`, the store pause, the Redis
/// restart, the bursts against the limit and the Codex tasks.
async fn unleash(
    d: &Deployment,
    b: GatewayProcess,
    t0: Instant,
    journal: &Arc<Journal>,
    audit: &sqlx::PgPool,
) -> Run {
    let base = d.base();
    let mut codex = Vec::new();
    // The kill: Codex, long streams and a burst against the limit are in flight across it.
    sleep_until(t0, Duration::from_secs(3)).await;
    match std::env::var_os("TOOLBRIDGE_TEST_CODEX").filter(|p| !p.is_empty()) {
        Some(binary) => {
            say(t0, "Codex starts twice, over HTTP and over WebSocket");
            for (name, websockets) in [("codex over HTTP", false), ("codex over WebSocket", true)] {
                let task = codex_task(PathBuf::from(&binary), base.clone(), websockets);
                codex.push((name, tokio::spawn(task)));
            }
        }
        None => eprintln!("SKIPPED the Codex part of chaos: TOOLBRIDGE_TEST_CODEX is unset"),
    }
    say(t0, "burst 1 against the request limit starts (Redis up)");
    let burst_1 = tokio::spawn(burst(base.clone(), "limited-1", journal.clone()));
    sleep_until(t0, Duration::from_secs(5)).await;
    let mut tasks = long_streams(&base, journal, 4, "across the kill");
    sleep_until(t0, Duration::from_millis(6500)).await;
    for _ in 0..100 {
        if d.balancer.active(1) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = d.balancer.served()[1];
    let open = d.balancer.active(1);
    let killed_log = b.stderr();
    say(
        t0,
        &format!("kill -9 gateway B ({open} connections open through it)"),
    );
    let started = Instant::now();
    b.kill().await;
    let kill = Kill {
        started,
        ended: Instant::now(),
        exposed: open + d.balancer.served()[1] - before,
    };
    let restarted = d.gateway().await;
    d.balancer.replace(1, restarted.addr());
    say(t0, "gateway B restarted; the balancer points at it");

    // The store pause: long streams and budgeted requests started before it end during it.
    sleep_until(t0, Duration::from_secs(14)).await;
    tasks.extend(long_streams(&base, journal, 4, "into the pause"));
    sleep_until(t0, Duration::from_millis(15_500)).await;
    tasks.extend(budget_into_pause(&base, journal));
    sleep_until(t0, Duration::from_secs(16)).await;
    say(t0, "PostgreSQL paused");
    d.postgres.set(Mode::Paused);
    tokio::time::sleep(PG_PAUSE / 2).await;
    // Read directly, not through the paused proxy.
    let midway = unfinished(audit).await.len();
    say(
        t0,
        &format!("{midway} stored responses unfinished in the middle of the pause"),
    );
    tokio::time::sleep(PG_PAUSE / 2).await;
    d.postgres.set(Mode::Open);
    say(t0, "PostgreSQL back");

    // The Redis restart, then a second burst once it is back.
    sleep_until(t0, Duration::from_secs(50)).await;
    say(t0, "Redis stopped (every connection closed)");
    d.redis.set(Mode::Stopped);
    tokio::time::sleep(Duration::from_secs(2)).await;
    d.redis.set(Mode::Open);
    say(t0, "Redis back");
    sleep_until(t0, Duration::from_secs(54)).await;
    say(
        t0,
        "burst 2 against the request limit starts (Redis restarted)",
    );
    let admitted_2 = burst(base.clone(), "limited-2", journal.clone()).await;
    let admitted_1 = burst_1.await.unwrap();
    sleep_until(t0, Duration::from_secs(68)).await;
    Run {
        kill,
        killed_log,
        restarted,
        admitted: vec![admitted_1, admitted_2],
        tasks,
        codex,
    }
}

/// Waits for every client and Codex task to end; the violations.
async fn join(
    t0: Instant,
    clients: Vec<JoinHandle<()>>,
    codex: Vec<(&'static str, JoinHandle<CodexRun>)>,
) -> Vec<String> {
    let mut violations = Vec::new();
    for task in clients {
        match tokio::time::timeout(Duration::from_secs(60), task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => violations.push(format!("[clients] a client task failed: {e}")),
            Err(_) => violations.push("[clients] a client did not stop within 60 s".to_owned()),
        }
    }
    for (name, run) in codex {
        match tokio::time::timeout(Duration::from_secs(120), run).await {
            Ok(Ok(Ok((at, troubles)))) => eprintln!(
                "chaos: {name} finished its task at t+{:.1} s, past {} errors: {troubles:?}",
                at.duration_since(t0).as_secs_f64(),
                troubles.len()
            ),
            Ok(Ok(Err(why))) => violations.push(format!("[codex] {name}: {why}")),
            Ok(Err(e)) => violations.push(format!("[codex] {name} panicked: {e}")),
            Err(_) => violations.push(format!("[codex] {name} did not end")),
        }
    }
    say(t0, "every client ended");
    violations
}

/// Everything told stored is there, and final.
async fn audit_stored(t0: Instant, base: &str, journal: &Journal) -> Vec<String> {
    let stored = journal.stored.lock().unwrap().clone();
    let client = sdk_client();
    let fetched: Vec<(String, String, Result<(), String>)> =
        futures::stream::iter(stored.iter().enumerate())
            .map(|(k, (id, who))| {
                let client = &client;
                async move {
                    let result = fetch_stored(client, base, id, k).await;
                    (id.clone(), who.clone(), result)
                }
            })
            .buffer_unordered(AUDITORS)
            .collect()
            .await;
    say(
        t0,
        &format!("{} responses told stored were fetched back", stored.len()),
    );
    fetched
        .into_iter()
        .filter_map(|(id, who, result)| {
            let why = result.err()?;
            Some(format!("[stored] {who} was told {id} is stored: {why}"))
        })
        .collect()
}

/// The ledger holds the usage told, plus whole reservations of requests that died with the
/// killed process: the violation if not, and what it holds.
async fn audit_ledger(
    journal: &Journal,
    records: &[Record],
    reserved: i64,
    audit: &sqlx::PgPool,
) -> (Option<String>, String) {
    let used = *journal.budget_used.lock().unwrap();
    let dropped = records
        .iter()
        .filter(|r| r.client == "budgeted" && matches!(r.outcome, Outcome::Dropped(_)))
        .count() as i64;
    let mut on_ledger = 0;
    // Settling follows the answer: give it a moment.
    for _ in 0..40 {
        on_ledger = ledger(audit).await;
        let extra = on_ledger - used;
        if extra >= 0 && extra % reserved == 0 && extra / reserved <= dropped {
            return (None, format!("ledger {on_ledger}, told {used}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let extra = on_ledger - used;
    let killed = (extra / reserved).clamp(0, dropped);
    let violation = format!(
        "[budget] the ledger says {on_ledger} tokens; the clients were told of {used}, and \
         {dropped} requests broke with the killed process (each reserving {reserved}): the \
         difference {extra} is not a whole number of those reservations ({killed} of them \
         leave {} unexplained; a settlement lost leaves its reservation less its usage)",
        extra - killed * reserved
    );
    (Some(violation), format!("ledger {on_ledger}, told {used}"))
}

/// No stored response is left unfinished once the sweep has had its time.
async fn audit_unfinished(
    t0: Instant,
    kill: &Kill,
    journal: &Journal,
    audit: &sqlx::PgPool,
) -> Vec<String> {
    let deadline = kill.ended + SWEEP_PATIENCE;
    let mut left = unfinished(audit).await;
    say(t0, &format!("{} stored responses unfinished", left.len()));
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = unfinished(audit).await;
        if now.len() != left.len() {
            say(t0, &format!("{} stored responses unfinished", now.len()));
        }
        left = now;
    }
    let stored = journal.stored.lock().unwrap().clone();
    left.iter()
        .map(|(id, status, owner)| {
            let told = stored.iter().find(|(s, _)| s == id).map(|(_, who)| who);
            format!(
                "[in_progress] {id} is still `{status}` (owner {owner:?}; told stored to \
                 {told:?}) {} s after the kill",
                SWEEP_PATIENCE.as_secs()
            )
        })
        .collect()
}

/// The gateways' own account of what went wrong: how often each log line of interest appears,
/// and the budgeted key's lost settlements.
fn explain(logs: &[(&str, String)]) {
    let markers = [
        "recording token usage failed",
        "storing the response failed",
        "rate limit not applied",
        "marked failed",
    ];
    for (name, log) in logs {
        for marker in markers {
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(marker)).collect();
            eprintln!("gateway {name}: {} lines with `{marker}`", lines.len());
            if marker == markers[0] {
                for line in lines.iter().filter(|l| l.contains("budgeted")) {
                    eprintln!("    {}", line.chars().take(600).collect::<String>());
                }
            }
        }
    }
}
