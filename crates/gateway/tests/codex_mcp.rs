//! Ring 3: the real Codex CLI 0.171.0 with a stdio MCP server configured (the test kit's
//! `toolbridge-test-mcp`), through a Chat preset, Anthropic and Gemini. Codex declares the MCP
//! tools only behind `tool_search` (`execution: "client"`): the gateway offers `tool_search` as a
//! function, the model (a fake upstream in the dialect's real wire format) calls it, the gateway
//! shows Codex a `tool_search_call`, Codex answers with a `tool_search_output` holding the
//! server's namespace, the gateway names those tools in the search's result with their
//! parameters (the tool list stays the same: a provider's cached prefix is kept), the model
//! calls `mcp__kit__add` through `call_found_tool`, the gateway restores it as a `function_call`
//! with `namespace` and `name`, Codex runs it on the MCP server (approved by the server's
//! `default_tools_approval_mode`, as `exec` needs), and the final answer carries its result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::dialects::{Answer, Call, End, Usage, Wire};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const A: i64 = 1234;
const B: i64 = 4321;
const SUM: &str = "5555";
const FOUND_NAME: &str = "mcp__kit__add";

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

/// The model: search for tools, call the one found (through `call_found_tool` once the search's
/// result names it), then answer with its result.
fn script(wire: Wire, request: &Recorded) -> Reply {
    let body = &request.body;
    let text = body.to_string();
    let offered = offered(body);
    let call = |id: &str, name: &str, arguments: Value| Answer {
        reasoning: Vec::new(),
        text: Vec::new(),
        calls: vec![Call {
            id: id.to_owned(),
            name: name.to_owned(),
            namespace: None,
            custom: false,
            arguments,
        }],
        end: End::ToolCalls,
        usage: Usage {
            input: 100,
            output: 10,
            ..Usage::default()
        },
    };
    let answer = if text.contains(SUM) {
        Answer {
            text: vec![format!("The sum is {SUM}.")],
            end: End::Stop,
            calls: Vec::new(),
            ..call("", "", json!({}))
        }
    } else if text.contains(FOUND_NAME) && offered.iter().any(|n| n == "call_found_tool") {
        call(
            "call_add",
            "call_found_tool",
            json!({"name": FOUND_NAME, "arguments": {"a": A, "b": B}}),
        )
    } else if offered.iter().any(|n| n == "tool_search") {
        call(
            "call_search",
            "tool_search",
            json!({"query": "add two integers"}),
        )
    } else {
        return Reply::Json {
            status: 400,
            body: json!({"error": {"message": format!("no tool_search offered: {offered:?}")}}),
            headers: Vec::new(),
        };
    };
    wire.stream(&answer)
}

/// A `toolbridge serve` with one provider (`provider` is its TOML body) and a scratch folder.
async fn start_gateway(
    upstream: &FakeUpstream,
    name: &str,
    provider: &str,
) -> (PathBuf, GatewayProcess) {
    let scratch = std::env::temp_dir().join(format!(
        "toolbridge-codex-mcp-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let config = scratch.join("toolbridge.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.upstream]\nbase_url = \"{}\"\napi_key_env = \"UPSTREAM_KEY\"\nmax_retries = 0\n{provider}\n\n[[routes]]\nmodel = \"toolbridge-coder\"\nprovider = \"upstream\"\nupstream_model = \"upstream-model\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"upstream\"\nupstream_model = \"upstream-model\"\n",
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
    (scratch, gateway)
}

/// Codex 0.171 with the test kit's MCP server on stdio; returns its last message and its JSON
/// event lines.
async fn run_codex(
    codex: &Path,
    server: &Path,
    gateway: &GatewayProcess,
    scratch: &Path,
    catalog: bool,
) -> (String, String, String) {
    let mut exec = CodexExec::new(codex, scratch, gateway.url("/v1"));
    if catalog {
        // A slug Codex does not know, described only by the gateway's catalog: Codex then
        // defers MCP tools only if the catalog says `supports_search_tool`.
        exec.model = "toolbridge-coder".to_owned();
        exec.features = "api_key_model_discovery = true".to_owned();
        exec.provider = format!(
            "stream_max_retries = 0\nmodel_catalog_url = \"{}\"",
            gateway.url("/v1/models")
        );
    }
    exec.tables = format!(
        r#"
[mcp_servers.kit]
command = "{}"
args = ["--stdio"]
default_tools_approval_mode = "approve"
"#,
        server.display()
    );
    let run = exec
        .run("Use the kit MCP server to add 1234 and 4321.")
        .await;
    (run.last_message, run.stdout, run.stderr)
}

/// One Codex run at a time: three Codex processes, their MCP servers and gateways at once starve
/// a small machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn mcp_turn(name: &str, wire: Wire, provider: &str) {
    mcp_session(name, wire, provider, false).await;
}

