//! A small real MCP server, built with the official Rust SDK (`rmcp`), for tests of the MCP
//! client: on stdio (the `toolbridge-test-mcp --stdio` binary) or streamable HTTP (the binary
//! with `--http`, or [`serve_http`] in process, on 127.0.0.1:0).
//!
//! Tools: `add(a, b)` (text and `structuredContent`), `echo(text)`, `fail()` (`isError`),
//! `slow(ms)`, `env(name)` (a variable of the server's environment, or `<unset>`) and `calls()`
//! (how many `tools/call` requests reached this server, this one included). The listing is
//! served two tools per page, so clients must follow `nextCursor`.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// Tools per page of `tools/list`.
const PAGE: usize = 2;

/// The test server's state: a count of the `tools/call` requests it received.
#[derive(Debug, Clone, Default)]
pub struct TestMcpServer {
    calls: Arc<AtomicUsize>,
}

impl TestMcpServer {
    /// A server counting its calls in `calls`.
    pub fn new(calls: Arc<AtomicUsize>) -> Self {
        Self { calls }
    }
}

fn schema(value: Value) -> Arc<Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(Map::new()),
    }
}

/// Every tool of the test server, in listing order.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "add",
            "Adds two integers.",
            schema(json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "echo",
            "Returns its text.",
            schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            })),
        ),
        Tool::new(
            "fail",
            "Always reports an error.",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "slow",
            "Waits `ms` milliseconds, then answers.",
            schema(json!({
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 60000}},
                "required": ["ms"]
            })),
        ),
        Tool::new(
            "env",
            "Reads a variable of the server's environment.",
            schema(json!({
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            })),
        ),
        Tool::new(
            "calls",
            "How many tool calls reached this server.",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ]
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
}

fn argument<'a>(request: &'a CallToolRequestParams, name: &str) -> Option<&'a Value> {
    request.arguments.as_ref().and_then(|args| args.get(name))
}

impl ServerHandler for TestMcpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
        };
        let all = tools();
        let end = (start + PAGE).min(all.len());
        let mut page = ListToolsResult::with_all_items(all.get(start..end).unwrap_or(&[]).to_vec());
        if end < all.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let calls = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        match request.name.as_ref() {
            "add" => {
                let a = argument(&request, "a").and_then(Value::as_i64).unwrap_or(0);
                let b = argument(&request, "b").and_then(Value::as_i64).unwrap_or(0);
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text((a + b).to_string())]);
                result.structured_content = Some(json!({"sum": a + b}));
                Ok(CallToolResponse::Complete(result))
            }
            "echo" => Ok(text(
                argument(&request, "text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )),
            "fail" => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text("failed on purpose"),
            ]))),
            "slow" => {
                let ms = argument(&request, "ms")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms.min(60_000))).await;
                Ok(text(format!("slept {ms} ms")))
            }
            "env" => {
                let name = argument(&request, "name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Ok(text(
                    std::env::var(name).unwrap_or_else(|_| "<unset>".to_owned()),
                ))
            }
            "calls" => Ok(text(calls.to_string())),
            other => Err(ErrorData::invalid_params(
                format!("unknown tool `{other}`"),
                None,
            )),
        }
    }
}

/// Serves the test server on stdin/stdout until the client closes it.
pub async fn serve_stdio() -> std::io::Result<()> {
    let service = TestMcpServer::default()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    service.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

/// A streamable HTTP test server in this process; stopped when dropped.
#[derive(Debug)]
pub struct McpHttpServer {
    url: String,
    calls: Arc<AtomicUsize>,
    headers: Arc<Mutex<Vec<(String, String)>>>,
    stop: CancellationToken,
}

impl McpHttpServer {
    /// The endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many `tools/call` requests reached the server.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The value of request header `name` on the last request that carried it.
    pub fn last_header(&self, name: &str) -> Option<String> {
        self.headers
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }
}

impl Drop for McpHttpServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts the test server on streamable HTTP at 127.0.0.1:0 (path `/mcp`), in this process.
/// Returns its URL and the handle that stops it when dropped. The server records the request
/// headers `authorization` and `x-*` (see [`McpHttpServer::last_header`]).
pub async fn serve_http() -> (String, McpHttpServer) {
    let stop = CancellationToken::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let headers = Arc::new(Mutex::new(Vec::new()));
    let factory_calls = calls.clone();
    let service: StreamableHttpService<TestMcpServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(TestMcpServer::new(factory_calls.clone())),
            Default::default(),
            StreamableHttpServerConfig::default()
                .with_sse_keep_alive(None)
                .with_cancellation_token(stop.child_token()),
        );
    let seen = headers.clone();
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let recorded: Vec<(String, String)> = request
                        .headers()
                        .iter()
                        .filter(|(name, _)| {
                            *name == "authorization" || name.as_str().starts_with("x-")
                        })
                        .map(|(name, value)| {
                            (
                                name.as_str().to_owned(),
                                value.to_str().unwrap_or("").to_owned(),
                            )
                        })
                        .collect();
                    seen.lock().unwrap().extend(recorded);
                    next.run(request)
                },
            ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
            .await;
    });
    let url = format!("http://{addr}/mcp");
    let server = McpHttpServer {
        url: url.clone(),
        calls,
        headers,
        stop,
    };
    (url, server)
}
