//! The web tools against hostile input: a table of refused URLs (each with its reason, checked
//! before any connection is attempted), redirect chains through local axum servers, size, time
//! and content-type caps, HTML to Markdown, and the three search backends against fake servers
//! speaking their JSON.
//!
//! Nothing here leaves 127.0.0.1: names resolve through a fake lookup table (never the system
//! resolver), and every refused entry is first checked with the pure guard functions, so a
//! regression fails the test before the client could send a packet anywhere.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use toolbridge_tools::builtins::web::client::{FetchError, Oversize, SafeRequest};
use toolbridge_tools::builtins::web::ssrf::{GuardedResolver, Lookup, LookupFuture};
use toolbridge_tools::builtins::web::{
    Reason, SafeClient, SearchBackend, SsrfPolicy, WebConfig, WebFetch, WebSearch,
};
use toolbridge_tools::builtins::{BuiltinsConfig, configured};
use toolbridge_tools::{Tool, ToolContext, ToolError, ToolRegistry};
use url::Url;

/// Names the tests resolve, and to what; anything else does not resolve.
#[derive(Default)]
struct FakeLookup(HashMap<String, Vec<IpAddr>>);

impl FakeLookup {
    fn standard() -> Self {
        let mut map = HashMap::new();
        let mut add = |name: &str, ips: &[&str]| {
            map.insert(
                name.to_owned(),
                ips.iter().map(|ip| ip.parse().unwrap()).collect(),
            );
        };
        add("rebind.test", &["127.0.0.1"]);
        add("internal.test", &["10.0.0.5"]);
        add("mixed-bad.test", &["192.168.0.1", "::1"]);
        add("meta.test", &["169.254.169.254"]);
        add("ula.test", &["fd12::1"]);
        add("mapped.test", &["::ffff:127.0.0.1"]);
        add("cgnat.test", &["100.100.1.1"]);
        add("zero.test", &["0.0.0.0"]);
        Self(map)
    }
}

impl Lookup for FakeLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let found = self.0.get(host).cloned();
        Box::pin(async move {
            found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not in the fake table"))
        })
    }
}

fn client(policy: SsrfPolicy) -> SafeClient {
    SafeClient::with_lookup(policy, Arc::new(FakeLookup::standard())).unwrap()
}

fn ctx() -> ToolContext {
    ToolContext::with_timeout(Duration::from_secs(10), 4 * 1024 * 1024)
}

/// Where a URL is refused: by the URL check, or by the resolver after a lookup.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    Url,
    Resolve,
}

