//! Ring 3: the real Codex CLI 0.171.0 through the real `toolbridge` binary, a whole task per
//! dialect, against fake providers that cache by each provider's documented rules
//! (`toolbridge_testkit::cache`) and report reads and writes in their own fields.
//!
//! - A shell task of six requests (five commands Codex runs, then the answer), on a Chat
//!   preset, Anthropic, Gemini and a native Responses upstream.
//! - A task that finds an MCP tool through `tool_search` mid-session and calls it three times,
//!   with a command between (six requests), on a Chat preset, Anthropic and Gemini.
//! - A task Codex compacts in the middle (its context window set small): Codex's compaction
//!   request (the history without the tools) and the turn after it (from the summary) are cold
//!   for any client; every other request begins with the one before.
//!
//! Each asserts that every upstream body begins with the one before it (the provider's cached
//! prefix is never broken) and that requests 2..N are served from the cache at 95% or more of
//! what the same cache serves a client that talks to the provider directly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_testkit::cache::{CacheSim, Report, Rules, prefix_break};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::dialects::{Answer, Call, Wire};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

struct Target {
    name: &'static str,
    provider: &'static str,
    wire: Wire,
    rules: Rules,
    report: Report,
}

fn chat() -> Target {
    Target {
        name: "deepseek",
        provider: "preset = \"deepseek\"",
        wire: Wire::Chat { think_tags: false },
        rules: Rules::automatic(64, 64),
        report: Report::DeepSeek,
    }
}

fn anthropic() -> Target {
    Target {
        name: "anthropic",
        provider: "dialect = \"anthropic\"",
        wire: Wire::Anthropic,
        rules: Rules::breakpoints(),
        report: Report::Anthropic,
    }
}

fn gemini() -> Target {
    Target {
        name: "gemini",
        provider: "dialect = \"gemini\"",
        wire: Wire::Gemini,
        rules: Rules::automatic(1, 1024),
        report: Report::Gemini,
    }
}

fn responses() -> Target {
    Target {
        name: "responses",
        provider: "dialect = \"responses\"",
        wire: Wire::Responses,
        rules: Rules::automatic(128, 1024),
        report: Report::Responses,
    }
}

/// How many tool results a request carries, in any dialect: the step the task is at.
fn results(body: &Value) -> usize {
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let chat = list(&body["messages"])
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    let anthropic = list(&body["messages"])
        .iter()
        .flat_map(|m| list(&m["content"]))
        .filter(|b| b["type"] == "tool_result")
        .count();
    let gemini = list(&body["contents"])
        .iter()
        .flat_map(|c| list(&c["parts"]))
        .filter(|p| p.get("functionResponse").is_some())
        .count();
    let responses = list(&body["input"])
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .count();
    chat + anthropic + gemini + responses
}

fn answer(calls: Vec<Call>, text: &str) -> Answer {
    Answer::of(calls, text)
}

fn call(step: usize, name: &str, arguments: Value) -> Call {
    Call {
        id: format!("call_{step}"),
        name: name.to_owned(),
        namespace: None,
        custom: false,
        arguments,
    }
}

const DONE: &str = "All five commands ran.";

/// The shell task: five commands, then the answer.
fn shell_script(wire: Wire, request: &Recorded) -> Option<Reply> {
    let step = results(&request.body);
    let reply = if step < 5 {
        answer(
            vec![call(
                step,
                "exec_command",
                json!({"cmd": format!("echo step-{step}")}),
            )],
            "",
        )
    } else {
        answer(Vec::new(), DONE)
    };
    Some(wire.stream(&reply))
}

const FOUND: &str = "mcp__kit__add";
const SUMS: &str = "The sums are 3, 7 and 11.";

/// The MCP task: search, add, add, a command, add, then the answer.
fn mcp_script(wire: Wire, request: &Recorded) -> Option<Reply> {
    let step = results(&request.body);
    let add = |a: i64, b: i64| {
        call(
            step,
            "call_found_tool",
            json!({"name": FOUND, "arguments": {"a": a, "b": b}}),
        )
    };
    let reply = match step {
        0 => answer(
            vec![call(
                step,
                "tool_search",
                json!({"query": "add two integers"}),
            )],
            "",
        ),
        1 => answer(vec![add(1, 2)], ""),
        2 => answer(vec![add(3, 4)], ""),
        3 => answer(
            vec![call(step, "exec_command", json!({"cmd": "echo halfway"}))],
            "",
        ),
        4 => answer(vec![add(5, 6)], ""),
        _ => answer(Vec::new(), SUMS),
    };
    Some(wire.stream(&reply))
}

