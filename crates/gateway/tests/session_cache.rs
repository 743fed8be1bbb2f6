//! Ring 2: a whole session's prompt cache, through the gateway, on every dialect.
//!
//! A client replays a Codex-shaped session (long instructions, Codex's tools, reasoning, a
//! shell call, a freeform `apply_patch` edit, a second task in the same thread) the way Codex
//! does: every request resends the instructions, the tools and the whole history with the items
//! of each answer as they came. The fake upstream caches by its provider's documented rules
//! (`toolbridge_testkit::cache`) and reports reads and writes in the provider's own fields.
//!
//! For each target it asserts:
//! - the prefix property: each upstream body begins, block for block, with the one before it
//!   (`cache_control` marks aside, which move every turn and are not content);
//! - the cached share of requests 2..N is at least 95% of what the same fake cache serves a
//!   client that talks to the provider directly and only appends (each request reads all of the
//!   previous one);
//! - the client reads the cache's reads and writes in `usage` exactly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::cache::{CacheSim, Report, Rules, prefix_break};
use toolbridge_testkit::dialects::{Answer, Call, Wire};

/// One provider as a session sees it.
struct Target {
    preset: &'static str,
    dialect: &'static str,
    wire: Wire,
    rules: Rules,
    report: Report,
}

fn targets() -> Vec<Target> {
    let chat = Wire::Chat { think_tags: false };
    vec![
        Target {
            preset: "deepseek",
            dialect: "chat",
            wire: chat,
            rules: Rules::automatic(64, 64),
            report: Report::DeepSeek,
        },
        Target {
            preset: "kimi",
            dialect: "chat",
            wire: chat,
            rules: Rules::automatic(256, 256),
            report: Report::Moonshot,
        },
        Target {
            preset: "glm",
            dialect: "chat",
            wire: chat,
            rules: Rules::automatic(1, 1),
            report: Report::OpenAi,
        },
        Target {
            preset: "qwen",
            dialect: "chat",
            wire: chat,
            rules: Rules {
                automatic: Some((1, 256)),
                breakpoints: Some((1024, 20)),
            },
            report: Report::OpenAi,
        },
        Target {
            preset: "anthropic",
            dialect: "anthropic",
            wire: Wire::Anthropic,
            rules: Rules::breakpoints(),
            report: Report::Anthropic,
        },
        Target {
            preset: "gemini",
            dialect: "gemini",
            wire: Wire::Gemini,
            rules: Rules::automatic(1, 1024),
            report: Report::Gemini,
        },
        Target {
            preset: "deepseek-responses",
            dialect: "responses",
            wire: Wire::Responses,
            rules: Rules::automatic(64, 64),
            report: Report::Responses,
        },
        Target {
            preset: "responses",
            dialect: "responses",
            wire: Wire::Responses,
            rules: Rules::automatic(128, 1024),
            report: Report::Responses,
        },
    ]
}

async fn gateway(t: &Target) -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.up]
dialect = "{}"
preset = "{}"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[routes]]
model = "*"
provider = "up"
"#,
            t.dialect, t.preset
        )
    })
    .await
}

/// Instructions of Codex's size class (about 3,000 tokens): over every provider's minimum.
fn instructions() -> String {
    let line = "You are a coding agent running in a terminal. Keep edits small, run the tests, and say what changed.\n";
    line.repeat(120)
}

fn tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "description": "Runs a shell command.",
         "strict": false,
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"},
            "workdir": {"type": "string"}}, "required": ["cmd"], "additionalProperties": false}},
        {"type": "function", "name": "update_plan", "description": "Updates the task plan.",
         "strict": false,
         "parameters": {"type": "object", "properties": {"plan": {"type": "array",
            "items": {"type": "object", "properties": {"step": {"type": "string"},
            "status": {"type": "string"}}, "required": ["step", "status"]}}},
            "required": ["plan"], "additionalProperties": false}},
        {"type": "custom", "name": "apply_patch", "description": "Edits files with a patch.",
         "format": {"type": "text"}}
    ])
}

fn call(id: &str, name: &str, custom: bool, arguments: Value) -> Call {
    Call {
        id: id.to_owned(),
        name: name.to_owned(),
        namespace: None,
        custom,
        arguments,
    }
}

