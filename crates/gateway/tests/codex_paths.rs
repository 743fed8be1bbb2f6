//! Ring 2: the optional paths Codex uses beside `/v1/responses`, through the whole app against
//! fake upstreams: the model catalog (`GET /v1/models?client_version=…`) derived from the
//! routes' profiles, routing on Codex's `x-codex-turn-metadata` (`request_kind`, `agent_name`),
//! and the remote compaction item (`compaction_trigger` in, one sealed `compaction` out, which
//! a later request expands back into its summary).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::chat::completion;
use toolbridge_testkit::{FakeUpstream, Reply};

/// A gateway with three routes: a Chat preset (generic), DeepSeek (no images, thinking styles)
/// and Anthropic, each an exact model; `big` with its own catalog settings.
async fn catalog_gateway() -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.chat]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[providers.chat.models.coder-large]
context_window = 200000

[providers.deep]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "deepseek"

[providers.claude]
dialect = "anthropic"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[providers.plain]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
repair = false

[[routes]]
model = "coder"
provider = "chat"
upstream_model = "coder-large"

[routes.catalog]
base_instructions = "You are the toolbridge coder."
display_name = "Coder (large)"
auto_compact_token_limit = 150000
prefer_websockets = false

[[routes]]
model = "deepseek-v4-pro"
provider = "deep"

[[routes]]
model = "claude-sonnet-4-5"
provider = "claude"

[[routes]]
model = "unrepaired"
provider = "plain"

[[routes]]
model = "hidden"
provider = "chat"

[routes.catalog]
hidden = true

[[routes]]
model = "coder"
provider = "deep"
request_kind = "compaction"
"#
        )
    })
    .await
}

async fn get(h: &Harness, path: &str) -> (u16, Value) {
    let response = h.client.get(h.url(path)).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn entry<'a>(catalog: &'a Value, slug: &str) -> &'a Value {
    catalog["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["slug"] == slug)
        .unwrap_or_else(|| panic!("no {slug} in {catalog:#}"))
}

fn efforts(entry: &Value) -> Vec<String> {
    entry["supported_reasoning_levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["effort"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_catalog_is_derived_from_each_routes_profile() {
    let h = catalog_gateway().await;
    let (status, catalog) = get(&h, "/v1/models?client_version=0.171.0").await;
    assert_eq!(status, 200, "{catalog}");
    let slugs: Vec<&str> = catalog["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["slug"].as_str().unwrap())
        .collect();
    // Route order; a hidden route and a route for compaction add no model.
    assert_eq!(
        slugs,
        [
            "coder",
            "deepseek-v4-pro",
            "claude-sonnet-4-5",
            "unrepaired"
        ]
    );

    let coder = entry(&catalog, "coder");
    assert_eq!(coder["display_name"], "Coder (large)");
    assert_eq!(coder["base_instructions"], "You are the toolbridge coder.");
    assert_eq!(coder["context_window"], 200_000);
    assert_eq!(coder["auto_compact_token_limit"], 150_000);
    assert_eq!(coder["prefer_websockets"], false);
    // The generic preset degrades `custom` tools and the gateway checks their grammar.
    assert_eq!(coder["apply_patch_tool_type"], "freeform");
    assert_eq!(coder["toolbridge"]["custom_tools"], "degraded");
    assert_eq!(coder["input_modalities"], json!(["text", "image"]));
    // No way to say an effort to the generic preset: no picker.
    assert!(efforts(coder).is_empty());
    assert!(coder.get("default_reasoning_level").is_none());
    assert_eq!(coder["toolbridge"]["web_search"], "none");
    assert_eq!(coder["shell_type"], "shell_command");
    assert_eq!(coder["visibility"], "list");

    let deepseek = entry(&catalog, "deepseek-v4-pro");
    assert_eq!(deepseek["context_window"], 1_000_000);
    assert_eq!(deepseek["auto_compact_token_limit"], 900_000);
    assert_eq!(deepseek["input_modalities"], json!(["text"]));
    // Thinking off, on (`high`), and `max`.
    assert_eq!(efforts(deepseek), ["none", "medium", "xhigh"]);
    assert_eq!(deepseek["default_reasoning_level"], "medium");
    assert_eq!(deepseek["prefer_websockets"], true);

    let claude = entry(&catalog, "claude-sonnet-4-5");
    assert_eq!(efforts(claude), ["none", "low", "medium", "high", "xhigh"]);
    assert_eq!(claude["toolbridge"]["web_search"], "provider");
    assert_eq!(claude["supports_parallel_tool_calls"], true);

    // Without repair nothing checks a degraded custom tool's grammar: no freeform apply_patch.
    assert!(entry(&catalog, "unrepaired")["apply_patch_tool_type"].is_null());

    // Every other client keeps OpenAI's list.
    let (status, list) = get(&h, "/v1/models").await;
    assert_eq!(status, 200);
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"][0]["id"], "coder");
    assert!(list.get("models").is_none());
}

/// A request for `coder` answered by whichever upstream it reaches.
fn turn(metadata: Option<&Value>) -> Value {
    let mut body = json!({"model": "coder", "input": "hi"});
    if let Some(m) = metadata {
        body["client_metadata"] = json!({"x-codex-turn-metadata": m.to_string()});
    }
    body
}

#[tokio::test]
async fn codex_request_kind_and_agent_name_pick_the_route() {
    let other = FakeUpstream::start().await;
    other.set_fallback(Reply::json(completion("from the other provider", "stop")));
    let other_url = other.base_url();
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.main]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[providers.other]
base_url = "{other_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[routes]]
model = "coder"
provider = "other"
upstream_model = "summarizer"
request_kind = "compaction"

[[routes]]
model = "coder"
provider = "other"
upstream_model = "helper"
agent_name = "/root/*"

[[routes]]
model = "coder"
provider = "main"
"#
        )
    })
    .await;
    h.upstream
        .set_fallback(Reply::json(completion("from the main provider", "stop")));

    // A plain request, and Codex's own turn: the main provider.
    let (status, _) = h.post_json(&turn(None)).await;
    assert_eq!(status, 200);
    let root_turn = json!({"request_kind": "turn", "agent_name": "/root"});
    let (status, _) = h.post_json(&turn(Some(&root_turn))).await;
    assert_eq!(status, 200);
    assert_eq!(h.upstream.requests().len(), 2);
    assert!(other.requests().is_empty());

    // Compaction, said in the header (HTTP) or in client_metadata (WebSocket frames).
    let compaction = json!({"request_kind": "compaction", "agent_name": "/root"});
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .header("x-codex-turn-metadata", compaction.to_string())
        .json(&turn(None))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (status, body) = h.post_json(&turn(Some(&compaction))).await;
    assert_eq!(status, 200);
    assert_eq!(
        body["output"][0]["content"][0]["text"],
        "from the other provider"
    );
    // A sub-agent's turn.
    let sub_agent = json!({"request_kind": "turn", "agent_name": "/root/reviewer"});
    let (status, _) = h.post_json(&turn(Some(&sub_agent))).await;
    assert_eq!(status, 200);

    let models: Vec<String> = other
        .requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models, ["summarizer", "summarizer", "helper"]);
    assert_eq!(h.upstream.requests().len(), 2);
}

