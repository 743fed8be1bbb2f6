//! MCP servers as tools, against the test kit's real MCP server (`rmcp`) on streamable HTTP in
//! this process: listing across pages, calls through the registry, `isError`, deadlines,
//! cancellation, filters, limits, headers, and servers that are not there.
//!
//! The stdio transport (a child process: the `toolbridge-test-mcp` binary, its cleared
//! environment) is tested in `crates/testkit/tests/mcp_stdio.rs`, because only tests of the
//! package that owns a binary get its path (`CARGO_BIN_EXE_…`) from cargo.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use toolbridge_testkit::mcp::serve_http;
use toolbridge_tools::mcp::{McpLimits, McpServerConfig, McpTool, McpTransport, connect};
use toolbridge_tools::{Tool, ToolContext, ToolError, ToolRegistry};

fn http_config(url: &str) -> McpServerConfig {
    McpServerConfig {
        label: "kit".to_owned(),
        transport: McpTransport::StreamableHttp {
            url: url.to_owned(),
            headers: BTreeMap::new(),
            bearer_token: None,
        },
        allowed_tools: None,
        prefix_names: true,
        limits: McpLimits::default(),
    }
}

fn registry(tools: Vec<McpTool>) -> ToolRegistry {
    ToolRegistry::with_tools(tools.into_iter().map(|t| Arc::new(t) as Arc<dyn Tool>)).unwrap()
}

fn names(tools: &[McpTool]) -> Vec<&str> {
    tools.iter().map(|t| t.name()).collect()
}

fn ctx() -> ToolContext {
    ToolContext::with_timeout(Duration::from_secs(10), 64 * 1024)
}

#[tokio::test]
async fn lists_every_page_and_calls_over_streamable_http() {
    let (url, server) = serve_http().await;
    let tools = connect(&http_config(&url)).await.unwrap();
    // Six tools served two per page: the client followed the cursor.
    assert_eq!(
        names(&tools),
        [
            "kit__add",
            "kit__echo",
            "kit__fail",
            "kit__slow",
            "kit__env",
            "kit__calls"
        ]
    );
    let add = &tools[0];
    assert_eq!((add.server_label(), add.tool_name()), ("kit", "add"));
    assert_eq!(add.description(), "Adds two integers.");
    assert_eq!(add.parameters()["required"], json!(["a", "b"]));

    let registry = registry(tools);
    let out = registry
        .execute("kit__add", json!({"a": 2, "b": 3}), &ctx())
        .await
        .unwrap();
    assert_eq!(out, json!({"text": "5", "structured_content": {"sum": 5}}));
    let out = registry
        .execute("kit__echo", json!({"text": "héllo"}), &ctx())
        .await
        .unwrap();
    assert_eq!(out, json!({"text": "héllo"}));
    assert_eq!(server.calls(), 2);
}

#[tokio::test]
async fn an_is_error_result_is_an_mcp_tool_error() {
    let (url, _server) = serve_http().await;
    let registry = registry(connect(&http_config(&url)).await.unwrap());
    let err = registry
        .execute("kit__fail", json!({}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "mcp_tool_error");
    assert_eq!(
        err,
        ToolError::McpTool {
            server: "kit".to_owned(),
            tool: "fail".to_owned(),
            message: "failed on purpose".to_owned(),
        }
    );
}

#[tokio::test]
async fn a_deadline_ends_a_slow_call_and_the_session_lives_on() {
    let (url, _server) = serve_http().await;
    let registry = registry(connect(&http_config(&url)).await.unwrap());
    let short = ToolContext::with_timeout(Duration::from_millis(200), 64 * 1024);
    let err = registry
        .execute("kit__slow", json!({"ms": 30_000}), &short)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout);
    let out = registry
        .execute("kit__echo", json!({"text": "still here"}), &ctx())
        .await
        .unwrap();
    assert_eq!(out["text"], "still here");
}

#[tokio::test]
async fn cancellation_ends_a_slow_call() {
    let (url, _server) = serve_http().await;
    let registry = registry(connect(&http_config(&url)).await.unwrap());
    let (tx, rx) = watch::channel(false);
    let ctx = ToolContext {
        cancelled: rx,
        ..ctx()
    };
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = tx.send(true);
    });
    let err = registry
        .execute("kit__slow", json!({"ms": 30_000}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Cancelled);
}

#[tokio::test]
async fn allowed_tools_filters_by_the_servers_names() {
    let (url, _server) = serve_http().await;
    let config = McpServerConfig {
        allowed_tools: Some(vec!["echo".to_owned(), "add".to_owned()]),
        ..http_config(&url)
    };
    let tools = connect(&config).await.unwrap();
    assert_eq!(names(&tools), ["kit__add", "kit__echo"]);
}

