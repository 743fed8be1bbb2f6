//! Ring 3: the real `toolbridge` binary as a separate process: `--version`, `check` with a valid
//! config, an invalid one and none at all, a zero-config `serve` streaming through a fake Chat
//! Completions upstream, and a graceful shutdown on SIGTERM while a stream is in flight.
//!
//! Every child runs with a cleared environment (PATH only, plus what the test sets), is killed
//! when dropped, and every test is bounded in time so that nothing can hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use toolbridge_testkit::tempdir::TempDir;

use serde_json::{Value, json};
use tokio::process::Command;
use toolbridge_testkit::chat::text_stream;
use toolbridge_testkit::sse::{self, Event};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
const UPSTREAM_KEY: &str = "sk-binary-test-upstream";
/// The bound on every whole test.
const TEST_LIMIT: Duration = Duration::from_secs(60);

/// Runs a test body under [`TEST_LIMIT`].
async fn bounded<F: Future<Output = ()>>(body: F) {
    tokio::time::timeout(TEST_LIMIT, body)
        .await
        .expect("the test ran past its time limit");
}

/// The binary with a cleared environment (PATH kept), killed when dropped.
fn toolbridge() -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs the binary to completion and returns (status, stdout, stderr).
async fn run(mut cmd: Command) -> (ExitStatus, String, String) {
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("the binary did not exit in time")
        .expect("the binary runs");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A running `toolbridge serve` in zero-config mode, pointed at a fake upstream.
async fn start_gateway(upstream: &FakeUpstream) -> GatewayProcess {
    GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
            ("TOOLBRIDGE_UPSTREAM_API_KEY", UPSTREAM_KEY.to_owned()),
        ],
    )
    .await
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("reqwest client")
}

fn terminal_count(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(
                e.data["type"].as_str(),
                Some("response.completed" | "response.failed" | "response.incomplete")
            )
        })
        .count()
}

fn joined_deltas(events: &[Event]) -> String {
    events
        .iter()
        .filter(|e| e.data["type"] == "response.output_text.delta")
        .map(|e| e.data["delta"].as_str().unwrap_or_default())
        .collect()
}

