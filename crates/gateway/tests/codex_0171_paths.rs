//! Ring 3: the real Codex CLI 0.171.0 through the real `toolbridge` binary, on the optional
//! paths a gateway serves beside `/v1/responses`:
//!
//! - the model catalog: Codex fetches `GET /v1/models?client_version=0.171.0`
//!   (`model_catalog_url`), and for a slug it does not know it then takes the catalog's base
//!   instructions and declares the freeform `apply_patch` (which reaches a Chat provider as its
//!   degraded function), with no "Model metadata not found" warning;
//! - routing on Codex's request kind: with a small `model_context_window`, Codex compacts in the
//!   middle of a task (`request_kind: "compaction"` in `x-codex-turn-metadata`), and that
//!   request goes to the route for compaction, another provider, while the turns go to the
//!   main one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use toolbridge_testkit::chat::{chunk, usage_chunk};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

/// A scratch folder per test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("toolbridge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["home", "codex-home", "work", "tmp"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn start_gateway(scratch: &Scratch, config: &str) -> GatewayProcess {
    let path = scratch.0.join("toolbridge.toml");
    std::fs::write(&path, config).unwrap();
    GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", path.display().to_string()),
            ("UPSTREAM_KEY", "sk-fake".to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )
    .await
}

/// Codex's run against the gateway: `model`, with `extra` lines in the provider's table, `top`
/// keys and model discovery on.
fn codex_config(
    codex: &Path,
    scratch: &Scratch,
    model: &str,
    gateway: &GatewayProcess,
    extra: &str,
    top: &str,
) -> CodexExec {
    let mut exec = CodexExec::new(codex, &scratch.0, gateway.url("/v1"));
    exec.model = model.to_owned();
    exec.top = top.to_owned();
    exec.features = "api_key_model_discovery = true".to_owned();
    exec.provider = format!("stream_max_retries = 0\n{extra}");
    exec
}

/// Runs Codex with `prompt`; returns the last message, stdout and stderr.
async fn run_codex(exec: &CodexExec, prompt: &str) -> (String, String, String) {
    let run = exec.run(prompt).await;
    (run.last_message, run.stdout, run.stderr)
}

const MARK: &str = "You are the toolbridge catalog coder; answer tersely.";

