//! Ring 2: MCP tools the gateway runs itself, against a real MCP server of the test kit
//! (streamable HTTP on 127.0.0.1:0) and a fake Chat upstream: a configured server's tools offered
//! to the model and called as `mcp_call` items; a request's own Responses `mcp` tool
//! (`server_url`, headers, `allowed_tools`) listed as an `mcp_list_tools` item and called; a
//! server that cannot be listed; and the approval round trip (`require_approval`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;

fn calls(calls: &[(&str, &str, Value)]) -> Value {
    toolbridge_testkit::chat::tool_calls_completion(calls)
}

fn port_of(url: &str) -> String {
    url.trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .to_owned()
}

async fn harness(extra: String) -> Harness {
    Harness::with_toml(move |url| {
        format!(
            r#"
[providers.up]
base_url = "{url}"
max_retries = 0

[[routes]]
model = "*"
provider = "up"

[gateway_tools]
jq_isolation = false
{extra}
"#
        )
    })
    .await
}

#[tokio::test]
async fn a_configured_mcp_servers_tools_are_offered_and_called_as_mcp_call_items() {
    let (url, server) = toolbridge_testkit::mcp::serve_http().await;
    let h = harness(format!(
        "\n[[gateway_tools.mcp]]\nlabel = \"calc\"\nallowed_tools = [\"add\", \"echo\"]\n[gateway_tools.mcp.transport]\ntype = \"streamable_http\"\nurl = \"{url}\"\n"
    ))
    .await;
    h.upstream.push(Reply::json(calls(&[(
        "call_add",
        "add",
        json!({"a": 2, "b": 40}),
    )])));
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "2 + 40 = 42",
            "stop",
        )));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "add 2 and 40", "store": false}))
        .await;
    assert_eq!(status, 200, "{body}");
    h.check_response(&body);
    let offered: Vec<String> = h.upstream.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(offered, ["add", "echo"], "allowed_tools applied");
    let call = &body["output"][0];
    assert_eq!(call["type"], "mcp_call");
    assert_eq!(call["server_label"], "calc");
    assert_eq!(call["name"], "add");
    assert!(call["output"].as_str().unwrap().contains("42"), "{call}");
    assert_eq!(server.calls(), 1);
    let result = h.upstream.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(result["content"].as_str().unwrap().contains("42"));
}

#[tokio::test]
async fn a_requests_own_mcp_server_is_listed_then_called_with_its_headers() {
    let (url, server) = toolbridge_testkit::mcp::serve_http().await;
    let h = harness(format!(
        "request_mcp = true\nmcp_allow_loopback_ports = [{}]\n",
        port_of(&url)
    ))
    .await;
    h.upstream.push(Reply::sse(vec![
        toolbridge_testkit::chat::chunk(json!({"role": "assistant", "content": ""}), None),
        toolbridge_testkit::chat::chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_e", "type": "function",
                "function": {"name": "echo", "arguments": "{\"text\":\"hello mcp\"}"}}]}),
            None,
        ),
        toolbridge_testkit::chat::chunk(json!({}), Some("tool_calls")),
    ]));
    h.upstream
        .push(Reply::sse(toolbridge_testkit::chat::text_stream(
            &["It said hello mcp."],
            "stop",
        )));
    let tool = json!({"type": "mcp", "server_label": "kit", "server_url": url,
        "headers": {"x-team": "search"}, "authorization": "secret-token",
        "allowed_tools": ["echo"], "require_approval": "never"});
    let events = h
        .post_stream(&json!({"model": "m", "input": "echo hello mcp", "stream": true, "tools": [tool], "store": false}))
        .await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    let at = |k: &str| {
        kinds
            .iter()
            .position(|x| *x == k)
            .unwrap_or_else(|| panic!("no {k}"))
    };
    assert!(at("response.mcp_list_tools.completed") < at("response.mcp_call.in_progress"));
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["output"][0]["type"], "mcp_list_tools");
    assert_eq!(last["output"][0]["server_label"], "kit");
    let listed: Vec<&str> = last["output"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["echo"]);
    assert_eq!(last["output"][1]["type"], "mcp_call");
    assert!(
        last["output"][1]["output"]
            .as_str()
            .unwrap()
            .contains("hello mcp")
    );
    assert_eq!(server.last_header("x-team").as_deref(), Some("search"));
    assert_eq!(
        server.last_header("authorization").as_deref(),
        Some("Bearer secret-token")
    );
    // The provider saw the server's tool as a function; the `mcp` tool itself never went up.
    let first = &h.upstream.requests()[0].body;
    assert_eq!(first["tools"].as_array().unwrap().len(), 1);
    assert_eq!(first["tools"][0]["function"]["name"], "echo");
}

#[tokio::test]
async fn a_request_mcp_server_that_cannot_be_listed_says_why_and_the_request_goes_on() {
    let h = harness("request_mcp = true\n".to_owned()).await;
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "No tools today.",
            "stop",
        )));
    // Loopback is not allowed here: the SSRF guard refuses it before any connection.
    let tool =
        json!({"type": "mcp", "server_label": "local", "server_url": "http://127.0.0.1:9/mcp"});
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "hi", "tools": [tool]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["type"], "mcp_list_tools");
    let error = body["output"][0]["error"].as_str().unwrap();
    assert!(error.contains("may not be reached"), "{error}");
    assert_eq!(body["output"][1]["type"], "message");
}