/// Hostile URLs, the reason each is refused, and where.
const HOSTILE: &[(&str, &str, Stage)] = &[
    ("http://127.0.0.1", "loopback", Stage::Url),
    ("http://127.0.0.1:80/admin", "loopback", Stage::Url),
    ("https://127.0.0.1:443/", "loopback", Stage::Url),
    ("http://127.255.255.254", "loopback", Stage::Url),
    ("http://localhost", "localhost_name", Stage::Url),
    ("http://LOCALHOST./", "localhost_name", Stage::Url),
    ("http://api.localhost/", "localhost_name", Stage::Url),
    ("http://[::1]", "loopback", Stage::Url),
    ("http://0.0.0.0", "unspecified", Stage::Url),
    ("http://0", "unspecified", Stage::Url),
    ("http://[::]", "unspecified", Stage::Url),
    ("http://10.0.0.1", "private", Stage::Url),
    ("http://172.16.0.1", "private", Stage::Url),
    ("http://172.31.255.254", "private", Stage::Url),
    ("http://192.168.1.1", "private", Stage::Url),
    (
        "http://169.254.169.254/latest/meta-data",
        "metadata",
        Stage::Url,
    ),
    (
        "http://169.254.170.2/v2/credentials",
        "metadata",
        Stage::Url,
    ),
    (
        "http://metadata.google.internal/computeMetadata/v1/",
        "metadata",
        Stage::Url,
    ),
    (
        "http://[fd00:ec2::254]/latest/meta-data",
        "metadata",
        Stage::Url,
    ),
    ("http://169.254.1.1", "link_local", Stage::Url),
    ("http://100.64.0.1", "cgnat", Stage::Url),
    ("http://[fc00::1]", "unique_local", Stage::Url),
    ("http://[fd12:3456::1]", "unique_local", Stage::Url),
    ("http://[fe80::1]", "link_local", Stage::Url),
    ("http://[fe80::1%25eth0]", "invalid_url", Stage::Url),
    ("http://[::ffff:127.0.0.1]", "loopback", Stage::Url),
    ("http://[::ffff:10.0.0.1]", "private", Stage::Url),
    ("http://[::ffff:169.254.169.254]", "metadata", Stage::Url),
    ("http://[::ffff:7f00:1]", "loopback", Stage::Url),
    ("http://[::127.0.0.1]", "loopback", Stage::Url),
    ("http://[64:ff9b::7f00:1]", "loopback", Stage::Url),
    ("http://[2002:c0a8:101::1]", "private", Stage::Url),
    ("http://2130706433", "loopback", Stage::Url),
    ("http://0x7f000001", "loopback", Stage::Url),
    ("http://017700000001", "loopback", Stage::Url),
    ("http://0177.0.0.1", "loopback", Stage::Url),
    ("http://0x7f.0.0.1", "loopback", Stage::Url),
    ("http://127.1", "loopback", Stage::Url),
    ("http://127.0.1", "loopback", Stage::Url),
    ("http://%31%32%37.0.0.1/", "loopback", Stage::Url),
    ("http://127。0。0。1/", "loopback", Stage::Url),
    ("http://①②⑦.0.0.1/", "loopback", Stage::Url),
    ("http://127.0.0.1./", "loopback", Stage::Url),
    ("http://255.255.255.255", "broadcast", Stage::Url),
    ("http://224.0.0.1", "multicast", Stage::Url),
    ("http://[ff02::1]", "multicast", Stage::Url),
    ("http://192.0.2.1", "documentation", Stage::Url),
    ("http://[2001:db8::1]", "documentation", Stage::Url),
    ("http://240.0.0.1", "reserved", Stage::Url),
    ("file:///etc/passwd", "scheme", Stage::Url),
    ("ftp://example.com/file", "scheme", Stage::Url),
    ("gopher://example.com:70/_GET%20/", "scheme", Stage::Url),
    ("dict://example.com:11211/stat", "scheme", Stage::Url),
    ("javascript:alert(1)", "scheme", Stage::Url),
    ("data:text/html,<b>hi</b>", "scheme", Stage::Url),
    ("http://example.com:22/", "port", Stage::Url),
    ("http://example.com:6379/", "port", Stage::Url),
    ("https://example.com:8443/", "port", Stage::Url),
    ("http://evil@127.0.0.1", "loopback", Stage::Url),
    ("http://example.com@127.0.0.1/", "loopback", Stage::Url),
    ("http://user:pass@example.com/", "credentials", Stage::Url),
    (
        "http://127.0.0.1:80@example.com/",
        "credentials",
        Stage::Url,
    ),
    ("not a url", "invalid_url", Stage::Url),
    ("http://rebind.test/", "loopback", Stage::Resolve),
    ("http://internal.test/", "private", Stage::Resolve),
    ("http://mixed-bad.test/", "private", Stage::Resolve),
    (
        "http://meta.test/latest/meta-data",
        "metadata",
        Stage::Resolve,
    ),
    ("http://ula.test/", "unique_local", Stage::Resolve),
    ("http://mapped.test/", "loopback", Stage::Resolve),
    ("http://cgnat.test/", "cgnat", Stage::Resolve),
    ("http://zero.test/", "unspecified", Stage::Resolve),
    ("http://nowhere.test/", "unresolvable", Stage::Resolve),
];

