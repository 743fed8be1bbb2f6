//! Ring 3: the real Codex CLI 0.171.0 with multi-agent v2 on (`[features] multi_agent_v2`),
//! through a Chat preset, Anthropic and Gemini. Codex declares its sub-agent tools in
//! `namespace: "collaboration"` (`spawn_agent`, `wait_agent`, `send_message`, `followup_task`,
//! `interrupt_agent`, `list_agents`); the gateway offers them flattened
//! (`collaboration__spawn_agent`), and restores the model's call as a `function_call` with
//! `namespace` and `name`, so Codex really spawns the agent. The sub-agent's turns carry
//! `agent_name: "/root/finder"` in `x-codex-turn-metadata` (the parent's is `/root`), and a
//! route on `agent_name = "/root/*"` sends them to another upstream model.
//!
//! The session, as the fake upstream (in the dialect's real wire format) plays it:
//! 1. parent: calls `spawn_agent` (`task_name: "finder"`, `fork_turns: "none"`);
//! 2. sub-agent (its first input is the parent's task, an `agent_message`): answers text;
//! 3. parent, after the spawn's result: calls `wait_agent` until the sub-agent's final answer
//!    (another `agent_message`) is in its history, then answers with it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::dialects::{Answer, Call, Wire};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

/// The task the parent gives the sub-agent (`spawn_agent`'s `message`).
const TASK: &str = "Find the number hidden in the ledger.";
/// The sub-agent's final answer.
const FOUND: &str = "The sub-agent found 42.";
/// The parent's final answer, once it has read the sub-agent's.
const FINAL: &str = "The finder reports 42.";
/// The upstream models of the two routes.
const PARENT_MODEL: &str = "parent-model";
const SUB_MODEL: &str = "sub-agent-model";
/// Codex's developer message to a sub-agent (the root agent's says "You are `/root`, the
/// primary agent"): how the fake model knows whose turn it plays, whatever the route.
const SUB_AGENT_MARK: &str = "You are an agent in a team of agents";
/// The canonical name Codex gives the spawned agent (`task_name` under the root).
const SUB_AGENT_NAME: &str = "/root/finder";
/// The collaboration namespace's tools, as Codex 0.171 declares them.
const COLLABORATION: &[&str] = &[
    "followup_task",
    "interrupt_agent",
    "list_agents",
    "send_message",
    "spawn_agent",
    "wait_agent",
];
/// More waits than this and the script gives up (the sub-agent never answered).
const MAX_WAITS: usize = 4;

/// The function names a request offers, in any dialect.
fn offered(body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        for name in [&tool["function"]["name"], &tool["name"]] {
            if let Some(n) = name.as_str() {
                names.push(n.to_owned());
            }
        }
        for declaration in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(n) = declaration["name"].as_str() {
                names.push(n.to_owned());
            }
        }
    }
    names
}

/// The model a request asked the upstream for: the body's `model`, or Gemini's path
/// (`/v1/models/{model}:streamGenerateContent`).
fn upstream_model(request: &Recorded) -> String {
    if let Some(model) = request.body["model"].as_str() {
        return model.to_owned();
    }
    request
        .path
        .rsplit_once("/models/")
        .and_then(|(_, rest)| rest.split_once(':'))
        .map(|(model, _)| model.to_owned())
        .unwrap_or_default()
}

/// True for a sub-agent's turn (by what Codex told the model, not by the route).
fn is_sub_agent(request: &Recorded) -> bool {
    request.body.to_string().contains(SUB_AGENT_MARK)
}

/// A 400 that stops the session with a reason Codex prints.
fn refuse(message: String) -> Reply {
    Reply::error(400, json!({"error": {"message": message}}))
}

/// The model of both agents; `spawns` counts the parent's spawn calls.
fn script(wire: Wire, request: &Recorded, spawns: &AtomicUsize) -> Reply {
    if is_sub_agent(request) {
        return wire.stream(&Answer::of(Vec::new(), FOUND));
    }
    let text = request.body.to_string();
    if text.contains(FOUND) {
        return wire.stream(&Answer::of(Vec::new(), FINAL));
    }
    let offered = offered(&request.body);
    let call = |id: String, tool: &str, arguments: Value| {
        let name = format!("collaboration__{tool}");
        if !offered.contains(&name) {
            return refuse(format!("`{name}` is not offered: {offered:?}"));
        }
        let call = Call {
            id,
            name,
            namespace: None,
            custom: false,
            arguments,
        };
        wire.stream(&Answer::of(vec![call], ""))
    };
    // The spawn's result names the agent (`{"task_name":"/root/finder"}`); without it, the
    // spawn did not start one (Codex could not run the call), and a second spawn would not
    // either.
    if !text.contains(SUB_AGENT_NAME) {
        if spawns.fetch_add(1, Ordering::SeqCst) > 0 {
            return refuse("the spawn started no agent".to_owned());
        }
        return call(
            "call_spawn".to_owned(),
            "spawn_agent",
            json!({"task_name": "finder", "message": TASK, "fork_turns": "none"}),
        );
    }
    // Each wait's result says whether it timed out.
    let waits = text.matches("timed_out").count();
    if waits >= MAX_WAITS {
        return refuse(format!("no answer from the sub-agent after {waits} waits"));
    }
    call(
        format!("call_wait_{waits}"),
        "wait_agent",
        json!({"timeout_ms": 30000}),
    )
}

