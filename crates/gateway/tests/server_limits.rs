//! Ring 2: the server's own limits, over raw TCP where a client must misbehave (a head sent a
//! byte at a time, a body that stalls, a connection kept idle, a length over the limit, many
//! slow clients at once), and the router's own answers (405, a bad path or query, the
//! `Authorization` scheme's case) as OpenAI's JSON.
//!
//! Every wait is bounded; a bound is how long a test waits for what must happen, never a
//! measurement.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::time::Duration;

use common::Harness;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolbridge_testkit::Reply;

/// A gateway with `server` as its `[server]` section and `top` as top-level keys.
async fn gateway(top: &str, server: &str) -> Harness {
    let top = top.to_owned();
    let server = server.to_owned();
    Harness::with_toml(move |url| {
        format!(
            r#"
{top}

[server]
{server}

[providers.up]
base_url = "{url}"

[[routes]]
model = "*"
provider = "up"
"#
        )
    })
    .await
}

/// Reads until the peer closes (or resets) the connection, for at most `bound`; true when it
/// closed.
async fn closed_within(tcp: &mut TcpStream, bound: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let read_to_end = async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(bound, read_to_end).await.is_ok()
}

/// One HTTP/1.1 answer read off `tcp`: its status, its head and its body (by
/// `Content-Length`).
async fn read_answer(tcp: &mut TcpStream) -> (u16, String, Vec<u8>) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&data[..end]).to_string();
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if data.len() >= end + 4 + length {
                    let body = data[end + 4..end + 4 + length].to_vec();
                    return (head, body);
                }
            }
            let n = tcp.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before a whole answer: {data:?}");
            data.extend_from_slice(&buf[..n]);
        }
    };
    let (head, body) = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an answer within 10 s");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    (status, head, body)
}

fn answer(text: &str) -> Reply {
    Reply::json(toolbridge_testkit::chat::completion(text, "stop"))
}

fn assert_error(body: &Value, code: &str, param: Option<&str>) {
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(!message.is_empty(), "{body}");
    // No Rust type names from the framework's own texts.
    for rust in ["::", "u32", "String`", "Option<", "deserialize"] {
        assert!(!message.contains(rust), "{message}");
    }
    assert!(body["error"]["type"].is_string(), "{body}");
    match param {
        Some(p) => assert_eq!(body["error"]["param"], p, "{body}"),
        None => assert_eq!(body["error"]["param"], Value::Null, "{body}"),
    }
}

#[tokio::test]
async fn a_head_sent_one_byte_a_second_is_closed_at_the_header_timeout() {
    let h = gateway("", "header_read_timeout_secs = 2").await;
    let mut tcp = TcpStream::connect(h.addr).await.unwrap();
    // A head that would take a minute at this pace; the server must not wait for it.
    let head = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: x\r\nx-slow: {}\r\n\r\n",
        "a".repeat(40)
    );
    let mut closed = false;
    for (sent, byte) in head.bytes().enumerate() {
        assert!(sent < 15, "still open after {sent} bytes, one a second");
        if tcp.write_all(&[byte]).await.is_err() {
            closed = true;
            break;
        }
        if closed_within(&mut tcp, Duration::from_secs(1)).await {
            closed = true;
            break;
        }
    }
    assert!(closed);
}

#[tokio::test]
async fn a_content_length_over_the_limit_is_a_413_without_the_body() {
    let h = gateway("body_limit_bytes = 1024", "").await;
    let mut tcp = TcpStream::connect(h.addr).await.unwrap();
    tcp.write_all(
        b"POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 10000000000\r\n\r\n",
    )
    .await
    .unwrap();
    let (status, head, body) = read_answer(&mut tcp).await;
    assert_eq!(status, 413, "{head}");
    assert!(
        head.to_ascii_lowercase().contains("application/json"),
        "{head}"
    );
    assert_error(
        &serde_json::from_slice(&body).unwrap(),
        "request_too_large",
        None,
    );
    assert!(h.upstream.requests().is_empty());
}

