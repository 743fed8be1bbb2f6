//! Configuration: a TOML file, or, with no file, a single upstream named by environment
//! variables.
//!
//! The file declares providers (dialect, base URL, API key by env var name, preset, profile
//! patches per provider and per model, timeouts) and routes (a model name or glob → provider and
//! upstream model). Loading resolves everything that can fail (env vars, presets, globs) so that a
//! loaded [`Config`] cannot fail at request time.
//!
//! The module is split by section: `file` holds the serde types as written, `providers` resolves
//! `[providers.*]` (`model_dialects` their `dialect_for` entries), `routes` compiles `[[routes]]` (and answers which target serves a model),
//! `keys` the gateway keys, `sessions` the `[sessions]` table. This file owns [`Config`] and the
//! order in which [`Config::from_file`] resolves the sections (the first error found is the one
//! reported). Every public type stays reachable as `config::Name` through the re-exports below.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// The wire dialect a provider speaks: a closed unit of the providers crate.
pub use toolbridge_providers::dialect::Dialect;
use toolbridge_providers::profile::ProfilePatch;

use crate::error::ConfigError;
use crate::platform::auth::ConfiguredKey;
use crate::platform::limits::{LimitsConfig, LimitsFile};

pub mod console;
mod file;
mod keys;
mod model_dialects;
pub mod ops;
mod providers;
mod routes;
mod sessions;

pub use file::{
    CatalogFile, ClientDisconnect, DialectForFile, FallbackFile, FileConfig, KeyFile, ModelFile,
    ProviderFile, RouteFile, SessionsFile,
};
pub use model_dialects::ModelDialect;
pub use providers::{InvalidCalls, Provider, RepairPolicy};
pub use routes::{KnownModel, Route, RouteCatalog, RouteSignals, Target};
pub use sessions::{DEFAULT_CHANNEL_PREFIX, SessionsConfig, redact_url};

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The default request body limit: 32 MiB, room for base64 images.
pub const DEFAULT_BODY_LIMIT: usize = 32 * 1024 * 1024;

/// A loaded, validated configuration. Its `Debug` output hides every secret.
#[derive(Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub body_limit: usize,
    /// Gateway keys from the config (`[[keys]]` and the plain `api_keys`, hashed).
    pub keys: Vec<ConfiguredKey>,
    /// Keys are asked for even when none is configured.
    pub require_keys: bool,
    /// How long a store key lookup is cached.
    pub key_cache: Duration,
    pub limits: LimitsConfig,
    pub shutdown_grace: Duration,
    /// Header, idle and body read timeouts and the connection cap.
    pub server: crate::platform::serve::limits::ServerLimits,
    /// What a stored stream does when its client goes away.
    pub on_client_disconnect: ClientDisconnect,
    /// Silence after which a keep-alive comment is sent; `None`: never.
    pub keepalive: Option<Duration>,
    /// The store URL; `None` when storage is off.
    pub store_url: Option<String>,
    /// How long stored responses are kept.
    pub store_ttl: Duration,
    /// The largest response stored.
    pub store_max_bytes: usize,
    /// The store's timeouts and circuit.
    pub store_options: toolbridge_store::StoreOptions,
    /// Reasoning keys, first one sealing. Empty: a random key per process.
    pub reasoning_keys: Vec<[u8; 32]>,
    /// The session event side channel.
    pub sessions: SessionsConfig,
    pub providers: BTreeMap<String, Provider>,
    pub routes: Vec<Route>,
    /// Tools the gateway runs itself; `None`: none.
    pub gateway_tools: crate::tools::Shared,
    /// Metrics, traces, log format and request capture.
    pub ops: ops::OpsConfig,
    /// The console and its request journal.
    pub console: console::ConsoleConfig,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("body_limit", &self.body_limit)
            .field("keys", &format_args!("[{} redacted]", self.keys.len()))
            .field("limits", &self.limits.any())
            .field("shutdown_grace", &self.shutdown_grace)
            .field("server", &self.server)
            .field("keepalive", &self.keepalive)
            .field(
                "store",
                &self
                    .store_url
                    .as_deref()
                    .map(|u| u.split('@').next_back().unwrap_or(u)),
            )
            .field(
                "reasoning_keys",
                &format_args!("[{} redacted]", self.reasoning_keys.len()),
            )
            .field("sessions", &self.sessions)
            .field("providers", &self.providers)
            .field("routes", &self.routes)
            .field("gateway_tools", &self.gateway_tools.is_some())
            .field("ops", &self.ops)
            .field("console", &self.console)
            .finish()
    }
}