#[tokio::test]
async fn names_can_stay_unprefixed() {
    let (url, _server) = serve_http().await;
    let config = McpServerConfig {
        prefix_names: false,
        allowed_tools: Some(vec!["add".to_owned()]),
        ..http_config(&url)
    };
    let tools = connect(&config).await.unwrap();
    assert_eq!(names(&tools), ["add"]);
    assert_eq!(tools[0].server_label(), "kit");
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_server() {
    let (url, server) = serve_http().await;
    let registry = registry(connect(&http_config(&url)).await.unwrap());
    for bad in [
        json!({"a": "one", "b": 2}),
        json!({"a": 1}),
        json!({"a": 1, "b": 2, "c": 3}),
    ] {
        let err = registry.execute("kit__add", bad, &ctx()).await.unwrap_err();
        assert_eq!(err.code(), "invalid_arguments", "{err}");
    }
    assert_eq!(server.calls(), 0);
    registry
        .execute("kit__add", json!({"a": 1, "b": 2}), &ctx())
        .await
        .unwrap();
    assert_eq!(server.calls(), 1);
}

#[tokio::test]
async fn configured_headers_and_bearer_token_are_sent() {
    let (url, server) = serve_http().await;
    let config = McpServerConfig {
        transport: McpTransport::StreamableHttp {
            url: url.clone(),
            headers: BTreeMap::from([("x-probe".to_owned(), "p1".to_owned())]),
            bearer_token: Some("t0ken".to_owned()),
        },
        ..http_config(&url)
    };
    connect(&config).await.unwrap();
    assert_eq!(
        server.last_header("authorization").as_deref(),
        Some("Bearer t0ken")
    );
    assert_eq!(server.last_header("x-probe").as_deref(), Some("p1"));
}

#[tokio::test]
async fn output_over_the_callers_limit_is_refused() {
    let (url, _server) = serve_http().await;
    let registry = registry(connect(&http_config(&url)).await.unwrap());
    let small = ToolContext::with_timeout(Duration::from_secs(10), 100);
    let err = registry
        .execute("kit__echo", json!({"text": "x".repeat(1000)}), &small)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::OutputTooLarge { limit: 100 });
}

#[tokio::test]
async fn the_tool_list_is_bounded_in_tools_and_pages() {
    let (url, _server) = serve_http().await;
    let few_tools = McpServerConfig {
        limits: McpLimits {
            max_tools: 5,
            ..McpLimits::default()
        },
        ..http_config(&url)
    };
    let err = connect(&few_tools).await.unwrap_err();
    assert_eq!(err.code(), "limit_exceeded", "{err}");
    let few_pages = McpServerConfig {
        limits: McpLimits {
            max_list_pages: 2,
            ..McpLimits::default()
        },
        ..http_config(&url)
    };
    let err = connect(&few_pages).await.unwrap_err();
    assert_eq!(err.code(), "limit_exceeded", "{err}");
}

#[tokio::test]
async fn a_closed_client_answers_with_a_protocol_error() {
    let (url, _server) = serve_http().await;
    let tools = connect(&http_config(&url)).await.unwrap();
    tools[0].client().close().await;
    tools[0].client().close().await; // idempotent
    let err = tools[1]
        .execute(json!({"text": "hi"}), &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "mcp_protocol_error", "{err}");
}

#[tokio::test]
async fn a_server_that_is_not_there_is_mcp_connect_failed() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let err = connect(&http_config(&format!("http://{addr}/mcp")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "mcp_connect_failed", "{err}");

    let missing = McpServerConfig {
        transport: McpTransport::Stdio {
            command: "/nonexistent/toolbridge-no-such-server".into(),
            args: vec![],
            env: BTreeMap::new(),
            cwd: None,
        },
        ..http_config("http://unused")
    };
    let err = connect(&missing).await.unwrap_err();
    assert_eq!(err.code(), "mcp_connect_failed", "{err}");
}

#[tokio::test]
async fn a_silent_server_is_mcp_connect_failed_at_the_connect_timeout() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _accepting = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let config = McpServerConfig {
        limits: McpLimits {
            connect_timeout_ms: 300,
            ..McpLimits::default()
        },
        ..http_config(&format!("http://{addr}/mcp"))
    };
    let err = connect(&config).await.unwrap_err();
    assert_eq!(err.code(), "mcp_connect_failed", "{err}");
}

#[tokio::test]
async fn invalid_configurations_are_refused_before_connecting() {
    let bad: Vec<(McpServerConfig, &str)> = vec![
        (
            McpServerConfig {
                label: "has space".to_owned(),
                ..http_config("http://127.0.0.1:1/mcp")
            },
            "label",
        ),
        (http_config("file:///etc/passwd"), "http or https"),
        (
            McpServerConfig {
                transport: McpTransport::StreamableHttp {
                    url: "http://127.0.0.1:1/mcp".to_owned(),
                    headers: BTreeMap::from([("authorization".to_owned(), "x".to_owned())]),
                    bearer_token: None,
                },
                ..http_config("http://unused")
            },
            "bearer_token",
        ),
    ];
    for (config, needle) in bad {
        let err = connect(&config).await.unwrap_err();
        assert_eq!(err.code(), "invalid_configuration");
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn the_config_reads_from_json_and_hides_secrets_in_debug() {
    let config: McpServerConfig = serde_json::from_value(json!({
        "label": "local",
        "transport": {"type": "stdio", "command": "/usr/bin/server", "args": ["--stdio"],
                      "env": {"API_KEY": "s3cret"}, "cwd": "/tmp"},
        "allowed_tools": ["a"],
        "limits": {"max_tools": 8}
    }))
    .unwrap();
    assert_eq!(config.limits.max_tools, 8);
    assert!(config.prefix_names);
    let debug = format!("{config:?}");
    assert!(
        debug.contains("API_KEY") && !debug.contains("s3cret"),
        "{debug}"
    );
    let unknown: Result<McpServerConfig, _> = serde_json::from_value(json!({
        "label": "x", "transport": {"type": "stdio", "command": "/bin/x", "shell": true}
    }));
    assert!(unknown.is_err());
    let _: Value = serde_json::to_value(&config).unwrap();
}