/// The pure check for one entry: no connection can happen here.
async fn pure_refusal(raw: &str, stage: Stage) -> Option<Reason> {
    let url = match Url::parse(raw) {
        Ok(url) => url,
        Err(_) => return Some(Reason::InvalidUrl),
    };
    let policy = SsrfPolicy::default();
    if let Err(refusal) = policy.check_url(&url) {
        assert_eq!(stage, Stage::Url, "{raw} was refused by the URL check");
        return Some(refusal.reason);
    }
    assert_eq!(stage, Stage::Resolve, "{raw} passed the URL check");
    let host = url.host_str().unwrap().to_owned();
    let resolver = GuardedResolver::new(Arc::new(FakeLookup::standard()));
    resolver
        .resolve_checked(&host)
        .await
        .err()
        .map(|r| r.reason)
}

#[tokio::test]
async fn every_hostile_url_is_refused_with_its_reason() {
    assert!(HOSTILE.len() >= 30);
    // First the pure checks, for every entry, so that a hole fails here and never reaches the
    // client below.
    for (raw, reason, stage) in HOSTILE {
        let got = pure_refusal(raw, *stage).await;
        assert_eq!(
            got.map(Reason::code),
            Some(*reason),
            "{raw} must be refused as {reason}"
        );
    }
    // Then through the tool: the same refusal, as a `refused` tool error.
    let fetch = WebFetch::new(client(SsrfPolicy::default()));
    for (raw, reason, _) in HOSTILE {
        let err = fetch
            .execute(json!({"url": raw}), &ctx())
            .await
            .unwrap_err();
        match err {
            ToolError::Refused(message) => assert!(
                message.starts_with(&format!("{reason}:")),
                "{raw}: {message}"
            ),
            other => panic!("{raw}: expected a refusal, got {other:?}"),
        }
    }
}

/// A listener that counts the connections it accepts.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((_socket, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, count)
}

#[tokio::test]
async fn refused_loopback_spellings_never_connect() {
    // The port is allowed, so only the address can be the reason; the escape hatch is open for
    // another port, so it must not leak to this one.
    let (port, count) = counting_listener().await;
    let (other, other_count) = counting_listener().await;
    let policy = SsrfPolicy {
        allowed_ports: vec![80, 443, port],
        allow_loopback_ports: vec![other],
        ..SsrfPolicy::default()
    };
    let client = client(policy);
    let spellings = [
        "http://127.0.0.1:{p}/",
        "http://localhost:{p}/",
        "http://[::1]:{p}/",
        "http://[::ffff:127.0.0.1]:{p}/",
        "http://2130706433:{p}/",
        "http://0x7f000001:{p}/",
        "http://017700000001:{p}/",
        "http://127.1:{p}/",
        "http://0.0.0.0:{p}/",
        "http://evil@127.0.0.1:{p}/",
        "http://rebind.test:{p}/",
        "http://mapped.test:{p}/",
    ];
    for spelling in spellings {
        let raw = spelling.replace("{p}", &port.to_string());
        let err = client
            .send(
                SafeRequest::get(Url::parse(&raw).unwrap()),
                Oversize::Fail,
                tokio::time::Instant::now() + Duration::from_secs(5),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Refused(_)), "{raw}: {err:?}");
    }
    // Give a connection that slipped through time to be counted.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_eq!(other_count.load(Ordering::SeqCst), 0);
}

/// Serves `router` on 127.0.0.1:0.
async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    addr
}

fn html(body: impl Into<String>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

fn redirect_to(location: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, location.to_owned())]).into_response()
}

const PAGE: &str = "<html><head><title>Test page</title><style>p{}</style></head><body>\
    <h1>Welcome</h1><p>Read the <a href=\"/docs\">docs</a>.</p><ul><li>one</li><li>two</li></ul>\
    <script>steal()</script></body></html>";