/// The text of a final response object's first message.
fn final_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().cloned().unwrap_or_default())
        .filter(|part| part["type"] == "output_text")
        .map(|part| part["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn version_prints_the_crate_version() {
    bounded(async {
        let mut cmd = toolbridge();
        cmd.arg("--version");
        let (status, stdout, stderr) = run(cmd).await;
        assert!(status.success(), "{status}: {stderr}");
        assert_eq!(
            stdout.trim(),
            format!("toolbridge {}", env!("CARGO_PKG_VERSION"))
        );
    })
    .await;
}

#[tokio::test]
async fn check_prints_the_routes_of_a_valid_config() {
    bounded(async {
        let dir = TempDir::new("binary-check-valid");
        let path = dir.write(
            "toolbridge.toml",
            r#"
listen = "127.0.0.1:0"

[providers.main]
base_url = "http://127.0.0.1:9/v1/"
api_key_env = "MAIN_KEY"
preset = "deepseek"

[providers.local]
base_url = "http://127.0.0.1:11434/v1"
preset = "ollama"

[providers.claude]
dialect = "anthropic"
base_url = "http://127.0.0.1:9/anthropic/v1"

[[routes]]
model = "fast"
provider = "main"
upstream_model = "deepseek-chat"

[[routes]]
model = "llama*"
provider = "local"

[[routes]]
model = "*"
provider = "main"
"#,
        );
        let mut cmd = toolbridge();
        cmd.arg("check").arg("--config").arg(&path);
        let (status, stdout, stderr) = run(cmd).await;
        assert!(status.success(), "{status}\nstdout:\n{stdout}\nstderr:\n{stderr}");
        for expected in [
            "listen: 127.0.0.1:0\n",
            "gateway keys: none (no authentication)\n",
            "  main: http://127.0.0.1:9/v1 (preset deepseek, key not set)\n",
            "  local: http://127.0.0.1:11434/v1 (preset ollama, key not set)\n",
            "  claude: http://127.0.0.1:9/anthropic/v1 (anthropic dialect, preset anthropic, key not set)\n",
            "routes:\n  fast -> main (as deepseek-chat)\n  llama* -> local (same model name)\n  * -> main (same model name)\n",
            "config ok\n",
        ] {
            assert!(
                stdout.contains(expected),
                "stdout lacks {expected:?}:\n{stdout}"
            );
        }

        // The key is reported as set when its variable is.
        let mut cmd = toolbridge();
        cmd.arg("check")
            .arg("--config")
            .arg(&path)
            .env("MAIN_KEY", "sk-main");
        let (status, stdout, _) = run(cmd).await;
        assert!(status.success());
        assert!(
            stdout.contains("(preset deepseek, key set)"),
            "{stdout}"
        );
        assert!(!stdout.contains("sk-main"), "the key itself is printed:\n{stdout}");
    })
    .await;
}

/// Issue 44: `toolbridge check | head` panicked ("failed printing to stdout: Broken pipe") when
/// the reader had gone; every printing command now ends quietly and successfully instead.
#[tokio::test]
async fn printing_commands_end_quietly_when_stdout_is_a_closed_pipe() {
    bounded(async {
        let dir = TempDir::new("binary-closed-stdout");
        let request = dir.write("request.json", r#"{"model":"m","input":"hi"}"#);
        let request = request.to_str().unwrap();
        let commands: [&[&str]; 4] = [
            &["check"],
            &["providers"],
            &["plan", "--provider", "openai", request],
            &["keys", "hash"],
        ];
        for args in commands {
            // The reading end is closed before the child writes, as `head` closes it after its
            // lines: every write to stdout then fails with EPIPE.
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            let mut cmd = toolbridge();
            cmd.args(args)
                .env("TOOLBRIDGE_UPSTREAM_URL", "http://127.0.0.1:9/v1")
                .stdout(Stdio::from(writer))
                .stderr(Stdio::piped());
            // Spawned, not `output()`, which would pipe stdout to this process instead.
            let child = cmd.spawn().expect("the binary runs");
            let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
                .await
                .expect("the binary did not exit in time")
                .expect("the binary ends");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
            assert!(out.status.success(), "{args:?}: {}\n{stderr}", out.status);
        }
    })
    .await;
}

#[tokio::test]
async fn check_rejects_an_unknown_preset_naming_the_field() {
    bounded(async {
        let dir = TempDir::new("binary-check-invalid");
        let path = dir.write(
            "toolbridge.toml",
            r#"
[providers.main]
base_url = "http://127.0.0.1:9/v1"
preset = "no-such-preset"

[[routes]]
model = "*"
provider = "main"
"#,
        );
        let mut cmd = toolbridge();
        cmd.arg("check").arg("--config").arg(&path);
        let (status, stdout, stderr) = run(cmd).await;
        assert!(!status.success(), "an invalid config passed:\n{stdout}");
        assert!(
            stderr.contains("providers.main.preset"),
            "stderr does not name the field:\n{stderr}"
        );
        assert!(stderr.contains("no-such-preset"), "{stderr}");
        assert!(!stdout.contains("config ok"), "{stdout}");
    })
    .await;
}

#[tokio::test]
async fn check_without_config_or_upstream_url_names_the_variable() {
    bounded(async {
        let mut cmd = toolbridge();
        cmd.arg("check");
        let (status, stdout, stderr) = run(cmd).await;
        assert!(
            !status.success(),
            "check passed with nothing to check:\n{stdout}"
        );
        assert!(
            stderr.contains("TOOLBRIDGE_UPSTREAM_URL"),
            "stderr does not name TOOLBRIDGE_UPSTREAM_URL:\n{stderr}"
        );
    })
    .await;
}

#[tokio::test]
async fn zero_config_serve_streams_a_response_through_the_upstream() {
    bounded(async {
        let upstream = FakeUpstream::start().await;
        upstream.push(Reply::sse(text_stream(
            &["Hello", " from", " upstream."],
            "stop",
        )));
        let gateway = start_gateway(&upstream).await;

        let response = client()
            .post(gateway.url("/v1/responses"))
            .json(&json!({"model": "gpt-test", "input": "Say hello", "stream": true}))
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(response.status().as_u16(), 200, "{}", gateway.stderr());
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        let text = response.text().await.expect("the stream body");
        let events = sse::parse(&text);
        let types = sse::types(&events);
        assert_eq!(types.first().map(String::as_str), Some("response.created"));
        assert_eq!(
            types.last().map(String::as_str),
            Some("response.completed"),
            "{types:?}"
        );
        assert_eq!(terminal_count(&events), 1, "{types:?}");
        assert_eq!(joined_deltas(&events), "Hello from upstream.");
        let completed = &events[events.len() - 1].data["response"];
        assert_eq!(completed["status"], "completed");
        assert_eq!(final_text(completed), "Hello from upstream.");

        let requests = upstream.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].path, "/v1/chat/completions");
        assert_eq!(
            requests[0].headers["authorization"],
            format!("Bearer {UPSTREAM_KEY}").as_str()
        );
        assert_eq!(requests[0].body["model"], "gpt-test");
        assert_eq!(requests[0].body["stream"], true);
        // stderr is a pipe here, not a terminal: the text log lines carry no colour codes.
        let logs = gateway.stderr();
        assert!(logs.contains("INFO"), "{logs}");
        assert!(
            !logs.contains('\u{1b}'),
            "colour codes in a piped log: {logs:?}"
        );

        gateway.kill().await;
    })
    .await;
}