#[tokio::test]
async fn a_bad_request_kind_in_a_route_is_refused_at_load() {
    let file: toolbridge_gateway::config::FileConfig = toml::from_str(
        r#"
[providers.main]
base_url = "http://127.0.0.1:9"

[[routes]]
model = "*"
provider = "main"
request_kind = "summary"
"#,
    )
    .unwrap();
    let error = toolbridge_gateway::Config::from_file(file, &|_| None).unwrap_err();
    assert!(
        error.to_string().contains("routes[0].request_kind"),
        "{error}"
    );
}

/// Codex's history before a remote compaction: a user turn, an answer, the trigger last.
fn trigger_request(stream: bool) -> Value {
    json!({
        "model": "coder",
        "stream": stream,
        "store": false,
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {}}}],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the parser bug in src/parse.rs."}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Found it: an off-by-one in the lexer."}]},
            {"type": "compaction_trigger"}
        ]
    })
}

#[tokio::test]
async fn a_compaction_trigger_is_answered_with_one_sealed_compaction_item() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::json(completion(
        "SUMMARY: the lexer has an off-by-one; fix it in src/parse.rs.",
        "stop",
    )));
    h.upstream.push(Reply::json(completion(
        "SUMMARY: the lexer has an off-by-one; fix it in src/parse.rs.",
        "stop",
    )));
    h.upstream
        .push(Reply::json(completion("Fixed the off-by-one.", "stop")));

    // Whole.
    let (status, body) = h.post_json(&trigger_request(false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "completed");
    let output = body["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "{body}");
    assert_eq!(output[0]["type"], "compaction");
    let sealed = output[0]["encrypted_content"].as_str().unwrap();
    assert!(!sealed.contains("off-by-one"), "the summary is sealed");
    // The summary request: the conversation and the instruction, no tools, not the trigger.
    let summary_request = &h.upstream.requests()[0].body;
    assert!(summary_request.get("tools").is_none(), "{summary_request}");
    let text = summary_request.to_string();
    assert!(text.contains("off-by-one in the lexer"));
    assert!(text.contains("Summarize the conversation"));
    assert!(!text.contains("compaction_trigger"));

    // Streamed: the item added and done, then completed with it.
    let events = h.post_stream(&trigger_request(true)).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let item = &events[3].data["item"];
    assert_eq!(item["type"], "compaction");

    // The next request starts from the compaction item: the provider reads the summary.
    let (status, _) = h
        .post_json(&json!({
            "model": "coder",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the parser bug in src/parse.rs."}]},
                item,
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on."}]}
            ]
        }))
        .await;
    assert_eq!(status, 200);
    let next = h.upstream.requests()[2].body.to_string();
    assert!(
        next.contains("SUMMARY: the lexer has an off-by-one"),
        "{next}"
    );
}

#[test]
fn toolbridge_check_shows_the_conditions_of_a_route() {
    let file: toolbridge_gateway::config::FileConfig = toml::from_str(
        r#"
[providers.main]
base_url = "http://127.0.0.1:9"

[providers.cheap]
base_url = "http://127.0.0.1:9"

[[routes]]
model = "*"
provider = "cheap"
upstream_model = "summarizer"
request_kind = "compaction"

[[routes]]
model = "*"
provider = "cheap"
agent_name = "/root/*"

[[routes]]
model = "*"
provider = "main"
"#,
    )
    .unwrap();
    let config = toolbridge_gateway::Config::from_file(file, &|_| None).unwrap();
    let described = toolbridge_gateway::cli::describe(&config);
    assert!(
        described.contains("  * [when request_kind = compaction] -> cheap (as summarizer)"),
        "{described}"
    );
    assert!(
        described.contains("  * [when agent_name = /root/*] -> cheap (same model name)"),
        "{described}"
    );
    assert!(
        described.contains("  * -> main (same model name)"),
        "{described}"
    );
}
