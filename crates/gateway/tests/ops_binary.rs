//! Ring 3, operations through the real binary: spans of one request reach a local OTLP/HTTP
//! receiver (decoded with opentelemetry-proto) and the upstream gets a `traceparent` of the same
//! trace, which continues the client's; SIGHUP reloads the config while a stream started before
//! it finishes on the old one; `toolbridge trace show` prints a captured request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use toolbridge_testkit::chat::{completion, text_stream};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");

fn temp_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let path = std::env::temp_dir().join(format!(
        "toolbridge-ops-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&path).unwrap();
    path
}

fn config(upstream: &FakeUpstream, upstream_model: &str, extra: &str) -> String {
    format!(
        r#"
{extra}

[providers.up]
base_url = "{}"

[[routes]]
model = "m"
provider = "up"
upstream_model = "{upstream_model}"
"#,
        upstream.base_url()
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

async fn start(config: &Path, store: &str, extra_env: &[(&str, String)]) -> GatewayProcess {
    let mut env = vec![
        ("TOOLBRIDGE_CONFIG", config.display().to_string()),
        ("TOOLBRIDGE_STORE_URL", store.to_owned()),
    ];
    env.extend(extra_env.iter().cloned());
    GatewayProcess::start(Path::new(BIN), &env).await
}

#[tokio::test]
async fn spans_of_a_request_reach_the_otlp_receiver_and_the_trace_goes_upstream() {
    let (endpoint, seen) = common::otlp::receiver().await;
    let upstream = FakeUpstream::start().await;
    upstream.push(Reply::json(completion("hello", "stop")));
    let dir = temp_dir("otlp");
    let file = dir.join("config.toml");
    let extra = format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\n");
    std::fs::write(&file, config(&upstream, "up-model", &extra)).unwrap();
    let store = format!("sqlite://{}", dir.join("store.db").display());
    let gateway = start(&file, &store, &[("OTEL_BSP_SCHEDULE_DELAY", "100".into())]).await;

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let response = client()
        .post(gateway.url("/v1/responses"))
        .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
        .json(&json!({"model": "m", "input": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", gateway.stderr());
    let _ = response.text().await.unwrap();

    let sent = upstream.requests();
    let traceparent = sent[0].headers["traceparent"].to_str().unwrap().to_owned();
    assert_eq!(
        traceparent.split('-').nth(1),
        Some(trace_id),
        "{traceparent}"
    );

    let wanted = [
        "request",
        "parse",
        "plan",
        "translate",
        "upstream",
        "reconstruct",
        "store",
    ];
    let mut names: Vec<String> = Vec::new();
    for _ in 0..100 {
        names = seen
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| &s.spans)
            .filter(|s| hex(&s.trace_id) == trace_id)
            .map(|s| s.name.clone())
            .collect();
        if wanted.iter().all(|w| names.iter().any(|n| n == w)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in wanted {
        assert!(names.iter().any(|n| n == w), "no `{w}` span in {names:?}");
    }
    // One tree: the request span continues the caller's span, every other span hangs under
    // it, and the upstream got the upstream span's own id as its parent.
    let received = seen.lock().unwrap().clone();
    let resources: Vec<_> = received.iter().flat_map(|r| &r.resource_spans).collect();
    let service = resources[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .find(|a| a.key == "service.name");
    assert!(format!("{service:?}").contains("toolbridge"), "{service:?}");
    let spans: Vec<_> = resources
        .iter()
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .filter(|s| hex(&s.trace_id) == trace_id)
        .collect();
    let span = |name: &str| *spans.iter().find(|s| s.name == name).unwrap();
    let request = span("request");
    assert_eq!(hex(&request.parent_span_id), "00f067aa0ba902b7");
    let ids: Vec<String> = spans.iter().map(|s| hex(&s.span_id)).collect();
    for s in &spans {
        if s.name != "request" {
            assert!(
                ids.contains(&hex(&s.parent_span_id)),
                "`{}` has no parent in the trace",
                s.name
            );
        }
    }
    assert_eq!(
        traceparent.split('-').nth(2),
        Some(hex(&span("upstream").span_id).as_str())
    );
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn sighup_reloads_the_route_while_an_open_stream_finishes() {
    let upstream = FakeUpstream::start().await;
    let chunks = text_stream(&["one", " two", " three", " four"], "stop");
    let pieces: Vec<String> = chunks
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(std::iter::once("data: [DONE]\n\n".to_owned()))
        .collect();
    upstream.push(Reply::Stream {
        pieces,
        pause: Duration::from_millis(150),
    });
    let dir = temp_dir("reload");
    let file = dir.join("config.toml");
    std::fs::write(&file, config(&upstream, "old-model", "")).unwrap();
    let store = format!("sqlite://{}", dir.join("store.db").display());
    let gateway = start(&file, &store, &[]).await;

    let mut stream = client()
        .post(gateway.url("/v1/responses"))
        .json(&json!({"model": "m", "input": "count", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let mut body = String::new();
    while !body.contains("response.output_text.delta") {
        let chunk = stream.chunk().await.unwrap().expect("stream still open");
        body.push_str(std::str::from_utf8(&chunk).unwrap());
    }

    // A broken file is refused and changes nothing; then the real change applies.
    std::fs::write(&file, "this is = not [valid").unwrap();
    hangup(gateway.pid());
    tokio::time::sleep(Duration::from_millis(200)).await;
    std::fs::write(&file, config(&upstream, "new-model", "")).unwrap();
    hangup(gateway.pid());

    upstream.set_fallback(Reply::json(completion("ok", "stop")));
    let mut model = String::new();
    for _ in 0..50 {
        let response = client()
            .post(gateway.url("/v1/responses"))
            .json(&json!({"model": "m", "input": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{}", gateway.stderr());
        model = upstream.last_body()["model"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if model == "new-model" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(model, "new-model", "{}", gateway.stderr());
    assert!(
        gateway.stderr().contains("config reload rejected"),
        "{}",
        gateway.stderr()
    );

    while let Some(chunk) = stream.chunk().await.unwrap() {
        body.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(body.contains("response.completed"), "{body}");
    assert_eq!(upstream.requests()[0].body["model"], "old-model");
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

fn hangup(pid: u32) {
    let status = std::process::Command::new("kill")
        .arg("-HUP")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// `toolbridge trace show ID` against `store`, with the gateway's config `file`.
async fn trace_show(store: &str, file: &Path, id: &str) -> std::process::Output {
    tokio::process::Command::new(BIN)
        .env_clear()
        .env("TOOLBRIDGE_STORE_URL", store)
        .args(["trace", "show", id, "--config"])
        .arg(file)
        .output()
        .await
        .unwrap()
}

/// The capture of request `id`, once it is written (up to 5 s); `null` if it never is.
async fn capture_once_written(store: &str, file: &Path, id: &str) -> serde_json::Value {
    for _ in 0..50 {
        let out = trace_show(store, file, id).await;
        if out.status.success() {
            return serde_json::from_slice(&out.stdout).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    serde_json::Value::Null
}

#[tokio::test]
async fn a_stream_the_client_closes_is_still_captured() {
    let upstream = FakeUpstream::start().await;
    let mut pieces: Vec<String> = text_stream(&["one", " two", " three", " four"], "stop")
        .iter()
        .map(|p| format!("data: {p}\n\n"))
        .collect();
    pieces.push("data: [DONE]\n\n".to_owned());
    upstream.push(Reply::Stream {
        pieces,
        pause: Duration::from_millis(300),
    });
    let dir = temp_dir("capture-closed");
    let file = dir.join("config.toml");
    std::fs::write(
        &file,
        config(&upstream, "up-model", "[capture]\nenabled = true\n"),
    )
    .unwrap();
    let store = format!("sqlite://{}", dir.join("store.db").display());
    let gateway = start(&file, &store, &[]).await;
    let mut response = client()
        .post(gateway.url("/v1/responses"))
        .json(&json!({"model": "m", "input": "a question left early", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", gateway.stderr());
    let id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    // The first event, then the client goes away mid-stream.
    let _ = response.chunk().await.unwrap();
    drop(response);

    let capture = capture_once_written(&store, &file, &id).await;
    assert_eq!(capture["request_id"], id.as_str(), "{}", gateway.stderr());
    assert_eq!(capture["status"], 499);
    assert_eq!(capture["request"]["input"], "a question left early");
    assert_eq!(capture["upstream"][0]["body"]["model"], "up-model");
    assert!(capture["response"].is_null(), "{capture}");
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_background_run_is_captured_when_it_ends() {
    let upstream = FakeUpstream::start().await;
    upstream.push(Reply::Delayed {
        pause: Duration::from_millis(300),
        reply: Box::new(Reply::json(completion("done in the background", "stop"))),
    });
    let dir = temp_dir("capture-background");
    let file = dir.join("config.toml");
    std::fs::write(
        &file,
        config(&upstream, "up-model", "[capture]\nenabled = true\n"),
    )
    .unwrap();
    let store = format!("sqlite://{}", dir.join("store.db").display());
    let gateway = start(&file, &store, &[]).await;
    let response = client()
        .post(gateway.url("/v1/responses"))
        .json(&json!({"model": "m", "input": "work on it", "background": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", gateway.stderr());
    let id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let queued: serde_json::Value = response.json().await.unwrap();
    assert_eq!(queued["status"], "queued");

    // Written once the run has ended, with its final response.
    let capture = capture_once_written(&store, &file, &id).await;
    assert_eq!(capture["request_id"], id.as_str(), "{}", gateway.stderr());
    assert_eq!(capture["request"]["background"], true);
    assert_eq!(capture["upstream"][0]["body"]["model"], "up-model");
    assert_eq!(capture["response"]["status"], "completed", "{capture}");
    assert_eq!(capture["response"]["id"], queued["id"]);
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn trace_show_prints_a_captured_request() {
    let upstream = FakeUpstream::start().await;
    upstream.push(Reply::json(completion("captured answer", "stop")));
    let dir = temp_dir("capture");
    let file = dir.join("config.toml");
    std::fs::write(
        &file,
        config(
            &upstream,
            "up-model",
            "[capture]\nenabled = true\nmax_bytes = 4096\n\n[logging]\nformat = \"json\"\n",
        ),
    )
    .unwrap();
    let store = format!("sqlite://{}", dir.join("store.db").display());
    let gateway = start(&file, &store, &[]).await;
    let response = client()
        .post(gateway.url("/v1/responses"))
        .header("authorization", "Bearer not-a-real-secret")
        .json(&json!({"model": "m", "input": "the captured question"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", gateway.stderr());
    let id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.text().await.unwrap();

    let out = trace_show(&store, &file, &id).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let capture: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(capture["request_id"], id.as_str());
    assert_eq!(capture["request"]["input"], "the captured question");
    assert_eq!(capture["upstream"][0]["body"]["model"], "up-model");
    assert!(stdout.contains("captured answer"), "{stdout}");
    // Logs never carry headers or content.
    let logs = gateway.stderr();
    // JSON lines; those logged while the request was served name it.
    let forwarding: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["fields"]["message"] == "forwarding")
        .collect();
    assert_eq!(forwarding.len(), 1, "{logs}");
    assert_eq!(
        forwarding[0]["spans"][0]["request_id"],
        id.as_str(),
        "{logs}"
    );
    assert!(!logs.contains("not-a-real-secret"), "{logs}");
    assert!(!logs.contains("the captured question"), "{logs}");
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn check_describes_the_operations_sections_and_refuses_bad_ones() {
    let upstream = FakeUpstream::start().await;
    let dir = temp_dir("check");
    let good = dir.join("good.toml");
    let extra = "store_url = \"none\"\n[metrics]\npath = \"/ops/metrics\"\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n";
    std::fs::write(&good, config(&upstream, "up-model", extra)).unwrap();
    let out = tokio::process::Command::new(BIN)
        .env_clear()
        .arg("check")
        .arg("--config")
        .arg(&good)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("metrics: /ops/metrics"), "{stdout}");
    assert!(
        stdout.contains("http://127.0.0.1:4318/v1/traces"),
        "{stdout}"
    );
    assert!(stdout.contains("request capture: off"), "{stdout}");
    assert!(stdout.contains("sampler parentbased_always_on"), "{stdout}");

    // The sampler comes from the environment, and a wrong one is refused by name.
    let out = tokio::process::Command::new(BIN)
        .env_clear()
        .env("OTEL_TRACES_SAMPLER", "traceidratio")
        .env("OTEL_TRACES_SAMPLER_ARG", "1.5")
        .arg("check")
        .arg("--config")
        .arg(&good)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("OTEL_TRACES_SAMPLER_ARG"), "{stderr}");

    let bad = dir.join("bad.toml");
    let extra = "store_url = \"none\"\n[capture]\nenabled = true\n";
    std::fs::write(&bad, config(&upstream, "up-model", extra)).unwrap();
    let out = tokio::process::Command::new(BIN)
        .env_clear()
        .arg("check")
        .arg("--config")
        .arg(&bad)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("capture.enabled"));
    let _ = std::fs::remove_dir_all(&dir);
}