/// The model's answers, one a request, and what the user says before requests 1 and 5.
fn answers() -> Vec<Answer> {
    let thinking = |s: &str| vec![s.to_owned()];
    let answer = |reasoning: Vec<String>, text: &str, calls: Vec<Call>| Answer {
        reasoning,
        ..Answer::of(calls, text)
    };
    let patch =
        "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-    a - b\n+    a + b\n*** End Patch\n";
    // A custom call: a Responses upstream sends it as `custom_tool_call`, the other dialects
    // as the degraded function with its one `input` argument.
    let patch_args = json!({"input": patch});
    vec![
        answer(
            thinking("Look at the code first."),
            "",
            vec![call(
                "call_1",
                "exec_command",
                false,
                json!({"cmd": "cat src/lib.rs"}),
            )],
        ),
        answer(
            thinking("The sum subtracts."),
            "",
            vec![call("call_2", "apply_patch", true, patch_args)],
        ),
        answer(
            thinking("Run the tests."),
            "",
            vec![call(
                "call_3",
                "exec_command",
                false,
                json!({"cmd": "cargo test"}),
            )],
        ),
        answer(thinking("Done."), "Fixed `add`: it subtracted.", vec![]),
        answer(
            thinking("Add a test."),
            "",
            vec![call(
                "call_5",
                "update_plan",
                false,
                json!({"plan": [{"step": "write the test", "status": "in_progress"}]}),
            )],
        ),
        answer(
            thinking("Now run it."),
            "",
            vec![call(
                "call_6",
                "exec_command",
                false,
                json!({"cmd": "cargo test add"}),
            )],
        ),
        answer(
            thinking("All good."),
            "Added a test for `add`; it passes.",
            vec![],
        ),
    ]
}

/// One request of a session: what the user says before it (if anything) and the model's answer.
struct Step {
    user: Option<&'static str>,
    answer: Answer,
}

/// The three-turn coding task and a second task in the same thread.
fn coding_task() -> Vec<Step> {
    answers()
        .into_iter()
        .enumerate()
        .map(|(n, answer)| Step {
            user: match n {
                0 => Some("The `add` function is wrong; fix it."),
                4 => Some("Now add a test for it."),
                _ => None,
            },
            answer,
        })
        .collect()
}

/// Codex's client-run `tool_search` and the MCP namespace it finds (its 0.171 shapes).
fn search_tool() -> Value {
    json!({"type": "tool_search", "execution": "client",
        "description": "Search the tools of connected MCP servers.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
            "limit": {"type": "integer"}}, "required": ["query"], "additionalProperties": false}})
}

fn probe_namespace() -> Value {
    json!({"type": "namespace", "name": "mcp__probe", "description": "Tools in the mcp__probe namespace.",
        "tools": [{"type": "function", "name": "add_numbers", "description": "Add two integers.",
            "strict": false, "defer_loading": true,
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                "b": {"type": "integer"}}, "required": ["a", "b"]}}]})
}

/// A task that finds an MCP tool through `tool_search` mid-session, calls it twice (through
/// `call_found_tool`, the plan's stable function), and runs a command in between.
fn search_task() -> Vec<Step> {
    let reply = |calls: Vec<Call>, text: &str| Answer {
        reasoning: vec!["Thinking.".to_owned()],
        ..Answer::of(calls, text)
    };
    let add = |id: &str, a: u64, b: u64| {
        call(
            id,
            "call_found_tool",
            false,
            json!({"name": "mcp__probe__add_numbers", "arguments": {"a": a, "b": b}}),
        )
    };
    vec![
        Step {
            user: Some("Add 2 and 3 with the probe server."),
            answer: reply(
                vec![call(
                    "call_ts_1",
                    "tool_search",
                    false,
                    json!({"query": "add numbers"}),
                )],
                "",
            ),
        },
        Step {
            user: None,
            answer: reply(vec![add("call_add_1", 2, 3)], ""),
        },
        Step {
            user: None,
            answer: reply(vec![], "2 + 3 = 5."),
        },
        Step {
            user: Some("And 4 and 5, then list the files."),
            answer: reply(vec![add("call_add_2", 4, 5)], ""),
        },
        Step {
            user: None,
            answer: reply(
                vec![call("call_ls", "exec_command", false, json!({"cmd": "ls"}))],
                "",
            ),
        },
        Step {
            user: None,
            answer: reply(vec![], "4 + 5 = 9; the files are listed above."),
        },
    ]
}

