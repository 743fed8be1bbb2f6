//! The `toolbridge` command line: `serve`, `check`, `plan`, `providers`, `keys`, `healthcheck`,
//! `--version`. [`main`] (in `run`) is the binary's whole body; the `providers` report is
//! `http::matrix`'s.

mod run;

pub use run::main;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::Config;

#[derive(Debug, Parser)]
#[command(
    name = "toolbridge",
    version,
    about = "A Responses API gateway for every model provider"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve {
        /// The address to listen on (default 127.0.0.1:8080, or TOOLBRIDGE_LISTEN).
        #[arg(long)]
        listen: Option<String>,
        /// A TOML config file. Without it, TOOLBRIDGE_UPSTREAM_URL names the one upstream.
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Validate a config and print its routes.
    Check {
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Explain offline what toolbridge would do with a request: each tool's decision, provider
    /// name and reason, then the translated upstream request.
    Plan {
        /// A preset name, or with --config a configured provider.
        #[arg(long)]
        provider: String,
        /// The upstream model (default: the request's model, or the route's upstream model).
        #[arg(long)]
        model: Option<String>,
        /// A config file whose providers `--provider` names.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The Responses request body (JSON).
        request: PathBuf,
    },
    /// Print each provider's capability matrix: what happens to every tool type, tool_choice
    /// form and parameter, from the same profiles and planner the gateway uses.
    Providers {
        /// One preset, or with --config one configured provider (default: every one).
        #[arg(long)]
        provider: Option<String>,
        /// The upstream model whose per-model patches apply (configured providers only).
        #[arg(long)]
        model: Option<String>,
        /// A config file: its providers are shown instead of the presets.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Manage gateway keys in the store (`TOOLBRIDGE_STORE_URL`, or the config's `store_url`).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Exit 0 when the gateway at `--url` answers its health check (for container
    /// HEALTHCHECKs: the runtime image has no shell or curl).
    Healthcheck {
        #[arg(long, default_value = "http://127.0.0.1:8080/healthz")]
        url: String,
    },
    /// Debug one request: `toolbridge trace show REQUEST_ID` prints its capture (the request
    /// as received, the upstream requests, the final response), when `[capture]` was on.
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
    /// A session's prompt-cache report from the store's cache ledger (every tenant's): each
    /// upstream answer's provider, input tokens, cache reads and writes and cached share.
    /// `SESSION` is the session's `prompt_cache_key` (Codex's thread id), conversation id or
    /// Codex `session-id`.
    Cache {
        session: String,
        /// Print the report as JSON (the `GET /v1/cache/sessions/{id}` body).
        #[arg(long)]
        json: bool,
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Internal: run one jq query for the json tool's isolated mode (a JSON request on stdin, a
    /// JSON answer on stdout). The gateway starts its own binary with this under a memory limit.
    #[command(hide = true, name = "jq-worker")]
    JqWorker,
}

/// `toolbridge trace …`.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Print the capture of the request whose `x-request-id` is `request_id`.
    Show {
        request_id: String,
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
}

/// `toolbridge keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key and print its secret, once.
    Create {
        /// A name for people (who or what uses the key).
        #[arg(long)]
        name: String,
        /// Model names or globs the key may use (default: all).
        #[arg(long, value_delimiter = ',')]
        models: Option<Vec<String>>,
        /// Tool rules the key may expose: `type` or `type:name-glob` (default: all).
        #[arg(long, value_delimiter = ',')]
        tools: Option<Vec<String>>,
        /// Tokens per UTC day.
        #[arg(long)]
        daily_tokens: Option<u64>,
        /// Tokens per UTC month.
        #[arg(long)]
        monthly_tokens: Option<u64>,
        /// The tenant whose stored responses and conversations the key shares (default: the
        /// key's own, so it sees only what it stored itself).
        #[arg(long)]
        tenant: Option<String>,
        /// Let the key read every tenant's stored objects (support); it still writes as its own
        /// tenant.
        #[arg(long)]
        admin: bool,
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// List keys (never secrets).
    List {
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Revoke a key by id.
    Revoke {
        id: String,
        #[arg(long, env = "TOOLBRIDGE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Print a new secret and the `hash` a config `[[keys]]` entry takes for it.
    Hash,
}

/// Loads a config with the process environment, `--listen` winning over both.
pub fn load(path: Option<&std::path::Path>, listen: Option<&str>) -> Result<Config, String> {
    let env = |k: &str| {
        if k == "TOOLBRIDGE_LISTEN"
            && let Some(l) = listen
        {
            return Some(l.to_owned());
        }
        std::env::var(k).ok()
    };
    Config::load(path, &env).map_err(|e| e.to_string())
}

/// What `toolbridge check` prints.
pub fn describe(config: &Config) -> String {
    let mut out = String::new();
    out.push_str(&format!("listen: {}\n", config.listen));
    out.push_str(&format!("body limit: {} bytes\n", config.body_limit));
    out.push_str(&config.server.describe());
    out.push_str(&format!(
        "gateway keys: {}\n",
        if config.keys.is_empty() && !config.require_keys {
            "none (no authentication)\n  (keys created in the store with `toolbridge keys create` turn it on)".to_owned()
        } else {
            format!("{} in config, required", config.keys.len())
        }
    ));
    out.push_str(&format!(
        "store key cache: {} s\n",
        config.key_cache.as_secs()
    ));
    out.push_str(&describe_limits(&config.limits));
    out.push_str(&format!(
        "session events: {}\n",
        describe_sessions(&config.sessions)
    ));
    out.push_str(&config.ops.describe());
    if let Some(tools) = &config.gateway_tools {
        out.push_str(&tools.describe());
    }
    out.push_str("providers:\n");
    for p in config.providers.values() {
        // Chat is the default dialect; another is named first.
        let dialect = if p.dialect == crate::config::Dialect::default() {
            String::new()
        } else {
            format!("{} dialect, ", p.dialect.as_str())
        };
        out.push_str(&format!(
            "  {}: {} ({dialect}preset {}, key {})\n",
            p.name,
            p.base_url,
            p.profile.name,
            if p.api_key.is_some() {
                "set"
            } else {
                "not set"
            }
        ));
        for d in &p.dialect_for {
            out.push_str(&format!(
                "    models {}: {} dialect, preset {} ({})\n",
                d.pattern,
                d.provider.dialect.as_str(),
                d.provider.profile.name,
                d.provider.dialect.http("MODEL", false).path
            ));
        }
    }
    out.push_str("routes:\n");
    for r in &config.routes {
        out.push_str(&format!(
            "  {}{} -> {} ({})\n",
            r.pattern,
            r.conditions(),
            r.provider,
            r.upstream_model
                .as_deref()
                .map(|m| format!("as {m}"))
                .unwrap_or_else(|| "same model name".to_owned())
        ));
    }
    out
}

fn describe_limits(limits: &crate::platform::limits::LimitsConfig) -> String {
    let per = |rpm: Option<std::num::NonZeroU32>, tpm: Option<u64>| {
        format!(
            "{} requests/min, {} tokens/min",
            rpm.map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
            tpm.map_or_else(|| "unlimited".to_owned(), |n| n.to_string())
        )
    };
    let mut out = format!(
        "limits: {}\n  per key: {}\n",
        match &limits.redis_url {
            // Only the host: a Redis URL may carry a password.
            Some(url) => format!(
                "shared through Redis at {}",
                url.split('@').next_back().unwrap_or(url)
            ),
            None => "in process".to_owned(),
        },
        per(limits.key_requests_per_minute, limits.key_tokens_per_minute)
    );
    for (name, p) in &limits.providers {
        out.push_str(&format!(
            "  provider {name}: {}\n",
            per(p.requests_per_minute, p.tokens_per_minute)
        ));
    }
    out
}

/// The session event backend, as `toolbridge check` names it (credentials left out).
pub fn describe_sessions(sessions: &crate::config::SessionsConfig) -> String {
    match &sessions.redis_url {
        None => format!(
            "in-process (at most {} sessions, buffer {}, {} subscribers)",
            sessions.max_sessions, sessions.buffer, sessions.max_subscribers
        ),
        Some(url) => format!(
            "redis {} (channels {}{{tenant length}}:{{tenant}}:{{session_id}}, buffer {}, {} subscribers)",
            crate::config::redact_url(url),
            sessions.channel_prefix,
            sessions.buffer,
            sessions.max_subscribers
        ),
    }
}

/// What `toolbridge plan` prints for a request body, planned for `profile` and translated by
/// `dialect`'s own translator: the upstream request is the body the gateway would send.
pub fn plan_report(
    body: &[u8],
    profile: &toolbridge_providers::profile::Profile,
    dialect: crate::config::Dialect,
    upstream_model: Option<&str>,
) -> Result<String, String> {
    use toolbridge_core::request::{Limits, normalize};
    let fail = |code: &str, message: String| format!("error {code}: {message}");
    let req =
        crate::http::responses::parse_request(body).map_err(|e| fail(e.code(), e.to_string()))?;
    let canonical =
        normalize(&req, &Limits::default()).map_err(|e| fail(e.code(), e.to_string()))?;
    // The conversation's own tools (`additional_tools`, found by `tool_search`) are planned too.
    let plan = toolbridge_core::plan::plan_request(
        &canonical,
        &profile.tools,
        &toolbridge_core::plan::GatewayOffer::default(),
    )
    .map_err(|e| fail(e.code(), e.to_string()))?;
    let model = upstream_model.unwrap_or(&canonical.model);
    let mut diagnostics = canonical.diagnostics.clone();
    diagnostics.extend(plan.diagnostics.iter().cloned());
    // A Responses request starts from the body exactly as written.
    let raw = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(body)
        .ok()
        .map(toolbridge_providers::dialect::Raw::new);
    let outgoing = crate::http::responses::translate(
        dialect,
        &toolbridge_providers::dialect::Source {
            req: &req,
            raw: raw.as_ref(),
            canonical: &canonical,
            stored: false,
            sealed_by_gateway: &crate::http::responses::sealed_by_gateway,
            provenance: None,
        },
        &plan,
        profile,
        model,
        &mut diagnostics,
    );
    let upstream = serde_json::from_slice::<serde_json::Value>(&outgoing.payload())
        .map_err(|e| fail("internal_error", e.to_string()))?;

    let mut out = format!(
        "profile: {}\ndialect: {}\nupstream model: {model}\n\ntools:\n",
        profile.name,
        dialect.as_str()
    );
    if plan.entries.is_empty() {
        out.push_str("  (none)\n");
    }
    let width = plan
        .entries
        .iter()
        .map(|e| e.param.len())
        .max()
        .unwrap_or(0);
    for e in &plan.entries {
        let decision = serde_json::to_value(e.decision)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let name = e.name.as_deref().unwrap_or("-");
        let provider = e.provider_name.as_deref().unwrap_or("-");
        out.push_str(&format!(
            "  {:<width$}  {:<16} {:<28} {:<9} -> {:<28} ({})\n",
            e.param, e.kind, name, decision, provider, e.reason
        ));
    }
    out.push_str(&format!(
        "\ntool_choice upstream: {}\n",
        plan.tool_choice
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_else(|| "(omitted)".to_owned())
    ));
    out.push_str("\ndiagnostics:\n");
    if diagnostics.is_empty() {
        out.push_str("  (none)\n");
    }
    for d in &diagnostics {
        out.push_str(&format!(
            "  {}{}: {}\n",
            d.code,
            d.param
                .as_deref()
                .map(|p| format!(" [{p}]"))
                .unwrap_or_default(),
            d.message
        ));
    }
    out.push_str(&format!(
        "\nupstream request (POST {}):\n",
        dialect.http(model, outgoing.stream()).path
    ));
    out.push_str(&serde_json::to_string_pretty(&upstream).unwrap_or_default());
    out.push('\n');
    Ok(out)
}

/// `toolbridge healthcheck`: one plain-HTTP GET, 200 or an error; bounded to 3 seconds.
pub fn healthcheck(url: &str) -> Result<(), String> {
    use std::io::{Read, Write};
    use std::net::ToSocketAddrs;
    let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if parsed.scheme() != "http" {
        return Err("only http:// URLs are checked".to_owned());
    }
    let host = parsed.host_str().ok_or("the URL has no host")?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let limit = std::time::Duration::from_secs(3);
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let mut tcp = std::net::TcpStream::connect_timeout(&addr, limit)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    tcp.set_read_timeout(Some(limit))
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(limit))
        .map_err(|e| e.to_string())?;
    write!(
        tcp,
        "GET {} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n",
        parsed.path()
    )
    .map_err(|e| e.to_string())?;
    let mut head = [0u8; 64];
    let n = tcp.read(&mut head).map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(head.get(..n).unwrap_or_default());
    match line.split_whitespace().nth(1) {
        Some("200") => Ok(()),
        other => Err(format!("unhealthy: status {}", other.unwrap_or("none"))),
    }
}
