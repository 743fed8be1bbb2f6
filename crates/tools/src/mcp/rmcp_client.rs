//! [`RmcpClient`]: the [`McpClient`] over the official Rust SDK (`rmcp`), on stdio or
//! streamable HTTP. The only module that names `rmcp` types.
//!
//! Stdio spawns the child itself (not through `rmcp`'s `TokioChildProcess`) so that the
//! environment is cleared, the working directory set, stdout lines bounded by
//! [`McpLimits::max_message_bytes`], and the child killed when the client is dropped even
//! outside a runtime. Streamable HTTP uses our reqwest (rustls with aws-lc-rs), redirects off,
//! with the same byte bound on JSON bodies and SSE events.

use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, PaginatedRequestParams, ResourceContents,
};
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use super::client::{McpCallResult, McpClient, McpToolSpec};
use super::config::{McpLimits, McpServerConfig, McpTransport, header_map};
use crate::registry::{check_output_size, wait_cancelled};
use crate::tool::{BoxFuture, ToolContext, ToolError};

/// How long [`McpClient::close`] waits for the session and the child to end.
const CLOSE_LIMIT: Duration = Duration::from_secs(3);

/// The longest error text kept from a server or the SDK.
const MAX_ERROR_TEXT: usize = 1024;

type Service = RunningService<RoleClient, ClientConfig>;

/// An MCP session opened with `rmcp`.
pub struct RmcpClient {
    label: String,
    limits: McpLimits,
    peer: Peer<RoleClient>,
    service: Mutex<Option<Service>>,
    /// The stdio child; `kill_on_drop` is set, so dropping the client kills it.
    child: Mutex<Option<Child>>,
}

impl std::fmt::Debug for RmcpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RmcpClient")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl RmcpClient {
    /// Connects and completes the MCP handshake before `deadline`. `http` replaces the default
    /// HTTP client (redirects off) for streamable HTTP, e.g. an SSRF-guarded one for URLs that
    /// come from requests rather than from configuration.
    pub async fn connect(
        config: &McpServerConfig,
        http: Option<reqwest::Client>,
        deadline: tokio::time::Instant,
    ) -> Result<Self, ToolError> {
        config.validate()?;
        let label = config.label.clone();
        let limits = config.limits.clone();
        let connect_error = |message: String| ToolError::McpConnect {
            server: label.clone(),
            message: clip(message),
        };
        let (service, child) = match &config.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = Command::new(command);
                cmd.args(args)
                    .env_clear()
                    .envs(env)
                    .current_dir(cwd.as_deref().unwrap_or(std::path::Path::new("/")))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .kill_on_drop(true);
                let mut child = cmd.spawn().map_err(|e| {
                    connect_error(format!("cannot start {}: {e}", command.display()))
                })?;
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(connect_error("the child's stdio is not piped".to_owned()));
                };
                let transport = AsyncRwTransport::new_client(stdout, stdin)
                    .with_max_line_length(limits.max_message_bytes);
                // On failure `child` is dropped here, which kills it.
                let service = handshake(transport, deadline)
                    .await
                    .map_err(connect_error)?;
                (service, Some(child))
            }
            McpTransport::StreamableHttp {
                url,
                headers,
                bearer_token,
            } => {
                let mut transport_config =
                    StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        .custom_headers(header_map(headers).map_err(connect_error)?)
                        .max_json_response_size(limits.max_message_bytes)
                        .max_sse_event_size(limits.max_message_bytes);
                if let Some(token) = bearer_token {
                    transport_config = transport_config.auth_header(token.clone());
                }
                let http = match http {
                    Some(http) => http,
                    None => reqwest::Client::builder()
                        .redirect(reqwest::redirect::Policy::none())
                        .connect_timeout(limits.connect_timeout())
                        .build()
                        .map_err(|e| connect_error(format!("cannot build the HTTP client: {e}")))?,
                };
                let transport = StreamableHttpClientTransport::with_client(http, transport_config);
                let service = handshake(transport, deadline)
                    .await
                    .map_err(connect_error)?;
                (service, None)
            }
        };
        Ok(Self {
            label: config.label.clone(),
            limits,
            peer: service.peer().clone(),
            service: Mutex::new(Some(service)),
            child: Mutex::new(child),
        })
    }

    fn protocol_error(&self, err: ServiceError) -> ToolError {
        match err {
            ServiceError::Timeout { .. } => ToolError::Timeout,
            ServiceError::Cancelled { .. } => ToolError::Cancelled,
            other => ToolError::McpProtocol {
                server: self.label.clone(),
                message: clip(other.to_string()),
            },
        }
    }

    async fn list_all(&self) -> Result<Vec<McpToolSpec>, ToolError> {
        let max_tools = self.limits.max_tools;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..self.limits.max_list_pages {
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = self
                .peer
                .list_tools(params)
                .await
                .map_err(|e| self.protocol_error(e))?;
            for tool in page.tools {
                if tools.len() >= max_tools {
                    return Err(ToolError::LimitExceeded(format!(
                        "MCP server `{}` lists more than {max_tools} tools",
                        self.label
                    )));
                }
                tools.push(McpToolSpec {
                    name: tool.name.into_owned(),
                    description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
                    input_schema: Value::Object((*tool.input_schema).clone()),
                });
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
        Err(ToolError::LimitExceeded(format!(
            "MCP server `{}` lists its tools in more than {} pages",
            self.label, self.limits.max_list_pages
        )))
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        max_output_bytes: usize,
    ) -> Result<McpCallResult, ToolError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        match arguments {
            Value::Object(map) => params = params.with_arguments(map),
            Value::Null => {}
            _ => {
                return Err(ToolError::InvalidArguments {
                    path: "/".to_owned(),
                    message: "MCP tool arguments must be a JSON object".to_owned(),
                });
            }
        }
        let result = self
            .peer
            .call_tool(params)
            .await
            .map_err(|e| self.protocol_error(e))?;
        convert_result(result, max_output_bytes)
    }
}