/// The output each call gets back, by call id, as Codex sends it.
fn output_for(item: &Value) -> Option<Value> {
    let id = item["call_id"].as_str()?;
    match item["type"].as_str()? {
        "function_call" => Some(json!({"type": "function_call_output", "call_id": id,
            "output": format!("output of {id}: ok\n{}", "line of output\n".repeat(20))})),
        "custom_tool_call" => Some(json!({"type": "custom_tool_call_output", "call_id": id,
            "output": "Success. Updated the following files:\nM src/lib.rs\n"})),
        "tool_search_call" => Some(json!({"type": "tool_search_output", "call_id": id,
            "status": "completed", "execution": "client", "tools": [probe_namespace()]})),
        _ => None,
    }
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// Runs a session with `tools`; returns the usage the client read for each request and the
/// items the model's calls came back as.
async fn session(
    t: &Target,
    h: &Harness,
    tools: &Value,
    steps: Vec<Step>,
) -> (Vec<Value>, Vec<Value>) {
    let mut input = Vec::new();
    let mut usages = Vec::new();
    let mut calls = Vec::new();
    for (n, step) in steps.into_iter().enumerate() {
        if let Some(text) = step.user {
            input.push(user(text));
        }
        h.upstream.push(t.wire.stream(&step.answer));
        let body = json!({
            "model": "m",
            "instructions": instructions(),
            "tools": tools,
            "tool_choice": "auto",
            "parallel_tool_calls": false,
            "reasoning": {"effort": "medium", "summary": "auto"},
            "store": false,
            "stream": true,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "thread-1",
            "input": input,
        });
        let events = h.post_stream(&body).await;
        let done = events
            .iter()
            .find(|e| e.name.as_deref() == Some("response.completed"))
            .unwrap_or_else(|| {
                let last = events
                    .last()
                    .map(|e| e.data.to_string())
                    .unwrap_or_default();
                panic!(
                    "{}: request {n} did not complete; last event: {:.2000}",
                    t.preset, last
                )
            });
        let response = &done.data["response"];
        usages.push(response["usage"].clone());
        for item in response["output"].as_array().unwrap() {
            input.push(item.clone());
            if let Some(output) = output_for(item) {
                calls.push(item.clone());
                input.push(output);
            }
        }
    }
    (usages, calls)
}

/// Runs `steps` against target `t` with a caching fake; asserts the prefix property, the usage
/// the client read, and the cached share; returns the share.
async fn measured(t: &Target, tools: &Value, steps: Vec<Step>) -> (f64, Vec<Value>) {
    let h = gateway(t).await;
    h.upstream
        .set_cache(CacheSim::new(t.wire, t.rules, t.report));
    let (usages, calls) = session(t, &h, tools, steps).await;
    let bodies: Vec<Value> = h.upstream.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), usages.len(), "{}", t.preset);
    assert_eq!(
        prefix_break(t.wire, &bodies),
        None,
        "{}: a request does not begin with the one before it",
        t.preset
    );
    let cache = h.upstream.cache().unwrap();
    for (n, (served, usage)) in cache.served.iter().zip(&usages).enumerate() {
        let details = &usage["input_tokens_details"];
        assert_eq!(
            (
                usage["input_tokens"].as_u64(),
                details["cached_tokens"].as_u64(),
                details["cache_write_tokens"].as_u64()
            ),
            (Some(served.input), Some(served.read), Some(served.write)),
            "{}: request {n}'s usage",
            t.preset
        );
    }
    let share = cache.share_of_ideal().unwrap();
    assert!(
        share >= 0.95,
        "{}: cached share {share:.3} of a direct client's; served {:?}",
        t.preset,
        cache.served
    );
    (share, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reads_what_the_turn_before_wrote_on_every_dialect() {
    let mut table = Vec::new();
    for t in targets() {
        let (share, _) = measured(&t, &tools(), coding_task()).await;
        table.push(format!("{:<18} {share:.3}", t.preset));
    }
    eprintln!(
        "coding task, cached share of a direct client's, requests 2..N:\n{}",
        table.join("\n")
    );
}

/// A tool found by `tool_search` mid-session is called without changing the tool list (the
/// plan's `call_found_tool`), so nothing cached before the search is lost; its calls come back
/// to the client as the MCP tool's own `function_call`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_found_mid_session_keeps_the_cache_on_every_dialect() {
    let mut tools = tools();
    tools.as_array_mut().unwrap().push(search_tool());
    let mut table = Vec::new();
    for t in targets().into_iter().filter(|t| t.preset != "responses") {
        let (share, calls) = measured(&t, &tools, search_task()).await;
        let added: Vec<(&str, &str, &str)> = calls
            .iter()
            .filter(|c| c["type"] == "function_call" && c["name"] == "add_numbers")
            .map(|c| {
                (
                    c["namespace"].as_str().unwrap_or_default(),
                    c["name"].as_str().unwrap_or_default(),
                    c["arguments"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            added,
            [
                ("mcp__probe", "add_numbers", r#"{"a":2,"b":3}"#),
                ("mcp__probe", "add_numbers", r#"{"a":4,"b":5}"#)
            ],
            "{}: {calls:#?}",
            t.preset
        );
        assert!(
            calls.iter().any(|c| c["type"] == "tool_search_call"),
            "{}",
            t.preset
        );
        table.push(format!("{:<18} {share:.3}", t.preset));
    }
    eprintln!(
        "tool_search task, cached share of a direct client's, requests 2..N:\n{}",
        table.join("\n")
    );
}

/// The operator's view of a session: the cache ledger has one row per answer, with what the
/// provider reported, over HTTP (`GET /v1/cache/sessions/{id}`) and from the command line
/// (`toolbridge cache SESSION`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_report_shows_each_turn_as_the_provider_billed_it() {
    let t = targets()
        .into_iter()
        .find(|t| t.preset == "anthropic")
        .unwrap();
    let h = gateway(&t).await;
    h.upstream
        .set_cache(CacheSim::new(t.wire, t.rules, t.report));
    let steps = coding_task();
    let n = steps.len();
    session(&t, &h, &tools(), steps).await;
    let served = h.upstream.cache().unwrap().served;
    // The ledger is written beside the answers: wait for its rows.
    let url = h.url("/v1/cache/sessions/thread-1");
    let mut report = Value::Null;
    for _ in 0..100 {
        let response = h.client.get(&url).send().await.unwrap();
        if response.status() == 200 {
            report = response.json().await.unwrap();
            if report["turns"].as_array().is_some_and(|t| t.len() == n) {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let turns = report["turns"].as_array().expect("the report's turns");
    assert_eq!(turns.len(), n, "{report:#}");
    for (turn, s) in turns.iter().zip(&served) {
        assert_eq!(turn["input_tokens"], s.input);
        assert_eq!(turn["cached_tokens"], s.read);
        assert_eq!(turn["cache_write_tokens"], s.write);
        assert_eq!(turn["provider"], "up");
    }
    let later: Vec<_> = served[1..].iter().collect();
    let share = later.iter().map(|s| s.read).sum::<u64>() as f64
        / later.iter().map(|s| s.input).sum::<u64>() as f64;
    let reported = report["total"]["cached_share_after_first"]
        .as_f64()
        .unwrap();
    assert!(
        (reported - share).abs() < 0.001,
        "{reported} against {share}"
    );
    assert!(reported > 0.8, "{report:#}");
    // Another session has no report.
    let missing = h
        .client
        .get(h.url("/v1/cache/sessions/thread-2"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "cache_session_not_found");
    // The command line reads the same ledger from the store.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolbridge"))
        .args(["cache", "thread-1", "--json"])
        .env("TOOLBRIDGE_STORE_URL", &h.store_url)
        .env("TOOLBRIDGE_UPSTREAM_URL", "http://127.0.0.1:9/v1")
        .env_remove("TOOLBRIDGE_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, report);
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_toolbridge"))
        .args(["cache", "thread-1"])
        .env("TOOLBRIDGE_STORE_URL", &h.store_url)
        .env("TOOLBRIDGE_UPSTREAM_URL", "http://127.0.0.1:9/v1")
        .env_remove("TOOLBRIDGE_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("total: {n} turns")), "{text}");
}