/// The test site: pages, redirects, caps and content types.
fn site() -> Router {
    Router::new()
        .route("/page", get(|| async { html(PAGE) }))
        .route(
            "/hop/{n}",
            get(|Path(n): Path<u32>| async move {
                if n == 0 {
                    redirect_to("/page")
                } else {
                    redirect_to(&format!("/hop/{}", n - 1))
                }
            }),
        )
        .route(
            "/to",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                redirect_to(q.get("target").map_or("/page", String::as_str))
            }),
        )
        .route(
            "/big",
            get(|| async { html("<p>xxxxxxxxxxxxxxxxxxxxxxx</p>\n".repeat(100_000)) }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                html("late")
            }),
        )
        .route(
            "/binary",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/octet-stream")],
                    vec![0u8, 1, 2, 3],
                )
                    .into_response()
            }),
        )
        .route(
            "/untyped",
            get(|| async { Response::new(Body::from("no type")) }),
        )
        .route(
            "/json",
            get(|| async { axum::Json(json!({"a": [1, 2]})).into_response() }),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, html("gone")).into_response() }),
        )
        .route(
            "/headers",
            get(|headers: HeaderMap| async move {
                let names: Vec<String> = headers.keys().map(|k| k.as_str().to_owned()).collect();
                axum::Json(json!({"headers": names})).into_response()
            }),
        )
}

/// A policy that admits the test servers on `ports` (literal 127.0.0.1 only).
fn policy_for(ports: &[u16]) -> SsrfPolicy {
    SsrfPolicy {
        allow_loopback_ports: ports.to_vec(),
        ..SsrfPolicy::default()
    }
}

async fn fetch(tool: &WebFetch, url: String) -> Result<Value, ToolError> {
    tool.execute(json!({"url": url}), &ctx()).await
}

