//! Ring 3: the real Codex CLI asks a question that needs the web, through a Chat provider with no
//! web search of its own: the gateway serves Codex's `web_search` tool with its own search (a
//! fake SearXNG backend on 127.0.0.1), runs the search inside the response, shows it to Codex as
//! a `web_search_call` item, and Codex prints the answer built from the search result.
//!
//! Codex declares `web_search` with `external_web_access: true` only under
//! `danger-full-access` (under `workspace-write` it is `false`, and the gateway keeps the search
//! out); the run uses that sandbox mode in a scratch folder.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;
use toolbridge_testkit::chat::{chunk, usage_chunk};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const QUESTION: &str = "On what date was toolbridge 1.0 released? Search the web.";
const FACT: &str = "toolbridge 1.0 was released on 2026-11-30.";

/// Round one searches; round two (which carries the search result) answers with it.
fn script(request: &Recorded) -> Option<Reply> {
    let body = &request.body;
    let messages = body["messages"].as_array()?;
    let result = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str().map(str::to_owned));
    let chunks = match result {
        None => {
            let offered = body["tools"]
                .as_array()?
                .iter()
                .any(|t| t["function"]["name"] == "web_search");
            if !offered {
                return Some(Reply::Json {
                    status: 400,
                    body: json!({"error": {"message": "no web_search function offered", "code": "bad_request"}}),
                    headers: Vec::new(),
                });
            }
            vec![
                chunk(json!({"role": "assistant", "content": ""}), None),
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_search", "type": "function",
                        "function": {"name": "web_search", "arguments": "{\"query\":\"toolbridge 1.0 release date\"}"}}]}),
                    None,
                ),
                chunk(json!({}), Some("tool_calls")),
            ]
        }
        Some(result) => {
            let answer = if result.contains("2026-11-30") {
                FACT.to_owned()
            } else {
                format!("The search found nothing useful: {result}")
            };
            vec![
                chunk(json!({"role": "assistant", "content": answer}), None),
                chunk(json!({}), Some("stop")),
            ]
        }
    };
    let mut chunks = chunks;
    chunks.push(usage_chunk(200, 20));
    Some(Reply::sse(chunks))
}

#[tokio::test]
async fn codex_answers_a_question_with_a_search_the_gateway_runs() {
    let Some(codex) = toolbridge_testkit::tools::codex() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(script));
    let search = FakeUpstream::start().await;
    search.set_fallback(Reply::json(json!({"results": [
        {"title": "toolbridge 1.0 released", "url": "https://example.com/toolbridge-1-0",
         "content": "The toolbridge 1.0 release shipped on 2026-11-30."}
    ]})));
    let search_url = search.base_url();
    let port = search_url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/v1")
        .to_owned();

    let scratch =
        std::env::temp_dir().join(format!("toolbridge-codex-search-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    for dir in ["home", "codex-home", "work", "tmp"] {
        std::fs::create_dir_all(scratch.join(dir)).unwrap();
    }
    let config = scratch.join("toolbridge.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[providers.upstream]
base_url = "{}"
api_key_env = "UPSTREAM_KEY"
max_retries = 0

[[routes]]
model = "*"
provider = "upstream"

[gateway_tools]
jq_isolation = false

[gateway_tools.web_search]
backend = "searxng"
url = "{search_url}"
allow_loopback_ports = [{port}]
"#,
            upstream.base_url()
        ),
    )
    .unwrap();
    let gateway = GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", config.display().to_string()),
            ("UPSTREAM_KEY", "sk-fake".to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )
    .await;
    std::fs::write(
        scratch.join("codex-home/config.toml"),
        format!(
            r#"model = "gpt-5.5"
model_provider = "gateway"
check_for_update_on_startup = false
web_search = "live"

[analytics]
enabled = false

[features]
plugins = false

[model_providers.gateway]
name = "gateway"
base_url = "{}"
wire_api = "responses"
env_key = "GATEWAY_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"#,
            gateway.url("/v1")
        ),
    )
    .unwrap();
    let last = scratch.join("last-message.txt");
    let output = tokio::time::timeout(
        Duration::from_secs(180),
        Command::new(&codex)
            .args([
                "exec",
                "--skip-git-repo-check",
                "--color",
                "never",
                "-s",
                "danger-full-access",
                "-C",
            ])
            .arg(scratch.join("work"))
            .arg("-o")
            .arg(&last)
            .args(["--json", QUESTION])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", scratch.join("home"))
            .env("CODEX_HOME", scratch.join("codex-home"))
            .env("TMPDIR", scratch.join("tmp"))
            .env("GATEWAY_API_KEY", "gateway-key")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("codex finishes in time")
    .expect("codex runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let context = || {
        format!(
            "stdout:\n{stdout}\nstderr:\n{stderr}\ngateway stderr:\n{}",
            gateway.stderr()
        )
    };
    let last_message = std::fs::read_to_string(&last).unwrap_or_default();
    assert_eq!(last_message.trim(), FACT, "{}", context());

    // Codex declared web_search; the provider got a web_search function instead, served by the
    // gateway, whose query reached the search backend.
    let first = upstream.requests().first().unwrap().body.clone();
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"web_search"), "{names:?}");
    let asked = search.requests();
    assert_eq!(asked.len(), 1, "{}", context());
    assert!(
        asked[0]
            .query
            .as_deref()
            .unwrap_or_default()
            .contains("q=toolbridge+1.0+release+date")
    );
    // Codex saw the search as a web_search_call item (its JSON event stream names it).
    let saw_search = stdout.lines().any(|line| {
        serde_json::from_str::<Value>(line)
            .map(|v| {
                v.to_string().contains("web_search")
                    || v.to_string().contains("toolbridge 1.0 release date")
            })
            .unwrap_or(false)
    });
    assert!(saw_search, "{}", context());
    let _ = std::fs::remove_dir_all(&scratch);
}