/// Where environment variables come from; a function so tests need not touch the process env.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Config {
    /// Loads from a file, or from the environment when `path` is `None`.
    pub fn load(path: Option<&Path>, env: Env<'_>) -> Result<Self, ConfigError> {
        match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
                let file: FileConfig = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
                Self::from_file(file, env)
            }
            None => Self::from_env(env),
        }
    }

    /// The zero-config start: one upstream from `TOOLBRIDGE_UPSTREAM_URL` and friends, every
    /// model routed to it unchanged.
    pub fn from_env(env: Env<'_>) -> Result<Self, ConfigError> {
        let base_url = env("TOOLBRIDGE_UPSTREAM_URL").ok_or(ConfigError::NoUpstream)?;
        let mut providers = BTreeMap::new();
        providers.insert(
            "upstream".to_owned(),
            ProviderFile {
                dialect: None,
                base_url,
                api_key_env: Some("TOOLBRIDGE_UPSTREAM_API_KEY".to_owned()),
                api_key_envs: Vec::new(),
                preset: env("TOOLBRIDGE_UPSTREAM_PRESET"),
                profile: ProfilePatch::default(),
                request_timeout_secs: None,
                idle_timeout_secs: None,
                connect_timeout_secs: None,
                stream_timeout_secs: None,
                max_retries: None,
                retry_budget_secs: None,
                repair: None,
                invalid_calls: None,
                invalid_calls_after_reask: None,
                models: BTreeMap::new(),
                dialect_for: Vec::new(),
            },
        );
        let file = FileConfig {
            listen: None,
            body_limit_bytes: None,
            api_keys: Vec::new(),
            api_keys_env: None,
            keys: Vec::new(),
            require_keys: None,
            key_cache_secs: None,
            limits: LimitsFile::default(),
            shutdown_grace_secs: None,
            on_client_disconnect: None,
            keepalive_secs: None,
            store_url: None,
            store_ttl_secs: None,
            store_max_response_bytes: None,
            store_acquire_timeout_ms: None,
            store_timeout_ms: None,
            store_circuit_failures: None,
            store_circuit_cooldown_ms: None,
            reasoning_keys: Vec::new(),
            reasoning_keys_env: None,
            sessions: SessionsFile::default(),
            providers,
            routes: vec![RouteFile {
                model: "*".to_owned(),
                provider: "upstream".to_owned(),
                upstream_model: None,
                fallbacks: Vec::new(),
                request_kind: None,
                agent_name: None,
                tier: None,
                catalog: Default::default(),
            }],
            gateway_tools: None,
            ..FileConfig::default()
        };
        Self::from_file(file, env)
    }

    /// Validates a parsed file. `TOOLBRIDGE_LISTEN` and `TOOLBRIDGE_API_KEYS` apply on top.
    pub fn from_file(file: FileConfig, env: Env<'_>) -> Result<Self, ConfigError> {
        let store_options = store_options(&file);
        let listen = listen(file.listen, env)?;
        let api_keys = with_env_list(file.api_keys, file.api_keys_env, "TOOLBRIDGE_API_KEYS", env);
        if api_keys.iter().any(String::is_empty) {
            return Err(ConfigError::invalid("api_keys", "keys must not be empty"));
        }
        let keys = keys::gateway_keys(&api_keys, file.keys)?;
        let reasoning_keys = reasoning_keys(&with_env_list(
            file.reasoning_keys,
            file.reasoning_keys_env,
            "TOOLBRIDGE_REASONING_KEYS",
            env,
        ))?;
        let providers = providers::resolve_all(file.providers, env)?;
        let routes = routes::compile(file.routes, &providers)?;
        let names: Vec<&str> = providers.keys().map(String::as_str).collect();
        let limits = LimitsConfig::from_file(file.limits, env("TOOLBRIDGE_REDIS_URL"), &names)
            .map_err(|(field, message)| ConfigError::invalid(field, message))?;
        let store_url = store_url(file.store_url, env)?;
        check_budgets_have_store(&keys, store_url.is_some())?;
        let server = crate::platform::serve::limits::ServerLimits::from_file(&file.server)?;
        let ops = ops::OpsConfig::resolve(
            crate::config::ops::OpsFiles {
                metrics: &file.metrics,
                telemetry: &file.telemetry,
                logging: &file.logging,
                capture: &file.capture,
            },
            store_url.is_some(),
            env,
        )?;
        let sessions = SessionsConfig::from_file(file.sessions, env)?;
        let console = console::ConsoleConfig::from_file(&file.console, env)?;
        let gateway_tools = match &file.gateway_tools {
            Some(tools) => Some(std::sync::Arc::new(
                crate::tools::GatewayTools::build(tools, env)
                    .map_err(|e| ConfigError::invalid("gateway_tools", e))?,
            )),
            None => None,
        };
        Ok(Self {
            ops,
            console,
            listen,
            body_limit: file.body_limit_bytes.unwrap_or(DEFAULT_BODY_LIMIT),
            keys,
            require_keys: file.require_keys.unwrap_or(false),
            key_cache: Duration::from_secs(file.key_cache_secs.unwrap_or(30)),
            limits,
            shutdown_grace: Duration::from_secs(file.shutdown_grace_secs.unwrap_or(30)),
            server,
            on_client_disconnect: file.on_client_disconnect.unwrap_or_default(),
            keepalive: match file.keepalive_secs.unwrap_or(15) {
                0 => None,
                secs => Some(Duration::from_secs(secs)),
            },
            store_url,
            store_ttl: Duration::from_secs(file.store_ttl_secs.unwrap_or(30 * 24 * 3600)),
            store_max_bytes: file.store_max_response_bytes.unwrap_or(16 * 1024 * 1024),
            store_options,
            reasoning_keys,
            sessions,
            providers,
            routes,
            gateway_tools,
        })
    }
}