#[tokio::test]
async fn sigterm_lets_an_in_flight_stream_finish_then_exits_zero() {
    bounded(async {
        let upstream = FakeUpstream::start().await;
        // A role chunk, six text chunks, a finish chunk, a usage chunk and `[DONE]`: ten pieces,
        // two seconds in all.
        let chunks = text_stream(&["one", " two", " three", " four", " five", " six"], "stop");
        let pieces: Vec<String> = chunks
            .iter()
            .map(|chunk| format!("data: {chunk}\n\n"))
            .chain(std::iter::once("data: [DONE]\n\n".to_owned()))
            .collect();
        assert_eq!(pieces.len(), 10);
        upstream.push(Reply::Stream {
            pieces,
            pause: Duration::from_millis(200),
        });
        let mut gateway = start_gateway(&upstream).await;

        let mut response = client()
            .post(gateway.url("/v1/responses"))
            .json(&json!({"model": "gpt-test", "input": "Count", "stream": true}))
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(response.status().as_u16(), 200, "{}", gateway.stderr());

        // Read until the first text delta, so the stream is certainly in flight.
        let mut body = String::new();
        while !body.contains("\"response.output_text.delta\"") {
            let chunk = response
                .chunk()
                .await
                .expect("read the stream")
                .unwrap_or_else(|| panic!("the stream ended early:\n{body}"));
            body.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }

        let kill = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(gateway.pid().to_string())
            .status()
            .expect("run kill");
        assert!(kill.success(), "kill -TERM failed");

        while let Some(chunk) = response.chunk().await.expect("read the rest of the stream") {
            body.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
        let events = sse::parse(&body);
        let types = sse::types(&events);
        assert_eq!(terminal_count(&events), 1, "{types:?}");
        assert_eq!(
            types.last().map(String::as_str),
            Some("response.completed"),
            "{types:?}\nstderr:\n{}",
            gateway.stderr()
        );
        assert_eq!(joined_deltas(&events), "one two three four five six");
        assert_eq!(
            final_text(&events[events.len() - 1].data["response"]),
            "one two three four five six"
        );

        let status = gateway.wait(Duration::from_secs(20)).await;
        assert!(
            status.success(),
            "toolbridge exited with {status}; stderr:\n{}",
            gateway.stderr()
        );
        // The listener is closed: a new connection is refused.
        assert!(
            client()
                .get(gateway.url("/v1/models"))
                .send()
                .await
                .is_err(),
            "the gateway still answers after exiting"
        );
    })
    .await;
}

/// `toolbridge providers` prints every preset's matrix from the real planner and profiles: the
/// whole output is a snapshot (a profile or planner change shows up in review), and the rows
/// users rely on most are asserted directly.
#[tokio::test]
async fn providers_prints_every_presets_matrix() {
    bounded(async {
        let mut cmd = toolbridge();
        cmd.arg("providers");
        let (status, stdout, stderr) = run(cmd).await;
        assert!(status.success(), "{status}\nstderr:\n{stderr}");
        let presets = [
            "generic",
            "openai",
            "deepseek",
            "glm",
            "kimi",
            "qwen",
            "minimax",
            "mimo",
            "ollama",
            "vllm",
            "anthropic",
            "gemini",
            "responses",
            "deepseek-responses",
            "qwen-responses",
            "mimo-responses",
            "minimax-responses",
            "vllm-responses",
            "ollama-responses",
        ];
        for preset in presets {
            assert!(
                stdout.contains(&format!("provider: {preset}\n")),
                "no matrix for {preset}:\n{stdout}"
            );
        }
        let section = |name: &str| {
            let start = stdout.find(&format!("provider: {name}\n")).unwrap();
            let rest = &stdout[start + 1..];
            let end = rest
                .find("provider: ")
                .map_or(stdout.len(), |e| start + 1 + e);
            stdout[start..end].to_owned()
        };
        let row = |section: &str, tool: &str| {
            section
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{tool} ")))
                .unwrap_or_else(|| panic!("no {tool} row in:\n{section}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        let glm = section("glm");
        assert_eq!(
            row(&glm, "web_search"),
            "web_search native as glm_tool (native_web_search)"
        );
        assert_eq!(
            row(&glm, "custom"),
            "custom degraded as apply_patch (custom_as_function)"
        );
        assert_eq!(row(&glm, "developer"), "developer role sent as system");
        let kimi = section("kimi");
        assert_eq!(
            row(&kimi, "web_search"),
            "web_search native as kimi_builtin (native_web_search)"
        );
        assert_eq!(
            row(&kimi, "namespace"),
            "namespace degraded as repo__read (namespace_flattened)"
        );
        let anthropic = section("anthropic");
        assert!(
            anthropic.starts_with("provider: anthropic\ndialect: anthropic\n"),
            "{anthropic}"
        );
        assert_eq!(
            row(&anthropic, "web_search"),
            "web_search native as anthropic_server_tool (native_web_search)"
        );
        let gemini = section("gemini");
        assert_eq!(
            row(&gemini, "web_search"),
            "web_search native as gemini_google_search (native_web_search)"
        );
        // tool_choice and parameter rows come from each dialect's real translator.
        assert_eq!(
            row(&anthropic, "required"),
            r#"required tool_choice={"type":"any"}"#
        );
        assert_eq!(
            row(&gemini, "max_output_tokens"),
            r#"max_output_tokens generationConfig={"maxOutputTokens":256}"#
        );
        let responses = section("responses");
        assert_eq!(
            row(&responses, "custom"),
            "custom native as - (responses_native)"
        );
        assert_eq!(
            row(&responses, "reasoning"),
            r#"reasoning effort reasoning={"effort":"high"}"#
        );
        // A native Responses endpoint that rejects `custom` and `namespace` gets them planned.
        let deepseek = section("deepseek-responses");
        assert!(
            deepseek.contains(
                "plaintext reasoning: replayed on turns with calls, sealed into encrypted_content"
            ),
            "{deepseek}"
        );
        assert_eq!(
            row(&deepseek, "custom"),
            "custom degraded as apply_patch (custom_as_function)"
        );
        assert_eq!(
            row(&deepseek, "namespace"),
            "namespace degraded as repo__read (namespace_flattened)"
        );
        assert_eq!(
            row(&deepseek, "web_search"),
            "web_search native as - (responses_native)"
        );
        assert!(
            deepseek.contains("unknown request fields: drop; dropped: prompt_cache_key"),
            "{deepseek}"
        );
        let openai = section("openai");
        assert_eq!(row(&openai, "developer"), "developer role kept");
        insta::assert_snapshot!("providers_matrix", stdout);
    })
    .await;
}

/// With a config, the matrix is the configured provider's: its profile patches and per-model
/// patches apply, and a name that matches nothing is an error naming the presets.
#[tokio::test]
async fn providers_applies_config_patches_and_refuses_unknown_names() {
    bounded(async {
        let dir = TempDir::new("binary-providers");
        let path = dir.write(
            "toolbridge.toml",
            r#"
[providers.zai]
base_url = "http://127.0.0.1:9/v1"
preset = "glm"

[providers.zai.profile.tools]
web_search = "none"

[providers.zai.models."glm-strict".profile.tools]
unsupported = "reject"

[providers.claude]
dialect = "anthropic"
base_url = "http://127.0.0.1:9/v1"

[[routes]]
model = "*"
provider = "zai"
"#,
        );
        let mut cmd = toolbridge();
        cmd.arg("providers").arg("--config").arg(&path);
        let (status, stdout, stderr) = run(cmd).await;
        assert!(status.success(), "{status}\nstderr:\n{stderr}");
        // An Anthropic provider: the planner's tool rows, and no Chat rows that would be wrong.
        let claude = &stdout[..stdout.find("provider: zai").unwrap()];
        assert!(
            claude.starts_with("provider: claude (anthropic)\ndialect: anthropic\n"),
            "{stdout}"
        );
        assert!(
            claude.contains("custom                 degraded"),
            "{claude}"
        );
        assert!(
            claude.contains(r#"  required               tool_choice={"type":"any"}"#)
                && claude.contains("parameters (what the translator sends")
                && !claude.contains("profile (Chat dialect)"),
            "{claude}"
        );
        let stdout = &stdout[stdout.find("provider: zai").unwrap()..];
        assert!(stdout.starts_with("provider: zai (glm)\n"), "{stdout}");
        assert!(
            stdout.contains("web_search             ignored   as -"),
            "the patch did not turn web_search off:\n{stdout}"
        );

        let mut cmd = toolbridge();
        cmd.arg("providers").arg("--config").arg(&path).args([
            "--provider",
            "zai",
            "--model",
            "glm-strict",
        ]);
        let (status, stdout, stderr) = run(cmd).await;
        assert!(status.success(), "{status}\nstderr:\n{stderr}");
        assert!(
            stdout.contains("code_interpreter       rejected"),
            "the per-model patch did not apply:\n{stdout}"
        );

        let mut cmd = toolbridge();
        cmd.args(["providers", "--provider", "nope"]);
        let (status, _, stderr) = run(cmd).await;
        assert_eq!(status.code(), Some(1));
        assert!(
            stderr.contains("no provider `nope`") && stderr.contains("deepseek"),
            "{stderr}"
        );
    })
    .await;
}