#[tokio::test]
async fn html_becomes_markdown_through_a_redirect_chain() {
    let addr = serve(site()).await;
    let tool = WebFetch::new(client(policy_for(&[addr.port()])));
    let out = fetch(&tool, format!("http://{addr}/hop/3")).await.unwrap();
    assert_eq!(out["status"], 200);
    assert_eq!(out["title"], "Test page");
    assert_eq!(out["content_type"], "text/html");
    assert_eq!(out["redirects"].as_array().unwrap().len(), 4);
    assert_eq!(out["url"], format!("http://{addr}/page"));
    let content = out["content"].as_str().unwrap();
    assert!(content.contains("# Welcome"), "{content}");
    assert!(content.contains("[docs](/docs)"), "{content}");
    assert!(
        content.contains("one") && content.contains("two"),
        "{content}"
    );
    assert!(
        !content.contains("steal") && !content.contains("p{}"),
        "{content}"
    );
    assert_eq!(out["truncated"], false);

    // `raw` returns the body as served.
    let raw = tool
        .execute(
            json!({"url": format!("http://{addr}/page"), "format": "raw"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(raw["content"], PAGE);
}

#[tokio::test]
async fn too_many_hops_are_refused() {
    let addr = serve(site()).await;
    let policy = SsrfPolicy {
        max_redirects: 3,
        ..policy_for(&[addr.port()])
    };
    let tool = WebFetch::new(client(policy));
    // Three redirects are allowed ...
    assert!(fetch(&tool, format!("http://{addr}/hop/2")).await.is_ok());
    // ... four are not.
    let err = fetch(&tool, format!("http://{addr}/hop/3"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Refused(m) if m.starts_with("too_many_redirects:")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_redirect_to_a_refused_address_is_refused_at_the_hop() {
    let addr = serve(site()).await;
    let (closed_port, closed_count) = counting_listener().await;
    let tool = WebFetch::new(client(policy_for(&[addr.port()])));
    let p = addr.port();
    let targets = [
        ("http://10.0.0.1/".to_owned(), "private"),
        (
            "http://169.254.169.254/latest/meta-data".to_owned(),
            "metadata",
        ),
        (format!("http://localhost:{p}/page"), "localhost_name"),
        (format!("http://[::ffff:127.0.0.1]:{p}/page"), "loopback"),
        (format!("http://127.0.0.2:{p}/page"), "loopback"),
        (format!("http://127.0.0.1:{closed_port}/"), "loopback"),
        // The escape hatch admits literal addresses only: a name on the test port is refused
        // for its port, and on port 80 by the resolver.
        (format!("http://rebind.test:{p}/page"), "port"),
        ("http://rebind.test/page".to_owned(), "loopback"),
        ("http://internal.test/".to_owned(), "private"),
        ("file:///etc/passwd".to_owned(), "scheme"),
        ("gopher://example.com/".to_owned(), "scheme"),
        ("http://example.com:25/".to_owned(), "port"),
        ("http://user:pw@example.com/".to_owned(), "credentials"),
    ];
    for (target, reason) in targets {
        // Each target is refused by the pure check first; only then is the chain followed.
        let url = Url::parse(&target).unwrap();
        if url.host_str() != Some("rebind.test") && url.host_str() != Some("internal.test") {
            assert!(policy_for(&[p]).check_url(&url).is_err(), "{target}");
        }
        let mut start = Url::parse(&format!("http://{addr}/to")).unwrap();
        start.query_pairs_mut().append_pair("target", &target);
        let err = fetch(&tool, start.to_string()).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::Refused(m) if m.starts_with(&format!("{reason}:"))),
            "{target}: {err:?}"
        );
    }
    assert_eq!(closed_count.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn headers_do_not_follow_a_cross_origin_redirect() {
    let a = serve(site()).await;
    let b = serve(site()).await;
    let client = client(policy_for(&[a.port(), b.port()]));
    let send = |target: String| {
        let client = client.clone();
        async move {
            let mut url = Url::parse(&format!("http://{a}/to")).unwrap();
            url.query_pairs_mut().append_pair("target", &target);
            let mut request = SafeRequest::get(url);
            request
                .headers
                .insert("x-subscription-token", "secret".parse().unwrap());
            let response = client
                .send(
                    request,
                    Oversize::Fail,
                    tokio::time::Instant::now() + Duration::from_secs(5),
                )
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(&response.body).unwrap();
            body["headers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h == "x-subscription-token")
        }
    };
    assert!(
        send("/headers".to_owned()).await,
        "same origin keeps headers"
    );
    assert!(
        !send(format!("http://{b}/headers")).await,
        "another origin gets none"
    );
}

#[tokio::test]
async fn the_body_is_capped() {
    let addr = serve(site()).await;
    let policy = SsrfPolicy {
        max_response_bytes: 64 * 1024,
        ..policy_for(&[addr.port()])
    };
    let client = client(policy);
    // A page is cut at the cap and says so.
    let tool = WebFetch::new(client.clone());
    let out = fetch(&tool, format!("http://{addr}/big")).await.unwrap();
    assert_eq!(out["truncated"], true);
    assert_eq!(out["bytes"], 64 * 1024);
    // An API answer past the cap is an error.
    let err = client
        .send(
            SafeRequest::get(Url::parse(&format!("http://{addr}/big")).unwrap()),
            Oversize::Fail,
            tokio::time::Instant::now() + Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert_eq!(err, FetchError::TooLarge { limit: 64 * 1024 });
    // The text returned is capped too.
    let out = tool
        .execute(
            json!({"url": format!("http://{addr}/page"), "max_chars": 5}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(out["content"].as_str().unwrap().chars().count(), 5);
    assert_eq!(out["truncated"], true);
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let addr = serve(site()).await;
    // The call's deadline ...
    let tool = WebFetch::new(client(policy_for(&[addr.port()])));
    let short = ToolContext::with_timeout(Duration::from_millis(300), 1024 * 1024);
    let err = tool
        .execute(json!({"url": format!("http://{addr}/slow")}), &short)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout);
    // ... and the policy's own timeout.
    let policy = SsrfPolicy {
        timeout: Duration::from_millis(300),
        ..policy_for(&[addr.port()])
    };
    let tool = WebFetch::new(client(policy));
    let err = fetch(&tool, format!("http://{addr}/slow"))
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout);
}

#[tokio::test]
async fn only_text_content_types_are_read() {
    let addr = serve(site()).await;
    let tool = WebFetch::new(client(policy_for(&[addr.port()])));
    for path in ["binary", "untyped"] {
        let err = fetch(&tool, format!("http://{addr}/{path}"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ToolError::Refused(m) if m.starts_with("content_type:")),
            "{path}: {err:?}"
        );
    }
    let out = fetch(&tool, format!("http://{addr}/json")).await.unwrap();
    assert_eq!(out["content_type"], "application/json");
    assert_eq!(out["content"], r#"{"a":[1,2]}"#);
    let err = fetch(&tool, format!("http://{addr}/missing"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("404")),
        "{err:?}"
    );
}

/// Fake search backends: SearXNG, Brave and Tavily, each checking what it is sent.
fn backends() -> Router {
    Router::new()
        .route(
            "/searx/search",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                if q.get("format").map(String::as_str) != Some("json") {
                    return StatusCode::FORBIDDEN.into_response();
                }
                let query = q.get("q").cloned().unwrap_or_default();
                axum::Json(json!({
                    "query": query,
                    "results": [
                        {"title": "Rust", "url": "https://www.rust-lang.org/", "content": "A <b>language</b>", "engine": "x"},
                        {"title": "Bad", "url": "javascript:alert(1)", "content": "dropped"},
                        {"title": "Book", "url": "https://doc.rust-lang.org/book/", "content": query},
                    ]
                }))
                .into_response()
            }),
        )
        .route(
            "/res/v1/web/search",
            get(
                |headers: HeaderMap, Query(q): Query<HashMap<String, String>>| async move {
                    if headers.get("x-subscription-token").and_then(|v| v.to_str().ok())
                        != Some("brave-key")
                    {
                        return StatusCode::UNAUTHORIZED.into_response();
                    }
                    let count: usize = q.get("count").and_then(|c| c.parse().ok()).unwrap_or(20);
                    let results: Vec<Value> = (0..10)
                        .map(|i| {
                            json!({
                                "title": format!("Result {i}"),
                                "url": format!("https://example.com/{i}"),
                                "description": format!("about <strong>{}</strong>", q["q"]),
                            })
                        })
                        .take(count)
                        .collect();
                    axum::Json(json!({"type": "search", "web": {"results": results}}))
                        .into_response()
                },
            ),
        )
        .route(
            "/search",
            post(|headers: HeaderMap, axum::Json(body): axum::Json<Value>| async move {
                if headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
                    != Some("Bearer tvly-key")
                {
                    return StatusCode::UNAUTHORIZED.into_response();
                }
                axum::Json(json!({
                    "query": body["query"],
                    "results": [
                        {"title": "T", "url": "https://tavily.example/a", "content": format!("n={}", body["max_results"]), "score": 0.9}
                    ]
                }))
                .into_response()
            }),
        )
        .route("/broken/search", get(|| async { StatusCode::INTERNAL_SERVER_ERROR }))
        .route("/html/search", get(|| async { html("<p>not json</p>") }))
}

fn search_tool(addr: SocketAddr, backend: SearchBackend) -> WebSearch {
    WebSearch::new(client(policy_for(&[addr.port()])), backend)
}

#[tokio::test]
async fn searxng_results_are_normalised() {
    let addr = serve(backends()).await;
    let backend = SearchBackend::searxng(&format!("http://{addr}/searx")).unwrap();
    let tool = search_tool(addr, backend);
    let out = tool
        .execute(json!({"query": "rust lang"}), &ctx())
        .await
        .unwrap();
    assert_eq!(out["backend"], "searxng");
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "the javascript: result is dropped");
    assert_eq!(
        results[0],
        json!({"title": "Rust", "url": "https://www.rust-lang.org/", "snippet": "A language"})
    );
    assert_eq!(results[1]["snippet"], "rust lang");
}

#[tokio::test]
async fn brave_gets_its_token_and_count() {
    let addr = serve(backends()).await;
    let backend = SearchBackend::Brave {
        base_url: Url::parse(&format!("http://{addr}/")).unwrap(),
        api_key: "brave-key".into(),
    };
    let tool = search_tool(addr, backend);
    let out = tool
        .execute(json!({"query": "tokio", "max_results": 3}), &ctx())
        .await
        .unwrap();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[2]["url"], "https://example.com/2");
    assert_eq!(results[0]["snippet"], "about tokio");

    let wrong = SearchBackend::Brave {
        base_url: Url::parse(&format!("http://{addr}/")).unwrap(),
        api_key: "wrong".into(),
    };
    let err = search_tool(addr, wrong)
        .execute(json!({"query": "tokio"}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m.contains("401")),
        "{err:?}"
    );
}

#[tokio::test]
async fn tavily_gets_a_json_post() {
    let addr = serve(backends()).await;
    let backend = SearchBackend::Tavily {
        base_url: Url::parse(&format!("http://{addr}")).unwrap(),
        api_key: "tvly-key".into(),
    };
    let out = search_tool(addr, backend)
        .execute(json!({"query": "axum", "max_results": 7}), &ctx())
        .await
        .unwrap();
    assert_eq!(out["backend"], "tavily");
    assert_eq!(
        out["results"],
        json!([{"title": "T", "url": "https://tavily.example/a", "snippet": "n=7"}])
    );
}

#[tokio::test]
async fn backend_failures_are_errors() {
    let addr = serve(backends()).await;
    for (base, want) in [("broken", "500"), ("html", "not its JSON")] {
        let backend = SearchBackend::searxng(&format!("http://{addr}/{base}")).unwrap();
        let err = search_tool(addr, backend)
            .execute(json!({"query": "x"}), &ctx())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ToolError::Failed(m) if m.contains(want)),
            "{base}: {err:?}"
        );
    }
    // A backend on a loopback port the policy does not list is refused like any other URL.
    let backend = SearchBackend::searxng(&format!("http://{addr}/searx")).unwrap();
    let strict = WebSearch::new(client(SsrfPolicy::default()), backend);
    let err = strict
        .execute(json!({"query": "x"}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Refused(m) if m.starts_with("loopback:")),
        "{err:?}"
    );
    // An empty query is refused before anything is sent.
    let err = strict
        .execute(json!({"query": "   "}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
}

#[tokio::test]
async fn configured_offers_search_only_with_a_backend() {
    let names = |config: &BuiltinsConfig| {
        let registry = ToolRegistry::with_tools(configured(config).unwrap()).unwrap();
        registry.names().map(str::to_owned).collect::<Vec<_>>()
    };
    let without = names(&BuiltinsConfig::default());
    for name in ["files", "pdf", "web_fetch", "calculator", "hash"] {
        assert!(without.iter().any(|n| n == name), "{name} in {without:?}");
    }
    assert!(!without.iter().any(|n| n == "web_search"));
    let with = names(&BuiltinsConfig {
        web: WebConfig {
            search: Some(SearchBackend::searxng("https://searx.example/").unwrap()),
            ..WebConfig::default()
        },
        ..BuiltinsConfig::default()
    });
    assert!(with.iter().any(|n| n == "web_search"));

    // Through the registry, arguments are validated before the tool runs.
    let registry =
        ToolRegistry::with_tools(configured(&BuiltinsConfig::default()).unwrap()).unwrap();
    let err = registry
        .execute(
            "web_fetch",
            json!({"url": "http://example.com", "x": 1}),
            &ctx(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    let err = registry
        .execute("web_fetch", json!({"url": "http://10.1.2.3/"}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "refused");
}