async fn mcp_session(name: &str, wire: Wire, provider: &str, catalog: bool) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(codex) = toolbridge_testkit::tools::codex_0171() else {
        return;
    };
    // The test kit's MCP server binary, built beside `toolbridge` by `cargo test --workspace`.
    let server = Path::new(env!("CARGO_BIN_EXE_toolbridge")).with_file_name("toolbridge-test-mcp");
    if !server.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is built by `cargo test --workspace`",
            server.display()
        );
        eprintln!("SKIPPED: {} is absent; run scripts/test", server.display());
        return;
    }
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(move |r: &Recorded| Some(script(wire, r))));
    let (scratch, gateway) = start_gateway(&upstream, name, provider).await;
    let (last, stdout, stderr) =
        run_codex(&codex, &server, &gateway, &scratch.join("codex"), catalog).await;
    let context = || {
        format!(
            "stdout:\n{stdout}\nstderr:\n{stderr}\ngateway stderr:\n{}",
            gateway.stderr()
        )
    };
    assert_eq!(last.trim(), format!("The sum is {SUM}."), "{}", context());

    let all = upstream.requests();
    assert_eq!(all.len(), 3, "{}", context());
    // Round one: no MCP tool, only the search.
    let first = offered(&all[0].body);
    assert!(first.iter().any(|n| n == "tool_search"), "{first:?}");
    assert!(
        !first.iter().any(|n| n.starts_with("mcp__kit")),
        "{first:?}"
    );
    // Round two: the tool list is the first round's (found tools are called through
    // `call_found_tool`, declared from the start), and the search went back as the degraded
    // call with its result, which names the found tool with its parameters.
    let second = offered(&all[1].body);
    assert_eq!(second, first);
    assert!(second.iter().any(|n| n == "call_found_tool"), "{second:?}");
    assert_eq!(all[1].body["tools"], all[0].body["tools"]);
    let history = all[1].body.to_string();
    assert!(history.contains("These tools were found"), "{history}");
    assert!(history.contains(FOUND_NAME), "{history}");
    // Round three: the sum came from the MCP server, which Codex ran; still the same tools.
    assert!(all[2].body.to_string().contains(SUM));
    assert_eq!(all[2].body["tools"], all[0].body["tools"]);
    // Codex saw a real MCP tool call (its JSON events name the server and the tool).
    let ran = stdout
        .lines()
        .any(|l| l.contains("mcp_tool_call") && l.contains("\"kit\""));
    assert!(ran, "{}", context());
    let _ = std::fs::remove_dir_all(&scratch);
    gateway.kill().await;
}

#[tokio::test]
async fn codex_calls_an_mcp_tool_found_by_tool_search_through_a_chat_preset() {
    mcp_turn("chat", Wire::Chat { think_tags: false }, "preset = \"glm\"").await;
}

/// With the catalog, the slug is the gateway's own: Codex searches only because the catalog
/// says the route serves `tool_search` (it did not, and Codex declared every MCP tool upfront).
#[tokio::test]
async fn codex_with_the_catalog_searches_for_mcp_tools() {
    mcp_session(
        "catalog",
        Wire::Chat { think_tags: false },
        "preset = \"glm\"",
        true,
    )
    .await;
}

#[tokio::test]
async fn codex_calls_an_mcp_tool_found_by_tool_search_through_anthropic() {
    mcp_turn("anthropic", Wire::Anthropic, "dialect = \"anthropic\"").await;
}

#[tokio::test]
async fn codex_calls_an_mcp_tool_found_by_tool_search_through_gemini() {
    mcp_turn("gemini", Wire::Gemini, "dialect = \"gemini\"").await;
}