/// A scratch folder per test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("toolbridge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn start_gateway(upstream: &FakeUpstream, scratch: &Scratch, t: &Target) -> GatewayProcess {
    let config = scratch.0.join("toolbridge.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.upstream]\nbase_url = \"{}\"\napi_key_env = \"UPSTREAM_KEY\"\nmax_retries = 0\n{}\n\n[[routes]]\nmodel = \"*\"\nprovider = \"upstream\"\nupstream_model = \"upstream-model\"\n",
            upstream.base_url(),
            t.provider
        ),
    )
    .unwrap();
    GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", config.display().to_string()),
            ("UPSTREAM_KEY", "sk-fake".to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )
    .await
}

/// One Codex run at a time: a Codex process, its sandboxed commands and a gateway each are a
/// lot for a small machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

type Script = fn(Wire, &Recorded) -> Option<Reply>;

/// Runs `prompt` through Codex against target `t` answering by `script`; asserts the answer,
/// the prefix property and the cached share; returns the share.
async fn measured(t: &Target, script: Script, prompt: &str, expected: &str, mcp: bool) -> f64 {
    let Some(codex) = toolbridge_testkit::tools::codex_0171() else {
        return 1.0;
    };
    let server = Path::new(env!("CARGO_BIN_EXE_toolbridge")).with_file_name("toolbridge-test-mcp");
    if mcp && !server.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is built by `cargo test --workspace`",
            server.display()
        );
        eprintln!("SKIPPED: {} is absent; run scripts/test", server.display());
        return 1.0;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let upstream = FakeUpstream::start().await;
    let wire = t.wire;
    upstream.set_gate(Arc::new(move |r: &Recorded| script(wire, r)));
    upstream.set_cache(CacheSim::new(t.wire, t.rules, t.report));
    let scratch = Scratch::new(&format!("codex-cache-{}-{mcp}", t.name));
    let gateway = start_gateway(&upstream, &scratch, t).await;
    let mut exec = CodexExec::new(&codex, &scratch.0.join("codex"), gateway.url("/v1"));
    exec.provider = "stream_max_retries = 0".to_owned();
    if mcp {
        exec.tables = format!(
            "\n[mcp_servers.kit]\ncommand = \"{}\"\nargs = [\"--stdio\"]\ndefault_tools_approval_mode = \"approve\"\n",
            server.display()
        );
    }
    let run = exec.run(prompt).await;
    let context = || {
        format!(
            "{}: stdout:\n{}\nstderr:\n{}\ngateway:\n{}",
            t.name,
            run.stdout,
            run.stderr,
            gateway.stderr()
        )
    };
    assert_eq!(run.last_message.trim(), expected, "{}", context());
    let bodies: Vec<Value> = upstream.requests().into_iter().map(|r| r.body).collect();
    assert!(
        bodies.len() >= 6,
        "{} requests; {}",
        bodies.len(),
        context()
    );
    assert_eq!(
        prefix_break(t.wire, &bodies),
        None,
        "{}: a request does not begin with the one before it",
        t.name
    );
    let cache = upstream.cache().unwrap();
    let share = cache.share_of_ideal().unwrap();
    assert!(
        share >= 0.95,
        "{}: cached share {share:.3} of a direct client's; served {:?}",
        t.name,
        cache.served
    );
    gateway.kill().await;
    share
}

#[tokio::test]
async fn a_codex_shell_task_is_served_from_the_cache_on_every_dialect() {
    let mut table = Vec::new();
    for t in [chat(), anthropic(), gemini(), responses()] {
        let share = measured(
            &t,
            shell_script,
            "Run five echo commands, then say they ran.",
            DONE,
            false,
        )
        .await;
        table.push(format!("{:<10} {share:.3}", t.name));
    }
    eprintln!(
        "Codex shell task, cached share of a direct client's:\n{}",
        table.join("\n")
    );
}