fn text_reply(text: &str) -> Reply {
    Reply::sse(vec![
        chunk(json!({"role": "assistant", "content": text}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(100, 10),
    ])
}

#[tokio::test]
async fn codex_0171_takes_the_catalog_and_declares_the_freeform_apply_patch() {
    let Some(codex) = toolbridge_testkit::tools::codex_0171() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    upstream.set_fallback(text_reply("Done."));
    let scratch = Scratch::new("codex-catalog");
    let gateway = start_gateway(
        &scratch,
        &format!(
            r#"
[providers.upstream]
base_url = "{}"
api_key_env = "UPSTREAM_KEY"
max_retries = 0

[providers.upstream.models.coder-upstream]
context_window = 64000

[[routes]]
model = "toolbridge-coder"
provider = "upstream"
upstream_model = "coder-upstream"

[routes.catalog]
base_instructions = "{MARK}"

[[routes]]
model = "toolbridge-plain"
provider = "upstream"
upstream_model = "coder-upstream"
"#,
            upstream.base_url()
        ),
    )
    .await;
    let catalog_url = gateway.url("/v1/models");
    let config = codex_config(
        &codex,
        &scratch,
        "toolbridge-coder",
        &gateway,
        &format!("model_catalog_url = \"{catalog_url}\""),
        "",
    );
    let (last, stdout, stderr) = run_codex(&config, "Say done.").await;
    let context = || {
        format!(
            "stdout:\n{stdout}\nstderr:\n{stderr}\ngateway:\n{}",
            gateway.stderr()
        )
    };
    assert_eq!(last.trim(), "Done.", "{}", context());
    assert!(!stderr.contains("Model metadata"), "{}", context());
    // Codex asked for the catalog, as Codex.
    assert!(
        gateway.stderr().contains("codex model catalog served")
            && gateway.stderr().contains("0.171.0"),
        "{}",
        context()
    );

    let request = upstream.requests().last().unwrap().body.clone();
    // The catalog's base instructions replaced Codex's own (sent as the system message).
    let system = request["messages"][0]["content"].to_string();
    assert!(system.contains(MARK), "{system}");
    // The freeform apply_patch Codex declared reached the Chat provider as its degraded
    // function, with the patch as its one string argument.
    let tools = request["tools"].as_array().unwrap();
    let patch = tools
        .iter()
        .find(|t| t["function"]["name"] == "apply_patch")
        .unwrap_or_else(|| panic!("no apply_patch in {tools:#?}\n{}", context()));
    let parameters = &patch["function"]["parameters"];
    assert_eq!(parameters["type"], "object", "{patch}");
    let properties = parameters["properties"].as_object().unwrap();
    assert_eq!(properties.len(), 1, "{patch}");
    let (_, input) = properties.iter().next().unwrap();
    assert_eq!(input["type"], "string", "{patch}");

    // A route that sets no base instructions gets the gateway's default (Codex requires the
    // field: without it the whole catalog is dropped), and the freeform apply_patch.
    let config = codex_config(
        &codex,
        &scratch,
        "toolbridge-plain",
        &gateway,
        &format!("model_catalog_url = \"{catalog_url}\""),
        "",
    );
    let (last, _, stderr) = run_codex(&config, "Say done.").await;
    assert_eq!(last.trim(), "Done.", "{stderr}");
    let request = upstream.requests().last().unwrap().body.clone();
    let system = request["messages"][0]["content"].to_string();
    assert!(!system.contains(MARK));
    assert!(
        system.contains("served through the toolbridge gateway"),
        "{system}"
    );
    assert!(
        request["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "apply_patch")
    );
    gateway.kill().await;
}

const SUMMARY: &str = "HANDOFF: echo ran and printed hi; answer that the check is done.";

/// The main provider: the first turn runs a shell command and reports a context nearly full
/// (Codex compacts then); once the summary is back, the answer.
fn main_script(request: &Recorded) -> Option<Reply> {
    let body = &request.body;
    let text = body.to_string();
    if text.contains("HANDOFF:")
        || body["messages"]
            .as_array()?
            .iter()
            .any(|m| m["role"] == "tool")
    {
        return Some(text_reply("The check is done."));
    }
    let tools: Vec<&str> = body["tools"]
        .as_array()?
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    let (name, arguments) = if tools.contains(&"exec_command") {
        ("exec_command", json!({"cmd": "echo hi"}))
    } else if tools.contains(&"shell_command") {
        ("shell_command", json!({"command": "echo hi"}))
    } else {
        ("shell", json!({"command": ["echo", "hi"]}))
    };
    Some(Reply::sse(vec![
        chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(9000, 20),
    ]))
}

#[tokio::test]
async fn codex_0171_compaction_goes_to_the_route_for_compaction() {
    let Some(codex) = toolbridge_testkit::tools::codex_0171() else {
        return;
    };
    let main = FakeUpstream::start().await;
    main.set_gate(Arc::new(main_script));
    let summarizer = FakeUpstream::start().await;
    summarizer.set_fallback(text_reply(SUMMARY));
    let scratch = Scratch::new("codex-compaction-route");
    let gateway = start_gateway(
        &scratch,
        &format!(
            r#"
[providers.main]
base_url = "{}"
api_key_env = "UPSTREAM_KEY"
max_retries = 0

[providers.summarizer]
base_url = "{}"
api_key_env = "UPSTREAM_KEY"
max_retries = 0

[[routes]]
model = "*"
provider = "summarizer"
upstream_model = "long-context-summarizer"
request_kind = "compaction"

[[routes]]
model = "*"
provider = "main"
"#,
            main.base_url(),
            summarizer.base_url()
        ),
    )
    .await;
    let config = codex_config(
        &codex,
        &scratch,
        "gpt-5.5",
        &gateway,
        "",
        "model_context_window = 10000\nmodel_auto_compact_token_limit = 5000",
    );
    let (last, stdout, stderr) =
        run_codex(&config, "Run echo hi, then say the check is done.").await;
    let context = || {
        format!(
            "stdout:\n{stdout}\nstderr:\n{stderr}\ngateway:\n{}\nmain: {}\nsummarizer: {}",
            gateway.stderr(),
            main.requests().len(),
            summarizer.requests().len()
        )
    };
    assert_eq!(last.trim(), "The check is done.", "{}", context());

    // Codex's compaction request reached the summarizer, under the route's upstream model,
    // carrying Codex's own compaction prompt; no turn went there.
    let compactions = summarizer.requests();
    assert_eq!(compactions.len(), 1, "{}", context());
    let compaction = &compactions[0];
    assert_eq!(compaction.body["model"], "long-context-summarizer");
    assert!(
        compaction
            .body
            .to_string()
            .contains("CONTEXT CHECKPOINT COMPACTION"),
        "{}",
        compaction.body
    );
    // The turns went to the main provider, and the turn after the compaction started from
    // the summary.
    let turns = main.requests();
    assert!(turns.len() >= 2, "{}", context());
    assert!(
        turns
            .iter()
            .all(|r| !r.body.to_string().contains("CONTEXT CHECKPOINT COMPACTION"))
    );
    assert!(
        turns.last().unwrap().body.to_string().contains("HANDOFF:"),
        "{}",
        context()
    );
    gateway.kill().await;
}
