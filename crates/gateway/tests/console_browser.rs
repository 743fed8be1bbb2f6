//! Ring 3, the console in a real browser: the real `toolbridge` binary serves a three-turn
//! session of the real Codex CLI (two commands, then the answer, against a fake DeepSeek that
//! caches by DeepSeek's rules) and a request of the OpenAI Python SDK declaring a freeform tool
//! the provider cannot take as such (the plan degrades it); then headless Chromium, driven by
//! playwright-core (`tests/node/console_browser.mjs`), signs in with the keyboard, finds both
//! in the request list, reads the plan's decision and reason on the request page and each
//! turn's cached share on the session page, checks keyboard navigation and contrast, and saves
//! a screenshot of each page under `target/console-screenshots/`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_testkit::cache::{CacheSim, Report, Rules};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::dialects::{Answer, Call, Wire};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const TEAM_KEY: &str = "tb-console-browser-team";
/// The key the Codex runs of the testkit present.
const CODEX_KEY: &str = "gateway-key";
const DONE: &str = "Both commands ran.";

/// How many command results a Chat request carries: the step the task is at.
fn step(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count())
}

/// Two commands, then the answer: three requests.
fn script(request: &Recorded) -> Option<Reply> {
    let step = step(&request.body);
    let answer = if step < 2 {
        Answer::of(
            vec![Call {
                id: format!("call_{step}"),
                name: "exec_command".to_owned(),
                namespace: None,
                custom: false,
                arguments: json!({"cmd": format!("echo step-{step}")}),
            }],
            "",
        )
    } else {
        Answer::of(Vec::new(), DONE)
    };
    Some(Wire::Chat { think_tags: false }.stream(&answer))
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn gateway(codex: &FakeUpstream, sdk: &FakeUpstream, scratch: &Path) -> GatewayProcess {
    let config = scratch.join("toolbridge.toml");
    let keys: String = [(CODEX_KEY, "codex"), (TEAM_KEY, "browser")]
        .iter()
        .map(|(secret, name)| {
            format!(
                "[[keys]]\nname = \"{name}\"\nhash = \"{}\"\ntenant = \"team\"\n",
                toolbridge_gateway::hash_secret(secret)
            )
        })
        .collect();
    std::fs::write(
        &config,
        format!(
            r#"
[console]
enabled = true

[console.prices."*"]
input = 0.27
cached = 0.07
output = 1.1

[capture]
enabled = true

{keys}
[providers.codex]
base_url = "{}"
preset = "deepseek"
max_retries = 0

[providers.sdk]
base_url = "{}"
max_retries = 0

[[routes]]
model = "sdk-model"
provider = "sdk"
upstream_model = "sdk-upstream"

[[routes]]
model = "*"
provider = "codex"
upstream_model = "deepseek-chat"
"#,
            codex.base_url(),
            sdk.base_url()
        ),
    )
    .unwrap();
    let store = format!("sqlite://{}", scratch.join("store.db").display());
    GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", config.display().to_string()),
            ("TOOLBRIDGE_STORE_URL", store),
        ],
    )
    .await
}

/// The SDK request (with its raw response, for the request id); the request id. Run without
/// blocking: the fake upstreams answer on this test's runtime.
async fn sdk_request(python: &Path, gateway: &GatewayProcess) -> String {
    const SCRIPT: &str = r#"
import json, os
from openai import OpenAI
client = OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
raw = client.responses.with_raw_response.create(
    model="sdk-model",
    input="Add a line to notes.txt",
    tools=[{"type": "custom", "name": "apply_patch", "description": "Apply a patch",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}],
)
response = raw.parse()
print(json.dumps({"request_id": raw.headers.get("x-request-id"), "status": response.status}))
"#;
    let output = tokio::process::Command::new(python)
        .args(["-c", SCRIPT])
        .env("OPENAI_BASE_URL", gateway.url("/v1"))
        .env("OPENAI_API_KEY", TEAM_KEY)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        gateway.stderr()
    );
    let line: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(line["status"], "completed", "{line}");
    line["request_id"].as_str().unwrap().to_owned()
}

/// The Codex session the ledger holds, once it holds all of its turns.
async fn codex_session(gateway: &GatewayProcess, turns: usize) -> String {
    let client = reqwest::Client::new();
    for _ in 0..100 {
        let body: Value = client
            .get(gateway.url("/console/api/sessions"))
            .bearer_auth(TEAM_KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let found = body["sessions"].as_array().and_then(|s| {
            s.iter()
                .find(|s| s["turns"].as_u64() == Some(turns as u64))
                .map(|s| s["session"].as_str().unwrap().to_owned())
        });
        if let Some(session) = found {
            return session;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the ledger never held a session of {turns} turns")
}

#[tokio::test]
async fn the_console_shows_a_codex_session_and_an_sdk_request_in_a_real_browser() {
    let (Some(codex), Some(python), Some((chromium, playwright))) = (
        toolbridge_testkit::tools::codex_0171(),
        toolbridge_testkit::tools::python_with_openai(),
        toolbridge_testkit::tools::browser(),
    ) else {
        return;
    };
    let scratch =
        std::env::temp_dir().join(format!("toolbridge-console-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let scratch = Scratch(scratch);

    let codex_upstream = FakeUpstream::start().await;
    codex_upstream.set_gate(Arc::new(script));
    codex_upstream.set_cache(CacheSim::new(
        Wire::Chat { think_tags: false },
        Rules::automatic(64, 64),
        Report::DeepSeek,
    ));
    let sdk_upstream = FakeUpstream::start().await;
    sdk_upstream.push(Reply::json(toolbridge_testkit::chat::completion(
        "Done.", "stop",
    )));
    let gateway = gateway(&codex_upstream, &sdk_upstream, &scratch.0).await;

    let mut exec = CodexExec::new(&codex, &scratch.0.join("codex"), gateway.url("/v1"));
    exec.provider = "stream_max_retries = 0".to_owned();
    let run = exec.run("Run two commands, then say so.").await;
    assert_eq!(
        run.last_message.trim(),
        DONE,
        "{}\n{}\n{}",
        run.stdout,
        run.stderr,
        gateway.stderr()
    );
    let codex_requests = codex_upstream.requests().len();
    assert_eq!(codex_requests, 3);
    let sdk_request = sdk_request(&python, &gateway).await;
    let session = codex_session(&gateway, codex_requests).await;

    let shots = toolbridge_testkit::tools::workspace_root().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/console_browser.mjs");
    let output = tokio::process::Command::new("node")
        .arg(&script)
        .env("CONSOLE_URL", gateway.url(""))
        .env("CONSOLE_KEY", TEAM_KEY)
        .env("CHROMIUM", &chromium)
        .env("PLAYWRIGHT_DIR", &playwright)
        .env("SHOTS", &shots)
        .env("SDK_REQUEST", &sdk_request)
        .env("SESSION", &session)
        .env("CODEX_REQUESTS", codex_requests.to_string())
        .env("HOME", &scratch.0)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the browser's checks failed:\n{stdout}\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&output.stderr),
        gateway.stderr()
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(seen["first_focus"], "Skip to content");
    assert_eq!(seen["plan"][0][2], "degraded", "{seen}");
    assert_eq!(seen["turns"].as_array().unwrap().len(), codex_requests);
    for name in [
        "login",
        "requests",
        "request",
        "sessions",
        "session",
        "providers",
    ] {
        let shot = shots.join(format!("{name}.png"));
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000),
            "{}",
            shot.display()
        );
    }
}