#[tokio::test]
async fn a_codex_task_that_finds_an_mcp_tool_keeps_the_cache() {
    let mut table = Vec::new();
    for t in [chat(), anthropic(), gemini()] {
        let share = measured(
            &t,
            mcp_script,
            "Use the kit MCP server to add 1+2, 3+4 and 5+6, and echo halfway between.",
            SUMS,
            true,
        )
        .await;
        table.push(format!("{:<10} {share:.3}", t.name));
    }
    eprintln!(
        "Codex MCP task, cached share of a direct client's:\n{}",
        table.join("\n")
    );
}

const SUMMARY: &str = "HANDOFF: three echo commands ran; run two more, then say they ran.";
const COMPACTED_DONE: &str = "All commands ran, before and after the compaction.";

/// The compaction task: commands until Codex compacts (its window is small), the summary for
/// the compaction request, then two more commands from the summary and the answer.
fn compaction_script(wire: Wire, request: &Recorded) -> Option<Reply> {
    let text = request.body.to_string();
    let step = results(&request.body);
    let reply = if text.contains("CONTEXT CHECKPOINT COMPACTION") {
        answer(Vec::new(), SUMMARY)
    } else if text.contains("HANDOFF:") {
        if step < 2 {
            answer(
                vec![call(
                    step + 10,
                    "exec_command",
                    json!({"cmd": format!("echo after-{step}")}),
                )],
                "",
            )
        } else {
            answer(Vec::new(), COMPACTED_DONE)
        }
    } else {
        answer(
            vec![call(
                step,
                "exec_command",
                json!({"cmd": format!("echo before-{step}")}),
            )],
            "",
        )
    };
    Some(wire.stream(&reply))
}

#[tokio::test]
async fn a_codex_task_compacted_midway_keeps_the_cache_around_the_compaction() {
    let Some(codex) = toolbridge_testkit::tools::codex_0171() else {
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().await;
    let t = anthropic();
    let upstream = FakeUpstream::start().await;
    let wire = t.wire;
    upstream.set_gate(Arc::new(move |r: &Recorded| compaction_script(wire, r)));
    upstream.set_cache(CacheSim::new(t.wire, t.rules, t.report));
    let scratch = Scratch::new("codex-cache-compaction");
    let gateway = start_gateway(&upstream, &scratch, &t).await;
    let mut exec = CodexExec::new(&codex, &scratch.0.join("codex"), gateway.url("/v1"));
    exec.provider = "stream_max_retries = 0".to_owned();
    // Codex's first request is about 9,500 tokens by the fake's count (its instructions and
    // tools), and each command adds about 80: it compacts after a few commands.
    exec.top = "model_context_window = 40000\nmodel_auto_compact_token_limit = 9700".to_owned();
    let run = exec
        .run("Run echo commands until told to stop, then say they ran.")
        .await;
    let context = || {
        format!(
            "stdout:\n{}\nstderr:\n{}\ngateway:\n{}",
            run.stdout,
            run.stderr,
            gateway.stderr()
        )
    };
    assert_eq!(run.last_message.trim(), COMPACTED_DONE, "{}", context());
    let bodies: Vec<Value> = upstream.requests().into_iter().map(|r| r.body).collect();
    let compaction = bodies
        .iter()
        .position(|b| b.to_string().contains("CONTEXT CHECKPOINT COMPACTION"))
        .unwrap_or_else(|| panic!("no compaction request; {}", context()));
    assert!(compaction >= 2, "{compaction}; {}", context());
    assert!(
        bodies.len() >= compaction + 3,
        "{} requests; {}",
        bodies.len(),
        context()
    );
    // Before the compaction, and from the summary on, each body begins with the one before.
    // The compaction request itself is Codex's rewrite: it carries the history without the
    // tools, so no client reads its prefix from the cache (the share's denominator says so).
    assert_eq!(prefix_break(t.wire, &bodies[..compaction]), None);
    assert_eq!(prefix_break(t.wire, &bodies[compaction + 1..]), None);
    let cache = upstream.cache().unwrap();
    let share = cache.share_of_ideal().unwrap();
    eprintln!(
        "Codex task compacted at request {compaction} of {}: cached share {share:.3} of a direct client's; served {:?}",
        bodies.len(),
        cache.served
    );
    assert!(share >= 0.95, "{share:.3}: {:?}", cache.served);
    gateway.kill().await;
}