/// The listen address: `TOOLBRIDGE_LISTEN`, the file's, or [`DEFAULT_LISTEN`].
fn listen(written: Option<String>, env: Env<'_>) -> Result<SocketAddr, ConfigError> {
    let text = env("TOOLBRIDGE_LISTEN")
        .or(written)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    text.parse().map_err(|_| {
        ConfigError::invalid(
            "listen",
            format!("`{text}` is not an address like 127.0.0.1:8080"),
        )
    })
}

/// A list from the file extended by the comma-separated entries of an environment variable
/// (`var`, or `default_var` when the file names none); blank entries of the variable are dropped.
fn with_env_list(
    mut list: Vec<String>,
    var: Option<String>,
    default_var: &str,
    env: Env<'_>,
) -> Vec<String> {
    let var = var.unwrap_or_else(|| default_var.to_owned());
    if let Some(more) = env(&var) {
        list.extend(
            more.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_owned),
        );
    }
    list
}

/// The reasoning keys, decoded; the first one seals.
fn reasoning_keys(texts: &[String]) -> Result<Vec<[u8; 32]>, ConfigError> {
    let mut keys = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        keys.push(
            crate::platform::seal::AeadSealer::parse_key(text)
                .map_err(|e| ConfigError::invalid(format!("reasoning_keys[{i}]"), e))?,
        );
    }
    Ok(keys)
}

/// The store URL: `TOOLBRIDGE_STORE_URL`, the file's, or `sqlite://toolbridge.db`; `None` when
/// storage is off (`none` or empty).
fn store_url(written: Option<String>, env: Env<'_>) -> Result<Option<String>, ConfigError> {
    match env("TOOLBRIDGE_STORE_URL")
        .or(written)
        .unwrap_or_else(|| "sqlite://toolbridge.db".to_owned())
    {
        off if off == "none" || off.is_empty() => Ok(None),
        url if url.starts_with("sqlite:")
            || url.starts_with("postgres://")
            || url.starts_with("postgresql://") =>
        {
            Ok(Some(url))
        }
        other => Err(ConfigError::invalid(
            "store_url",
            format!("`{other}` is not sqlite://PATH, postgres://… or none"),
        )),
    }
}

/// Token budgets are counted in the store, so a key with one needs the store on.
fn check_budgets_have_store(keys: &[ConfiguredKey], store_on: bool) -> Result<(), ConfigError> {
    if !store_on
        && let Some(i) = keys
            .iter()
            .position(|k| k.scopes.daily_tokens.is_some() || k.scopes.monthly_tokens.is_some())
    {
        return Err(ConfigError::invalid(
            format!("keys[{i}]"),
            "token budgets are counted in the store, and the store is off",
        ));
    }
    Ok(())
}

/// The store's timeouts and circuit, each defaulting to [`toolbridge_store::StoreOptions`]'s.
fn store_options(file: &FileConfig) -> toolbridge_store::StoreOptions {
    let defaults = toolbridge_store::StoreOptions::default();
    let ms = |v: Option<u64>, d: Duration| v.map_or(d, |v| Duration::from_millis(v.max(1)));
    toolbridge_store::StoreOptions {
        acquire_timeout: ms(file.store_acquire_timeout_ms, defaults.acquire_timeout),
        timeout: ms(file.store_timeout_ms, defaults.timeout),
        circuit_failures: file
            .store_circuit_failures
            .unwrap_or(defaults.circuit_failures),
        circuit_cooldown: ms(file.store_circuit_cooldown_ms, defaults.circuit_cooldown),
    }
}

#[cfg(test)]
mod tests;