/// The `initialize` exchange, bounded by `deadline`.
async fn handshake<T, E, A>(transport: T, deadline: tokio::time::Instant) -> Result<Service, String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("toolbridge", env!("CARGO_PKG_VERSION")),
    );
    match tokio::time::timeout_at(deadline, info.serve(transport)).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(err)) => Err(describe_init_error(&err)),
        Err(_elapsed) => Err("the handshake did not finish in time".to_owned()),
    }
}

fn describe_init_error(err: &ClientInitializeError) -> String {
    // The transport error's own chain says why (connection refused, DNS, the child exited).
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Our view of a `tools/call` result, failing as soon as it passes `limit` bytes.
fn convert_result(result: CallToolResult, limit: usize) -> Result<McpCallResult, ToolError> {
    let mut text = String::new();
    let mut non_text_parts = 0;
    for block in result.content {
        let part = match block {
            ContentBlock::Text(content) => content.text,
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { text, .. } => text,
                _ => {
                    non_text_parts += 1;
                    continue;
                }
            },
            _ => {
                non_text_parts += 1;
                continue;
            }
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&part);
        if text.len() > limit {
            return Err(ToolError::OutputTooLarge { limit });
        }
    }
    if let Some(structured) = &result.structured_content {
        check_output_size(structured, limit.saturating_sub(text.len()))?;
    }
    Ok(McpCallResult {
        text,
        structured_content: result.structured_content,
        is_error: result.is_error.unwrap_or(false),
        non_text_parts,
    })
}

/// Runs `fut` under the context's cancellation and deadline. Dropping an `rmcp` request future
/// sends `notifications/cancelled` to the server.
async fn bounded<F: std::future::Future>(
    ctx: &ToolContext,
    fut: F,
) -> Result<F::Output, ToolError> {
    if ctx.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    if tokio::time::Instant::now() >= ctx.deadline {
        return Err(ToolError::Timeout);
    }
    let mut cancelled = ctx.cancelled.clone();
    tokio::select! {
        biased;
        () = wait_cancelled(&mut cancelled) => Err(ToolError::Cancelled),
        outcome = tokio::time::timeout_at(ctx.deadline, fut) => {
            outcome.map_err(|_elapsed| ToolError::Timeout)
        }
    }
}

/// Cuts a message to [`MAX_ERROR_TEXT`] bytes at a character boundary.
pub(crate) fn clip(mut message: String) -> String {
    if message.len() > MAX_ERROR_TEXT {
        let mut end = MAX_ERROR_TEXT;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

impl McpClient for RmcpClient {
    fn label(&self) -> &str {
        &self.label
    }

    fn list_tools<'a>(
        &'a self,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Vec<McpToolSpec>, ToolError>> {
        Box::pin(async move { bounded(ctx, self.list_all()).await? })
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<McpCallResult, ToolError>> {
        Box::pin(
            async move { bounded(ctx, self.call(name, arguments, ctx.max_output_bytes)).await? },
        )
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(mut service) = self.service.lock().await.take() {
                // Closing stdin is how an MCP stdio server is asked to exit.
                let _ = tokio::time::timeout(CLOSE_LIMIT, service.close()).await;
            }
            let child = self.child.lock().await.take();
            // A server that does not exit when its stdin closes is killed.
            if let Some(mut child) = child
                && !matches!(
                    tokio::time::timeout(CLOSE_LIMIT, child.wait()).await,
                    Ok(Ok(_))
                )
            {
                let _ = child.kill().await;
            }
        })
    }
}