/// A `toolbridge serve` with one provider (`provider` is its TOML body), the sub-agents' turns
/// routed to [`SUB_MODEL`] and every other turn to [`PARENT_MODEL`], and a scratch folder.
async fn start_gateway(
    upstream: &FakeUpstream,
    name: &str,
    provider: &str,
) -> (PathBuf, GatewayProcess) {
    let scratch = std::env::temp_dir().join(format!(
        "toolbridge-codex-subagents-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let config = scratch.join("toolbridge.toml");
    std::fs::write(
        &config,
        format!(
            r#"[providers.upstream]
base_url = "{url}"
api_key_env = "UPSTREAM_KEY"
max_retries = 0
{provider}

# A sub-agent's agent_name is its task path under the root (`/root/finder`); the root's is
# `/root`, which this glob does not match.
[[routes]]
model = "*"
agent_name = "/root/*"
provider = "upstream"
upstream_model = "{SUB_MODEL}"

[[routes]]
model = "*"
provider = "upstream"
upstream_model = "{PARENT_MODEL}"
"#,
            url = upstream.base_url()
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
    (scratch, gateway)
}

/// One Codex run at a time: three Codex processes, each with a sub-agent, and their gateways
/// at once starve a small machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn subagent_session(name: &str, wire: Wire, provider: &str) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(codex) = toolbridge_testkit::tools::codex_0171() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    let spawns = AtomicUsize::new(0);
    upstream.set_gate(Arc::new(move |r: &Recorded| Some(script(wire, r, &spawns))));
    let (scratch, gateway) = start_gateway(&upstream, name, provider).await;
    let mut exec = CodexExec::new(&codex, &scratch.join("codex"), gateway.url("/v1"));
    exec.features = "multi_agent_v2 = true".to_owned();
    let run = exec
        .run("Spawn a sub-agent named finder to find the number in the ledger, wait for it, and report what it found.")
        .await;
    let all = upstream.requests();
    let context = || {
        let seen: Vec<(String, bool)> = all
            .iter()
            .map(|r| (upstream_model(r), is_sub_agent(r)))
            .collect();
        format!(
            "upstream requests (model, sub-agent): {seen:?}\nstdout:\n{}\nstderr:\n{}\ngateway stderr:\n{}",
            run.stdout,
            run.stderr,
            gateway.stderr()
        )
    };
    assert_eq!(run.last_message.trim(), FINAL, "{}", context());

    let (sub, parent): (Vec<&Recorded>, Vec<&Recorded>) = all.iter().partition(|r| is_sub_agent(r));
    // The parent: spawn, at least one wait, the final answer.
    assert!(parent.len() >= 3, "{}", context());
    assert!(!sub.is_empty(), "{}", context());
    // The parent's first request offered every collaboration tool, flattened.
    let first = offered(&parent[0].body);
    for tool in COLLABORATION {
        let flat = format!("collaboration__{tool}");
        assert!(first.contains(&flat), "`{flat}` not offered: {first:?}");
    }
    // Codex ran the restored spawn: its result, in the parent's next request, names the agent
    // it started, and that agent's turns reached the upstream.
    assert!(
        parent[1].body.to_string().contains(SUB_AGENT_NAME),
        "{}",
        context()
    );
    // Codex ran the restored wait (its JSON events show the collaboration tool call).
    let waited = run
        .stdout
        .lines()
        .any(|l| l.contains("\"collab_tool_call\"") && l.contains("\"wait\""));
    assert!(waited, "{}", context());
    // The route on `agent_name`: the sub-agent's turns went to its model, the parent's to the
    // other.
    for r in &parent {
        assert_eq!(upstream_model(r), PARENT_MODEL, "{}", context());
    }
    for r in &sub {
        assert_eq!(upstream_model(r), SUB_MODEL, "{}", context());
    }
    // The parent read the sub-agent's final answer (an `agent_message` from `/root/finder`).
    let last = parent.last().unwrap().body.to_string();
    assert!(last.contains(FOUND), "{}", context());
    // The sub-agent read its task: Codex hands it over as an `agent_message` whose payload is
    // an `encrypted_content` part holding the text the model wrote in `spawn_agent`'s
    // `message` (plain text: only OpenAI's server encrypts it), which a translating route must
    // render as text like the part beside it.
    let task = sub[0].body.to_string();
    assert!(
        task.contains(TASK),
        "the sub-agent's upstream request lacks its task `{TASK}`: {}",
        task.match_indices("Message from agent")
            .map(|(at, _)| &task[at..task.floor_char_boundary(at + 200)])
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = std::fs::remove_dir_all(&scratch);
    gateway.kill().await;
}

#[tokio::test]
async fn codex_spawns_a_sub_agent_routed_by_agent_name_through_a_chat_preset() {
    subagent_session("chat", Wire::Chat { think_tags: false }, "preset = \"glm\"").await;
}

#[tokio::test]
async fn codex_spawns_a_sub_agent_routed_by_agent_name_through_anthropic() {
    subagent_session("anthropic", Wire::Anthropic, "preset = \"anthropic\"").await;
}

#[tokio::test]
async fn codex_spawns_a_sub_agent_routed_by_agent_name_through_gemini() {
    subagent_session("gemini", Wire::Gemini, "preset = \"gemini\"").await;
}