#[tokio::test]
async fn a_call_that_needs_approval_waits_for_the_client_and_runs_once_approved() {
    let (url, server) = toolbridge_testkit::mcp::serve_http().await;
    let h = harness(format!(
        "request_mcp = true\nmcp_allow_loopback_ports = [{}]\n",
        port_of(&url)
    ))
    .await;
    // OpenAI's default: every call of a request's server asks first.
    let tool =
        json!({"type": "mcp", "server_label": "kit", "server_url": url, "allowed_tools": ["add"]});
    h.upstream.push(Reply::json(calls(&[(
        "call_add",
        "add",
        json!({"a": 20, "b": 22}),
    )])));
    let (status, first) = h
        .post_json(
            &json!({"model": "m", "input": "add 20 and 22", "tools": [tool], "store": false}),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    h.check_response(&first);
    let output = first["output"].as_array().unwrap().clone();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["mcp_list_tools", "mcp_approval_request"],
        "{first:#}"
    );
    assert_eq!(output[1]["name"], "add");
    assert_eq!(server.calls(), 0, "nothing runs before the approval");
    assert_eq!(h.upstream.requests().len(), 1);

    // The client approves; the call runs before the model's next turn, which sees its result.
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "20 + 22 = 42",
            "stop",
        )));
    let mut input = vec![json!({"role": "user", "content": "add 20 and 22"})];
    input.extend(output.clone());
    input.push(json!({"type": "mcp_approval_response", "approval_request_id": output[1]["id"], "approve": true}));
    let (status, second) = h
        .post_json(&json!({"model": "m", "input": input, "tools": [tool], "store": false}))
        .await;
    assert_eq!(status, 200, "{second}");
    h.check_response(&second);
    assert_eq!(server.calls(), 1);
    let kinds: Vec<&str> = second["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["mcp_list_tools", "mcp_call", "message"],
        "{second:#}"
    );
    let call = &second["output"][1];
    assert_eq!(call["approval_request_id"], output[1]["id"]);
    assert!(call["output"].as_str().unwrap().contains("42"));
    let messages = h.upstream.last_body()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    // The gateway's note naming the tools it runs comes first.
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert!(messages[0]["content"].as_str().unwrap().contains("add"));
    assert_eq!(messages[2]["tool_calls"][0]["function"]["name"], "add");
    assert!(messages[3]["content"].as_str().unwrap().contains("42"));
    assert!(
        second.get("toolbridge_diagnostics").is_none(),
        "nothing dropped: {second:#}"
    );

    // A refusal: the call never runs, and the model reads why.
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "Understood, I will not add them.",
            "stop",
        )));
    let mut input = vec![json!({"role": "user", "content": "add 20 and 22"})];
    input.extend(output.clone());
    input.push(json!({"type": "mcp_approval_response", "approval_request_id": output[1]["id"], "approve": false}));
    let (status, third) = h
        .post_json(&json!({"model": "m", "input": input, "tools": [tool], "store": false}))
        .await;
    assert_eq!(status, 200, "{third}");
    assert_eq!(server.calls(), 1, "a refused call does not run");
    let last = h.upstream.last_body()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let result = last.last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(result.contains("approval_denied"), "{result}");
}

#[tokio::test]
async fn a_configured_stdio_mcp_server_runs_in_a_clean_environment() {
    // The test kit's MCP server binary, built beside `toolbridge` by `cargo test --workspace`.
    let server = std::path::Path::new(env!("CARGO_BIN_EXE_toolbridge"))
        .with_file_name("toolbridge-test-mcp");
    if !server.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is built by `cargo test --workspace`",
            server.display()
        );
        eprintln!("SKIPPED: {} is absent; run scripts/test", server.display());
        return;
    }
    let h = harness(format!(
        "\n[[gateway_tools.mcp]]\nlabel = \"kit\"\nallowed_tools = [\"env\", \"add\"]\n[gateway_tools.mcp.transport]\ntype = \"stdio\"\ncommand = \"{}\"\nargs = [\"--stdio\"]\nenv = {{ KIT_MODE = \"test\" }}\n",
        server.display()
    ))
    .await;
    // The child sees only what the config gave it: not the gateway's HOME or PATH.
    for (name, expect_set) in [("KIT_MODE", true), ("HOME", false), ("PATH", false)] {
        h.upstream.push(Reply::json(calls(&[(
            "call_env",
            "env",
            json!({"name": name}),
        )])));
        h.upstream
            .push(Reply::json(toolbridge_testkit::chat::completion(
                "done", "stop",
            )));
        let (status, body) = h
            .post_json(&json!({"model": "m", "input": "env", "store": false}))
            .await;
        assert_eq!(status, 200, "{body}");
        let output = body["output"][0]["output"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(body["output"][0]["server_label"], "kit");
        if expect_set {
            assert!(output.contains("test"), "{name}: {output}");
        } else {
            assert!(
                output.contains("<unset>"),
                "{name} leaked into the child: {output}"
            );
        }
    }
}