/// Issue 44: a malformed `Content-Length` was refused by the HTTP parser with a 400 whose body
/// was empty; it is now OpenAI's JSON with a stable code, as is any head the parser refuses.
#[tokio::test]
async fn a_malformed_content_length_or_head_is_a_json_400() {
    let h = gateway("", "").await;
    let cases: [(&[u8], u16, &str); 5] = [
        (b"content-length: abc\r\n", 400, "invalid_content_length"),
        (b"content-length: -1\r\n", 400, "invalid_content_length"),
        (b"content-length: 5, 6\r\n", 400, "invalid_content_length"),
        (
            b"content-length: 2\r\ncontent-length: 3\r\n",
            400,
            "invalid_content_length",
        ),
        (b"transfer-encoding: gzip\r\n", 400, "invalid_request_head"),
    ];
    for (headers, status, code) in cases {
        let mut tcp = TcpStream::connect(h.addr).await.unwrap();
        let mut request =
            b"POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                .to_vec();
        request.extend_from_slice(headers);
        request.extend_from_slice(b"\r\n{}");
        tcp.write_all(&request).await.unwrap();
        let (got, head, body) = read_answer(&mut tcp).await;
        let case = String::from_utf8_lossy(headers);
        assert_eq!(got, status, "{case}: {head}");
        assert!(
            head.to_ascii_lowercase().contains("application/json"),
            "{case}: {head}"
        );
        let body: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{case}: not JSON ({e}): {body:?}"));
        assert_error(&body, code, None);
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    }
    // A well-formed request on a connection that came after still gets its own answer.
    h.upstream.push(answer("ok"));
    let (status, _) = h
        .post_json(&json!({"model": "m", "input": "hi", "store": false}))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_body_that_stalls_is_a_408_at_the_body_read_timeout() {
    let h = gateway("", "body_read_timeout_secs = 1").await;
    let mut tcp = TcpStream::connect(h.addr).await.unwrap();
    tcp.write_all(
        b"POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\": ",
    )
    .await
    .unwrap();
    let (status, head, body) = read_answer(&mut tcp).await;
    assert_eq!(status, 408, "{head}");
    assert_error(
        &serde_json::from_slice(&body).unwrap(),
        "request_timeout",
        None,
    );
    // The rest of that body is never read: the connection goes.
    assert!(closed_within(&mut tcp, Duration::from_secs(10)).await);
    assert!(h.upstream.requests().is_empty());
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_at_the_idle_timeout() {
    let h = gateway("", "idle_timeout_secs = 1\nheader_read_timeout_secs = 60").await;
    let mut tcp = TcpStream::connect(h.addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let (status, head, _) = read_answer(&mut tcp).await;
    assert_eq!(status, 200, "{head}");
    assert!(!head.to_ascii_lowercase().contains("connection: close"));
    assert!(closed_within(&mut tcp, Duration::from_secs(15)).await);
}

#[tokio::test]
async fn a_connection_busy_with_a_request_is_not_cut_by_the_idle_timeout() {
    let h = gateway("", "idle_timeout_secs = 1\nheader_read_timeout_secs = 1").await;
    // The upstream takes longer than both timeouts to answer.
    h.upstream.push(Reply::Delayed {
        pause: Duration::from_secs(3),
        reply: Box::new(answer("slow but whole")),
    });
    let (status, body) = h.post_json(&json!({"model": "m", "input": "hi"})).await;
    assert_eq!(status, 200, "{body}");
    // A stream whose events come further apart than both timeouts keeps its connection.
    let pieces = toolbridge_testkit::chat::text_stream(&["slow", " stream", " whole"], "stop")
        .iter()
        .map(|p| format!("data: {p}\n\n"))
        .chain(["data: [DONE]\n\n".to_owned()])
        .collect();
    h.upstream.push(Reply::Stream {
        pieces,
        pause: Duration::from_millis(1500),
    });
    let events = h
        .post_stream(&json!({"model": "m", "input": "hi", "stream": true}))
        .await;
    let last = events.last().expect("events");
    assert_eq!(
        last.name.as_deref(),
        Some("response.completed"),
        "{:?}",
        last.data
    );
}

#[test]
fn the_server_limits_are_configured_validated_and_shown_by_check() {
    let load = |server: &str| {
        let text = format!(
            "[server]\n{server}\n\n[providers.up]\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        );
        let file: toolbridge_gateway::config::FileConfig = toml::from_str(&text).unwrap();
        toolbridge_gateway::Config::from_file(file, &|_| None)
    };
    let shown = toolbridge_gateway::cli::describe(&load("").unwrap());
    assert!(
        shown.contains("server: header read timeout 10 s, idle timeout 75 s, body read timeout 60 s, at most 4096 connections\n"),
        "{shown}"
    );
    let config = load("header_read_timeout_secs = 3\nidle_timeout_secs = 4\nbody_read_timeout_secs = 5\nmax_connections = 6").unwrap();
    let shown = toolbridge_gateway::cli::describe(&config);
    assert!(
        shown.contains("server: header read timeout 3 s, idle timeout 4 s, body read timeout 5 s, at most 6 connections\n"),
        "{shown}"
    );
    for zero in ["header_read_timeout_secs = 0", "max_connections = 0"] {
        let error = load(zero).unwrap_err().to_string();
        assert!(error.contains("server."), "{error}");
    }
}

#[tokio::test]
async fn many_slow_connections_do_not_stop_normal_requests() {
    // Fewer slots than slow clients: they can only all be served because each one is closed
    // at the header timeout.
    let h = gateway("", "header_read_timeout_secs = 1\nmax_connections = 50").await;
    let addr = h.addr;
    let mut slow = Vec::new();
    for _ in 0..200 {
        slow.push(tokio::spawn(async move {
            let Ok(mut tcp) = TcpStream::connect(addr).await else {
                return true;
            };
            if tcp
                .write_all(b"POST /v1/responses HTTP/1.1\r\nhost: x\r\nx-slow: ")
                .await
                .is_err()
            {
                return true;
            }
            // A byte every half second for at most a minute, until the server closes.
            for _ in 0..120 {
                if tcp.write_all(b"a").await.is_err()
                    || closed_within(&mut tcp, Duration::from_millis(500)).await
                {
                    return true;
                }
            }
            false
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for i in 0..10 {
        h.upstream.push(answer(&format!("answer {i}")));
        let body = json!({"model": "m", "input": "hi"});
        let request = h.post_json(&body);
        let (status, body) = tokio::time::timeout(Duration::from_secs(30), request)
            .await
            .expect("a normal request is served within 30 s");
        assert_eq!(status, 200, "{body}");
    }
    for task in slow {
        assert!(task.await.unwrap(), "a slow connection was never closed");
    }
}

#[tokio::test]
async fn a_method_a_route_does_not_take_is_a_json_405() {
    let h = Harness::with_preset("generic").await;
    for (method, path, allowed) in [
        (reqwest::Method::GET, "/v1/responses", "POST"),
        (reqwest::Method::DELETE, "/v1/models", "GET"),
        (reqwest::Method::PUT, "/v1/responses/resp_1", "GET"),
        (reqwest::Method::POST, "/healthz", "GET"),
    ] {
        let response = h.client.request(method, h.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 405, "{path}");
        let allow = response.headers()["allow"].to_str().unwrap().to_owned();
        assert!(allow.contains(allowed), "{path}: {allow}");
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: Value = response.json().await.unwrap();
        assert_error(&body, "method_not_allowed", None);
    }
}

#[tokio::test]
async fn a_bad_query_is_a_json_400_naming_the_field() {
    let h = Harness::with_preset("generic").await;
    for path in [
        "/v1/responses/resp_1/input_items?limit=abc",
        "/v1/responses/resp_1/input_items?limit=-1",
        "/v1/conversations/conv_1/items?limit=ten&order=asc",
        "/v1/conversations/conv_1/items?limit=1&limit=2",
    ] {
        let response = h.client.get(h.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 400, "{path}");
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: Value = response.json().await.unwrap();
        assert_error(&body, "invalid_value", Some("limit"));
    }
    // A value of the right type but out of range names the field too, as before.
    let response = h
        .client
        .get(h.url("/v1/responses/resp_1/input_items?order=sideways"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_error(
        &response.json().await.unwrap(),
        "invalid_value",
        Some("order"),
    );
}

#[tokio::test]
async fn a_path_that_is_not_utf8_is_a_json_400() {
    let h = Harness::with_preset("generic").await;
    for path in ["/v1/responses/%FF", "/v1/conversations/%C3%28/items"] {
        let response = h.client.get(h.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 400, "{path}");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_error(&response.json().await.unwrap(), "invalid_request", None);
    }
    // A route that names its own code for a bad path keeps it.
    let response = h
        .client
        .get(h.url("/v1/sessions/%FF/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_error(
        &response.json().await.unwrap(),
        "invalid_session_id",
        Some("session_id"),
    );
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let h = gateway(r#"api_keys = ["sk-gw-1"]"#, "").await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let response = h
            .client
            .get(h.url("/v1/models"))
            .header("authorization", format!("{scheme} sk-gw-1"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{scheme}");
    }
    for wrong in [
        "Basic sk-gw-1",
        "Bearersk-gw-1",
        "sk-gw-1",
        "Bearer sk-gw-2",
    ] {
        let response = h
            .client
            .get(h.url("/v1/models"))
            .header("authorization", wrong)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{wrong}");
        assert_error(&response.json().await.unwrap(), "invalid_api_key", None);
    }
}
