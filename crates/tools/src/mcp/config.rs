//! The configuration of one MCP server (serde): its label, how to reach it, which of its tools
//! to offer, how registry names are formed, and the limits every exchange with it runs under.
//!
//! Secrets (header values, the bearer token, environment values) never appear in `Debug`.
//! [`McpServerConfig::validate`] checks everything that can be checked before connecting.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::tool::ToolError;

/// The longest server label (labels prefix registry names, which are at most 64 bytes).
pub const MAX_LABEL_LEN: usize = 32;

/// One MCP server.
///
/// ```
/// let config: toolbridge_tools::mcp::McpServerConfig = serde_json::from_value(serde_json::json!({
///     "label": "docs",
///     "transport": {"type": "streamable_http", "url": "https://mcp.example.com/mcp",
///                   "headers": {"x-team": "search"}, "bearer_token": "secret"},
///     "allowed_tools": ["search"]
/// })).unwrap();
/// assert!(config.validate().is_ok());
/// assert!(!format!("{config:?}").contains("secret"));
/// ```
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's label, `[A-Za-z0-9_-]{1,32}`: shown as `server_label` and, unless
    /// `prefix_names` is off, the prefix of its tools' registry names (`label__tool`).
    pub label: String,
    /// How to reach the server.
    pub transport: McpTransport,
    /// When set, only these tools (by their name on the server) are offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Registry names are `label__tool` (default) or the server's own names.
    #[serde(default = "default_true")]
    pub prefix_names: bool,
    /// Bounds on the connection and on what the server may send.
    #[serde(default)]
    pub limits: McpLimits,
}

fn default_true() -> bool {
    true
}

/// How an MCP server is reached.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum McpTransport {
    /// A child process speaking MCP on stdin/stdout. It gets a cleared environment plus exactly
    /// `env` (so give `PATH` there, or an absolute `command`), runs in `cwd` (default `/`), its
    /// stderr is discarded, and it is killed when the client is dropped.
    Stdio {
        /// The program.
        command: PathBuf,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// The child's whole environment.
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// The working directory (default `/`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint (`http` or `https`).
    StreamableHttp {
        /// The endpoint URL.
        url: String,
        /// Extra headers sent with every request.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// Sent as `Authorization: Bearer …`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer_token: Option<String>,
    },
}

impl fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("label", &self.label)
            .field("transport", &self.transport)
            .field("allowed_tools", &self.allowed_tools)
            .field("prefix_names", &self.prefix_names)
            .field("limits", &self.limits)
            .finish()
    }
}

impl fmt::Debug for McpTransport {
    /// Names only: header values, the token and environment values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            Self::StreamableHttp {
                url,
                headers,
                bearer_token,
            } => f
                .debug_struct("StreamableHttp")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .field("bearer_token", &bearer_token.as_ref().map(|_| "<redacted>"))
                .finish(),
        }
    }
}

/// Bounds on one server. Every size is in bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpLimits {
    /// Spawning or reaching the server, the handshake and the first tool listing together.
    pub connect_timeout_ms: u64,
    /// The most tools one listing may return (all pages together).
    pub max_tools: usize,
    /// The most pages one listing may take.
    pub max_list_pages: usize,
    /// The largest message accepted from the server (a stdio line, a JSON body, an SSE event).
    pub max_message_bytes: usize,
    /// The largest input schema of one tool (serialised); larger tools are skipped.
    pub max_schema_bytes: usize,
    /// Longer tool descriptions are cut at this length.
    pub max_description_bytes: usize,
}

impl Default for McpLimits {
    fn default() -> Self {
        Self {
            connect_timeout_ms: 10_000,
            max_tools: 128,
            max_list_pages: 16,
            max_message_bytes: 4 * 1024 * 1024,
            max_schema_bytes: 64 * 1024,
            max_description_bytes: 4 * 1024,
        }
    }
}

impl McpLimits {
    /// The connect timeout as a duration.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
}

impl McpServerConfig {
    /// Checks the label, the transport (URL scheme, header names and values, environment names)
    /// and that no limit is zero.
    pub fn validate(&self) -> Result<(), ToolError> {
        let invalid = |message: String| {
            ToolError::InvalidConfiguration(format!("MCP server `{}`: {message}", self.label))
        };
        let label_ok = !self.label.is_empty()
            && self.label.len() <= MAX_LABEL_LEN
            && self
                .label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !label_ok {
            return Err(invalid(format!(
                "the label must be 1 to {MAX_LABEL_LEN} of A-Z, a-z, 0-9, `_` and `-`"
            )));
        }
        let limits = &self.limits;
        if limits.connect_timeout_ms == 0
            || limits.max_tools == 0
            || limits.max_list_pages == 0
            || limits.max_message_bytes == 0
            || limits.max_schema_bytes == 0
        {
            return Err(invalid("limits must not be zero".to_owned()));
        }
        match &self.transport {
            McpTransport::Stdio { command, env, .. } => {
                if command.as_os_str().is_empty() {
                    return Err(invalid("the command is empty".to_owned()));
                }
                for name in env.keys() {
                    if name.is_empty() || name.contains(['=', '\0']) {
                        return Err(invalid(format!(
                            "invalid environment variable name `{name}`"
                        )));
                    }
                }
                if env.values().any(|value| value.contains('\0')) {
                    return Err(invalid("an environment value contains NUL".to_owned()));
                }
            }
            McpTransport::StreamableHttp {
                url,
                headers,
                bearer_token,
            } => {
                let parsed = url::Url::parse(url).map_err(|e| invalid(format!("url: {e}")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(invalid("the url must be http or https".to_owned()));
                }
                header_map(headers).map_err(invalid)?;
                if let Some(token) = bearer_token
                    && http::HeaderValue::from_str(&format!("Bearer {token}")).is_err()
                {
                    return Err(invalid(
                        "the bearer token is not a valid header value".to_owned(),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The configured headers as an HTTP header map; the error names the faulty header (never its
/// value). `authorization` belongs in `bearer_token`, and the transport's own headers are refused.
pub(crate) fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<std::collections::HashMap<http::HeaderName, http::HeaderValue>, String> {
    const RESERVED: [&str; 5] = [
        "authorization",
        "content-type",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
    ];
    let mut map = std::collections::HashMap::new();
    for (name, value) in headers {
        let header = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name `{name}`"))?;
        if RESERVED.contains(&header.as_str()) {
            return Err(format!(
                "header `{name}` is set by the transport (use `bearer_token` for authorization)"
            ));
        }
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("invalid value for header `{name}`"))?;
        map.insert(header, value);
    }
    Ok(map)
}
