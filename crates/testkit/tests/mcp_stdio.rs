//! The MCP client on stdio, against the test kit's server binary (`toolbridge-test-mcp`): these
//! tests live here because only tests of the package that owns a binary get its path
//! (`CARGO_BIN_EXE_…`) from cargo; the HTTP tests are in `crates/tools/tests/mcp.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use toolbridge_tools::mcp::{McpLimits, McpServerConfig, McpTool, McpTransport, connect};
use toolbridge_tools::{Tool, ToolContext, ToolError, ToolRegistry};

const SERVER: &str = env!("CARGO_BIN_EXE_toolbridge-test-mcp");

fn stdio_config(env: BTreeMap<String, String>) -> McpServerConfig {
    McpServerConfig {
        label: "kit".to_owned(),
        transport: McpTransport::Stdio {
            command: SERVER.into(),
            args: vec!["--stdio".to_owned()],
            env,
            cwd: None,
        },
        allowed_tools: None,
        prefix_names: true,
        limits: McpLimits::default(),
    }
}

fn registry(tools: Vec<McpTool>) -> ToolRegistry {
    ToolRegistry::with_tools(tools.into_iter().map(|t| Arc::new(t) as Arc<dyn Tool>)).unwrap()
}

fn ctx() -> ToolContext {
    ToolContext::with_timeout(Duration::from_secs(10), 64 * 1024)
}

#[tokio::test]
async fn lists_and_calls_over_stdio() {
    let tools = connect(&stdio_config(BTreeMap::new())).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "kit__add",
            "kit__echo",
            "kit__fail",
            "kit__slow",
            "kit__env",
            "kit__calls"
        ]
    );
    let client = Arc::clone(tools[0].client());
    let registry = registry(tools);
    let out = registry
        .execute("kit__add", json!({"a": 40, "b": 2}), &ctx())
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"text": "42", "structured_content": {"sum": 42}})
    );
    let err = registry
        .execute("kit__fail", json!({}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "mcp_tool_error");
    // The invalid call is refused by the registry: the server counts two calls before this one.
    let err = registry
        .execute("kit__add", json!({"a": 1}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    let out = registry
        .execute("kit__calls", json!({}), &ctx())
        .await
        .unwrap();
    assert_eq!(out["text"], "3");
    client.close().await;
}

#[tokio::test]
async fn the_child_gets_only_the_configured_environment() {
    // Cargo sets CARGO_MANIFEST_DIR for the test process; PATH is set in any shell.
    for inherited in ["CARGO_MANIFEST_DIR", "PATH"] {
        assert!(
            std::env::var_os(inherited).is_some(),
            "{inherited} unset here"
        );
    }
    let env = BTreeMap::from([("TOOLBRIDGE_MCP_PROBE".to_owned(), "configured".to_owned())]);
    let registry = registry(connect(&stdio_config(env)).await.unwrap());
    let read = |name: &'static str| {
        let registry = &registry;
        async move {
            registry
                .execute("kit__env", json!({"name": name}), &ctx())
                .await
                .unwrap()["text"]
                .clone()
        }
    };
    assert_eq!(read("TOOLBRIDGE_MCP_PROBE").await, "configured");
    assert_eq!(read("CARGO_MANIFEST_DIR").await, "<unset>");
    assert_eq!(read("PATH").await, "<unset>");
    assert_eq!(read("HOME").await, "<unset>");
}

#[tokio::test]
async fn a_deadline_ends_a_slow_call_over_stdio() {
    let registry = registry(connect(&stdio_config(BTreeMap::new())).await.unwrap());
    let short = ToolContext::with_timeout(Duration::from_millis(200), 64 * 1024);
    let err = registry
        .execute("kit__slow", json!({"ms": 30_000}), &short)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout);
    let out = registry
        .execute("kit__echo", json!({"text": "alive"}), &ctx())
        .await
        .unwrap();
    assert_eq!(out["text"], "alive");
}

#[tokio::test]
async fn a_child_that_exits_at_once_is_mcp_connect_failed() {
    // Without `--stdio` the binary prints its usage and exits.
    let config = McpServerConfig {
        transport: McpTransport::Stdio {
            command: SERVER.into(),
            args: vec![],
            env: BTreeMap::new(),
            cwd: None,
        },
        ..stdio_config(BTreeMap::new())
    };
    let err = connect(&config).await.unwrap_err();
    assert_eq!(err.code(), "mcp_connect_failed", "{err}");
}

#[tokio::test]
async fn the_binary_serves_streamable_http_and_prints_its_url_first() {
    let mut child = tokio::process::Command::new(SERVER)
        .arg("--http")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the URL line in time")
        .unwrap()
        .expect("a first line");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let config = McpServerConfig {
        transport: McpTransport::StreamableHttp {
            url,
            headers: BTreeMap::new(),
            bearer_token: None,
        },
        allowed_tools: Some(vec!["echo".to_owned()]),
        ..stdio_config(BTreeMap::new())
    };
    let registry = registry(connect(&config).await.unwrap());
    let out = registry
        .execute("kit__echo", json!({"text": "over http"}), &ctx())
        .await
        .unwrap();
    assert_eq!(out["text"], "over http");
    child.kill().await.unwrap();
}
