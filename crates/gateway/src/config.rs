//! Configuration: a TOML file, or, with no file, a single upstream named by environment
//! variables.
//!
//! The file declares providers (dialect, base URL, API key by env var name, preset, profile
//! patches per provider and per model, timeouts) and routes (a model name or glob → provider and
//! upstream model). Loading resolves everything that can fail (env vars, presets, globs) so that a
//! loaded [`Config`] cannot fail at request time.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
/// The wire dialect a provider speaks: a closed unit of the providers crate.
pub use toolbridge_providers::dialect::Dialect;
use toolbridge_providers::profile::{Profile, ProfileError, ProfilePatch};

use crate::auth::keys::{Scope, Scopes, hash_secret, parse_hash};
use crate::auth::{ConfiguredKey, cli::MAX_NAME_LEN};
use crate::error::ConfigError;
use crate::limits::{LimitsConfig, LimitsFile};

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The default request body limit: 32 MiB, room for base64 images.
pub const DEFAULT_BODY_LIMIT: usize = 32 * 1024 * 1024;

/// What a stored streamed response does when its client goes away (`on_client_disconnect`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientDisconnect {
    /// Read the upstream to the end (under the stream's deadlines) and store the whole answer:
    /// the tokens are paid for, and `GET` returns the answer.
    #[default]
    Finish,
    /// Stop the upstream and store the response `cancelled`.
    Cancel,
}

/// The configuration file as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub body_limit_bytes: Option<usize>,
    /// Gateway API keys clients must present. Empty: no authentication.
    #[serde(default)]
    pub api_keys: Vec<String>,
    /// An environment variable holding more gateway keys, comma-separated.
    pub api_keys_env: Option<String>,
    /// Gateway keys by the SHA-256 of their secret, each with its scopes.
    #[serde(default)]
    pub keys: Vec<KeyFile>,
    /// Ask every request for a key even when the config declares none (keys in the store only).
    /// Without it, keys are required as soon as the config declares one or the store holds one.
    pub require_keys: Option<bool>,
    /// How long a store key lookup is cached in process, in seconds (so a revocation takes
    /// effect within it). Default 30.
    pub key_cache_secs: Option<u64>,
    /// Rate limits per key and per provider.
    #[serde(default)]
    pub limits: LimitsFile,
    /// Seconds in-flight streams get to finish after SIGTERM/SIGINT.
    pub shutdown_grace_secs: Option<u64>,
    /// The server's limits on slow clients and connections.
    #[serde(default)]
    pub server: crate::serve::limits::ServerFile,
    /// What happens to a stored streamed response whose client goes away: `finish` (default:
    /// the upstream is read to the end and the whole answer stored) or `cancel` (the upstream is
    /// stopped and the response stored `cancelled`).
    pub on_client_disconnect: Option<ClientDisconnect>,
    /// Seconds of upstream silence after which a stream gets an SSE keep-alive comment; 0
    /// turns them off. Default 15.
    pub keepalive_secs: Option<u64>,
    /// Where responses are stored: `sqlite://PATH` (default `sqlite://toolbridge.db`),
    /// `postgres://…`, or `none`. `TOOLBRIDGE_STORE_URL` overrides it.
    pub store_url: Option<String>,
    /// How long a stored response is kept, in seconds. Default 30 days.
    pub store_ttl_secs: Option<u64>,
    /// The largest response (object plus items, as JSON) that is stored. Default 16 MiB.
    pub store_max_response_bytes: Option<usize>,
    /// The longest wait for a store connection, in milliseconds. Default 2000.
    pub store_acquire_timeout_ms: Option<u64>,
    /// The longest one store operation may take, in milliseconds (PostgreSQL also gets it as
    /// `statement_timeout`). Default 5000.
    pub store_timeout_ms: Option<u64>,
    /// Store outages in a row after which store calls fail at once for the cool-down. Default
    /// 5; 0 never opens the circuit.
    pub store_circuit_failures: Option<u32>,
    /// How long store calls fail at once after the circuit opens, in milliseconds. Default
    /// 10000.
    pub store_circuit_cooldown_ms: Option<u64>,
    /// Base64 32-byte keys sealing reasoning into `encrypted_content`; the first seals, all
    /// open. Every gateway process serving the same clients needs the same keys.
    #[serde(default)]
    pub reasoning_keys: Vec<String>,
    /// An environment variable holding more reasoning keys, comma-separated.
    pub reasoning_keys_env: Option<String>,
    /// The session event side channel (`GET /v1/sessions/{id}/events`).
    #[serde(default)]
    pub sessions: SessionsFile,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderFile>,
    #[serde(default)]
    pub routes: Vec<RouteFile>,
    /// Tools the gateway runs itself.
    pub gateway_tools: Option<crate::gateway_tools::ToolsFile>,
    /// Prometheus metrics (`/metrics` by default).
    #[serde(default)]
    pub metrics: crate::ops::config::MetricsFile,
    /// OpenTelemetry traces over OTLP/HTTP.
    #[serde(default)]
    pub telemetry: crate::ops::config::TelemetryFile,
    /// Log format.
    #[serde(default)]
    pub logging: crate::ops::config::LoggingFile,
    /// Opt-in request capture into the store.
    #[serde(default)]
    pub capture: crate::ops::config::CaptureFile,
}

/// One `[[keys]]` entry: a key known by its hash.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    /// The key's id in logs, ledgers and limits. Default: the name.
    pub id: Option<String>,
    pub name: String,
    /// `sha256:` and the hex SHA-256 of the secret (`toolbridge keys hash` makes a pair).
    pub hash: String,
    pub models: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    pub daily_tokens: Option<u64>,
    pub monthly_tokens: Option<u64>,
    /// The tenant whose stored objects the key shares. Default: the key's id.
    pub tenant: Option<String>,
    /// Reads every tenant's stored objects. Default false.
    #[serde(default)]
    pub admin: bool,
}

/// `[sessions]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsFile {
    /// `redis://…` or `rediss://…`: session events go through Redis pub/sub, so a subscriber
    /// on any gateway process sees every process's events. Absent: in-process.
    /// `TOOLBRIDGE_SESSIONS_REDIS_URL` overrides it (`none` turns Redis off).
    pub redis_url: Option<String>,
    /// The most sessions watched at once (in-process). Default 1024.
    pub max_sessions: Option<usize>,
    /// Events buffered per subscriber before it counts as lagging and is dropped. Default 256.
    pub buffer: Option<usize>,
    /// The most subscribers connected at once. Default 1024.
    pub max_subscribers: Option<usize>,
    /// The Redis channel name before the session id. Default `toolbridge:session:`.
    pub channel_prefix: Option<String>,
}

/// The resolved `[sessions]` section.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionsConfig {
    pub redis_url: Option<String>,
    pub max_sessions: usize,
    pub buffer: usize,
    pub max_subscribers: usize,
    pub channel_prefix: String,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            redis_url: None,
            max_sessions: 1024,
            buffer: 256,
            max_subscribers: 1024,
            channel_prefix: DEFAULT_CHANNEL_PREFIX.to_owned(),
        }
    }
}

/// The Redis channel of session `id` is this prefix followed by the id.
pub const DEFAULT_CHANNEL_PREFIX: &str = "toolbridge:session:";

impl std::fmt::Debug for SessionsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionsConfig")
            .field("redis", &self.redis_url.as_deref().map(redact_url))
            .field("max_sessions", &self.max_sessions)
            .field("buffer", &self.buffer)
            .field("max_subscribers", &self.max_subscribers)
            .field("channel_prefix", &self.channel_prefix)
            .finish()
    }
}

/// A URL without its credentials: what follows the last `@`, or the whole URL.
pub fn redact_url(url: &str) -> String {
    match url.rsplit_once('@') {
        Some((before, host)) => {
            let scheme = before.split_once("://").map_or("", |(s, _)| s);
            format!("{scheme}://…@{host}")
        }
        None => url.to_owned(),
    }
}

impl SessionsConfig {
    fn from_file(file: SessionsFile, env: Env<'_>) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let redis_url = match env("TOOLBRIDGE_SESSIONS_REDIS_URL").or(file.redis_url) {
            None => None,
            Some(off) if off.is_empty() || off == "none" => None,
            Some(url) => {
                if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                    return Err(ConfigError::invalid(
                        "sessions.redis_url",
                        format!("`{}` is not redis://… or rediss://…", redact_url(&url)),
                    ));
                }
                redis::Client::open(url.as_str())
                    .map_err(|e| ConfigError::invalid("sessions.redis_url", e.to_string()))?;
                Some(url)
            }
        };
        let bounded = |field: &str, value: Option<usize>, default: usize, max: usize| {
            let value = value.unwrap_or(default);
            if value == 0 || value > max {
                Err(ConfigError::invalid(
                    format!("sessions.{field}"),
                    format!("{value} is not between 1 and {max}"),
                ))
            } else {
                Ok(value)
            }
        };
        let channel_prefix = file
            .channel_prefix
            .unwrap_or(defaults.channel_prefix.clone());
        if channel_prefix.len() > 128 || channel_prefix.chars().any(|c| c.is_whitespace()) {
            return Err(ConfigError::invalid(
                "sessions.channel_prefix",
                "at most 128 characters, without spaces",
            ));
        }
        Ok(Self {
            redis_url,
            max_sessions: bounded(
                "max_sessions",
                file.max_sessions,
                defaults.max_sessions,
                1_000_000,
            )?,
            buffer: bounded("buffer", file.buffer, defaults.buffer, 65_536)?,
            max_subscribers: bounded(
                "max_subscribers",
                file.max_subscribers,
                defaults.max_subscribers,
                1_000_000,
            )?,
            channel_prefix,
        })
    }
}

/// One provider as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderFile {
    /// The wire dialect: `chat` (Chat Completions, the default), `anthropic` (Messages) or
    /// `gemini` (generateContent).
    #[serde(default = "default_dialect")]
    pub dialect: String,
    pub base_url: String,
    /// The environment variable holding the upstream API key.
    pub api_key_env: Option<String>,
    /// The preset the profile starts from; by default the dialect's own (`generic` for Chat,
    /// `anthropic`, `gemini`).
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub profile: ProfilePatch,
    pub request_timeout_secs: Option<u64>,
    pub idle_timeout_secs: Option<u64>,
    pub connect_timeout_secs: Option<u64>,
    /// Longest a stream may last in all (distinct from the idle timeout).
    pub stream_timeout_secs: Option<u64>,
    /// Retries before the first upstream byte (connect errors, 5xx, 429). Default 2.
    pub max_retries: Option<u32>,
    /// The most seconds spent waiting between retries of one request. Default 15.
    pub retry_budget_secs: Option<u64>,
    /// Whether the model's tool calls are checked and repaired (arguments against their schema,
    /// names, custom tools' grammars). Default true.
    pub repair: Option<bool>,
    /// What happens to a call still invalid after repair: `reask` (the default: the upstream is
    /// asked once more, hidden), `pass` (handed on as best effort) or `fail`.
    pub invalid_calls: Option<String>,
    /// What happens to a call still invalid after the re-ask: `pass` (the default) or `fail`.
    pub invalid_calls_after_reask: Option<String>,
    #[serde(default)]
    pub models: BTreeMap<String, ModelFile>,
}

/// What happens to a tool call still invalid after repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidCalls {
    /// One hidden re-ask with the validation error as the call's result.
    Reask,
    /// Handed on as best effort, with an `arguments_invalid` diagnostic.
    Pass,
    /// The response fails with `invalid_tool_call`.
    Fail,
}

impl InvalidCalls {
    fn parse(name: &str) -> Option<Self> {
        match name {
            "reask" => Some(Self::Reask),
            "pass" => Some(Self::Pass),
            "fail" => Some(Self::Fail),
            _ => None,
        }
    }
}

/// How a provider's tool calls are repaired and what happens to invalid ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairPolicy {
    /// Calls are checked and repaired; their arguments are held until complete.
    pub enabled: bool,
    pub invalid_calls: InvalidCalls,
    /// After the one re-ask: `Pass` or `Fail`.
    pub after_reask: InvalidCalls,
}

impl Default for RepairPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            invalid_calls: InvalidCalls::Reask,
            after_reask: InvalidCalls::Pass,
        }
    }
}

/// Per-model overrides as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    pub context_window: Option<u64>,
    #[serde(default)]
    pub profile: ProfilePatch,
}

/// One route as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteFile {
    /// A model name or a glob (`deepseek-*`, `*`).
    pub model: String,
    pub provider: String,
    /// The model name sent upstream; by default the requested name.
    pub upstream_model: Option<String>,
    /// Where to go, in order, when this route's provider fails before answering (connect error,
    /// 5xx or 429 after retries).
    #[serde(default)]
    pub fallbacks: Vec<FallbackFile>,
}

/// One step of a route's fallback chain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackFile {
    pub provider: String,
    /// The model name sent to this provider; by default the route's upstream model.
    pub upstream_model: Option<String>,
}

fn default_dialect() -> String {
    "chat".to_owned()
}

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
    pub server: crate::serve::limits::ServerLimits,
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
    pub gateway_tools: crate::gateway_tools::Shared,
    /// Metrics, traces, log format and request capture.
    pub ops: crate::ops::OpsConfig,
}

/// A resolved provider. Its `Debug` output hides the API key.
#[derive(Clone)]
pub struct Provider {
    pub name: String,
    pub dialect: Dialect,
    pub base_url: String,
    /// The upstream API key, read from the environment at load time. Never logged.
    pub api_key: Option<String>,
    pub profile: Profile,
    /// The profile of each model with its own patch (`models.<name>.profile`), resolved at load.
    pub model_profiles: BTreeMap<String, Profile>,
    pub models: BTreeMap<String, ModelFile>,
    pub request_timeout: Duration,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub stream_timeout: Duration,
    pub max_retries: u32,
    pub retry_budget: Duration,
    pub repair: RepairPolicy,
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
            .finish()
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("dialect", &self.dialect)
            .field("base_url", &self.base_url)
            .field(
                "api_key",
                &if self.api_key.is_some() {
                    "[redacted]"
                } else {
                    "none"
                },
            )
            .field("profile", &self.profile.name)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("stream_timeout", &self.stream_timeout)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// The profile for one upstream model: the provider's, patched for that model.
    pub fn profile_for(&self, upstream_model: &str) -> Profile {
        self.model_profiles
            .get(upstream_model)
            .unwrap_or(&self.profile)
            .clone()
    }

    /// The context window of an upstream model, from config or the preset.
    pub fn context_window(&self, upstream_model: &str) -> Option<u64> {
        self.models
            .get(upstream_model)
            .and_then(|m| m.context_window)
            .or_else(|| self.profile.context_window(upstream_model))
    }
}

/// A resolved route.
#[derive(Debug, Clone)]
pub struct Route {
    pub pattern: String,
    pub matcher: globset::GlobMatcher,
    pub provider: String,
    pub upstream_model: Option<String>,
    /// `(provider, upstream model)` to try in order after `provider`.
    pub fallbacks: Vec<(String, Option<String>)>,
}

/// One provider and model a request can be sent to.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub provider: &'a Provider,
    pub upstream_model: String,
}

impl Route {
    /// True when the pattern is a plain model name rather than a glob.
    pub fn is_exact(&self) -> bool {
        !self.pattern.contains(['*', '?', '[', '{'])
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
                dialect: default_dialect(),
                base_url,
                api_key_env: Some("TOOLBRIDGE_UPSTREAM_API_KEY".to_owned()),
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
            }],
            gateway_tools: None,
            ..FileConfig::default()
        };
        Self::from_file(file, env)
    }

    /// Validates a parsed file. `TOOLBRIDGE_LISTEN` and `TOOLBRIDGE_API_KEYS` apply on top.
    pub fn from_file(file: FileConfig, env: Env<'_>) -> Result<Self, ConfigError> {
        let listen_text = env("TOOLBRIDGE_LISTEN")
            .or(file.listen)
            .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen = listen_text.parse().map_err(|_| {
            ConfigError::invalid(
                "listen",
                format!("`{listen_text}` is not an address like 127.0.0.1:8080"),
            )
        })?;
        let mut api_keys = file.api_keys;
        let keys_var = file
            .api_keys_env
            .unwrap_or_else(|| "TOOLBRIDGE_API_KEYS".to_owned());
        if let Some(keys) = env(&keys_var) {
            api_keys.extend(
                keys.split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned),
            );
        }
        if api_keys.iter().any(String::is_empty) {
            return Err(ConfigError::invalid("api_keys", "keys must not be empty"));
        }
        let keys = gateway_keys(&api_keys, file.keys)?;
        let mut key_texts = file.reasoning_keys;
        let reasoning_var = file
            .reasoning_keys_env
            .unwrap_or_else(|| "TOOLBRIDGE_REASONING_KEYS".to_owned());
        if let Some(keys) = env(&reasoning_var) {
            key_texts.extend(
                keys.split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned),
            );
        }
        let mut reasoning_keys = Vec::with_capacity(key_texts.len());
        for (i, text) in key_texts.iter().enumerate() {
            reasoning_keys.push(
                crate::seal::AeadSealer::parse_key(text)
                    .map_err(|e| ConfigError::invalid(format!("reasoning_keys[{i}]"), e))?,
            );
        }
        let mut providers = BTreeMap::new();
        for (name, p) in file.providers {
            providers.insert(name.clone(), provider(&name, p, env)?);
        }
        if providers.is_empty() {
            return Err(ConfigError::invalid(
                "providers",
                "at least one provider is required",
            ));
        }
        let mut routes = Vec::new();
        for (i, r) in file.routes.into_iter().enumerate() {
            if !providers.contains_key(&r.provider) {
                return Err(ConfigError::invalid(
                    format!("routes[{i}].provider"),
                    format!(
                        "`{}` is not a declared provider (declared: {})",
                        r.provider,
                        providers.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            let glob = globset::Glob::new(&r.model)
                .map_err(|e| ConfigError::invalid(format!("routes[{i}].model"), e.to_string()))?;
            for (j, f) in r.fallbacks.iter().enumerate() {
                if !providers.contains_key(&f.provider) {
                    return Err(ConfigError::invalid(
                        format!("routes[{i}].fallbacks[{j}].provider"),
                        format!("`{}` is not a declared provider", f.provider),
                    ));
                }
            }
            routes.push(Route {
                pattern: r.model,
                matcher: glob.compile_matcher(),
                provider: r.provider,
                upstream_model: r.upstream_model,
                fallbacks: r
                    .fallbacks
                    .into_iter()
                    .map(|f| (f.provider, f.upstream_model))
                    .collect(),
            });
        }
        if routes.is_empty() {
            return Err(ConfigError::invalid(
                "routes",
                "at least one route is required",
            ));
        }
        let names: Vec<&str> = providers.keys().map(String::as_str).collect();
        let limits = LimitsConfig::from_file(file.limits, env("TOOLBRIDGE_REDIS_URL"), &names)
            .map_err(|(field, message)| ConfigError::invalid(field, message))?;
        let store_url = match env("TOOLBRIDGE_STORE_URL")
            .or(file.store_url)
            .unwrap_or_else(|| "sqlite://toolbridge.db".to_owned())
        {
            off if off == "none" || off.is_empty() => None,
            url if url.starts_with("sqlite:")
                || url.starts_with("postgres://")
                || url.starts_with("postgresql://") =>
            {
                Some(url)
            }
            other => {
                return Err(ConfigError::invalid(
                    "store_url",
                    format!("`{other}` is not sqlite://PATH, postgres://… or none"),
                ));
            }
        };
        if store_url.is_none()
            && let Some(i) = keys
                .iter()
                .position(|k| k.scopes.daily_tokens.is_some() || k.scopes.monthly_tokens.is_some())
        {
            return Err(ConfigError::invalid(
                format!("keys[{i}]"),
                "token budgets are counted in the store, and the store is off",
            ));
        }
        let server = crate::serve::limits::ServerLimits::from_file(&file.server)?;
        let ops = crate::ops::OpsConfig::resolve(
            crate::ops::config::OpsFiles {
                metrics: &file.metrics,
                telemetry: &file.telemetry,
                logging: &file.logging,
                capture: &file.capture,
            },
            store_url.is_some(),
            env,
        )?;
        Ok(Self {
            ops,
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
            store_options: {
                let defaults = toolbridge_store::StoreOptions::default();
                let ms =
                    |v: Option<u64>, d: Duration| v.map_or(d, |v| Duration::from_millis(v.max(1)));
                toolbridge_store::StoreOptions {
                    acquire_timeout: ms(file.store_acquire_timeout_ms, defaults.acquire_timeout),
                    timeout: ms(file.store_timeout_ms, defaults.timeout),
                    circuit_failures: file
                        .store_circuit_failures
                        .unwrap_or(defaults.circuit_failures),
                    circuit_cooldown: ms(file.store_circuit_cooldown_ms, defaults.circuit_cooldown),
                }
            },
            reasoning_keys,
            sessions: SessionsConfig::from_file(file.sessions, env)?,
            providers,
            routes,
            gateway_tools: match &file.gateway_tools {
                Some(tools) => Some(std::sync::Arc::new(
                    crate::gateway_tools::GatewayTools::build(tools, env)
                        .map_err(|e| ConfigError::invalid("gateway_tools", e))?,
                )),
                None => None,
            },
        })
    }

    /// The route for a requested model: the first route whose pattern matches.
    pub fn resolve(&self, model: &str) -> Option<(&Route, &Provider)> {
        let route = self.routes.iter().find(|r| r.matcher.is_match(model))?;
        let provider = self.providers.get(&route.provider)?;
        Some((route, provider))
    }

    /// Where a request for `model` goes: the route's provider, then its fallbacks.
    pub fn targets(&self, model: &str) -> Option<Vec<Target<'_>>> {
        let (route, provider) = self.resolve(model)?;
        let primary = route
            .upstream_model
            .clone()
            .unwrap_or_else(|| model.to_owned());
        let mut out = vec![Target {
            provider,
            upstream_model: primary.clone(),
        }];
        for (name, upstream) in &route.fallbacks {
            if let Some(provider) = self.providers.get(name) {
                out.push(Target {
                    provider,
                    upstream_model: upstream.clone().unwrap_or_else(|| primary.clone()),
                });
            }
        }
        Some(out)
    }

    /// Model names clients can ask for by name: exact routes, and the models a provider's preset
    /// or config knows that a glob route sends to it.
    pub fn known_models(&self) -> Vec<KnownModel> {
        let mut out: Vec<KnownModel> = Vec::new();
        let push = |out: &mut Vec<KnownModel>, id: String, provider: &Provider, upstream: &str| {
            if out.iter().all(|m| m.id != id) {
                out.push(KnownModel {
                    context_window: provider.context_window(upstream),
                    owned_by: provider.name.clone(),
                    id,
                });
            }
        };
        for route in &self.routes {
            let Some(provider) = self.providers.get(&route.provider) else {
                continue;
            };
            if route.is_exact() {
                let upstream = route.upstream_model.as_deref().unwrap_or(&route.pattern);
                push(&mut out, route.pattern.clone(), provider, upstream);
                continue;
            }
            let candidates = provider
                .models
                .keys()
                .cloned()
                .chain(
                    provider
                        .profile
                        .context_windows
                        .iter()
                        .map(|(m, _)| m.clone()),
                )
                .collect::<Vec<_>>();
            for model in candidates {
                // Only when this route is the one that would serve the name.
                if route.matcher.is_match(&model)
                    && self.resolve(&model).map(|(r, _)| r.pattern.as_str()) == Some(&route.pattern)
                {
                    let upstream = route
                        .upstream_model
                        .clone()
                        .unwrap_or_else(|| model.clone());
                    push(&mut out, model, provider, &upstream);
                }
            }
        }
        out
    }
}

/// A model `GET /v1/models` lists.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownModel {
    pub id: String,
    pub owned_by: String,
    pub context_window: Option<u64>,
}

/// The config's gateway keys: plain `api_keys` (hashed here, every scope open) and `[[keys]]`.
fn gateway_keys(
    plain: &[String],
    declared: Vec<KeyFile>,
) -> Result<Vec<ConfiguredKey>, ConfigError> {
    let mut out: Vec<ConfiguredKey> = plain
        .iter()
        .enumerate()
        .map(|(i, secret)| ConfiguredKey {
            id: format!("api_keys[{i}]"),
            name: format!("api_keys[{i}]"),
            hash: hash_secret(secret),
            scopes: std::sync::Arc::new(Scope::unrestricted()),
        })
        .collect();
    for (i, k) in declared.into_iter().enumerate() {
        let at = |field: &str| format!("keys[{i}].{field}");
        if k.name.is_empty() || k.name.len() > MAX_NAME_LEN {
            return Err(ConfigError::invalid(
                at("name"),
                format!("must be 1 to {MAX_NAME_LEN} characters"),
            ));
        }
        let hash = parse_hash(&k.hash).map_err(|e| ConfigError::invalid(at("hash"), e))?;
        let scopes = Scope::compile(&Scopes {
            models: k.models,
            tools: k.tools,
            daily_tokens: k.daily_tokens,
            monthly_tokens: k.monthly_tokens,
            tenant: k.tenant,
            admin: k.admin,
        })
        .map_err(|e| ConfigError::invalid(format!("keys[{i}]"), e))?;
        let id = k.id.unwrap_or_else(|| k.name.clone());
        if out.iter().any(|o| o.id == id) {
            return Err(ConfigError::invalid(
                at("id"),
                format!("`{id}` is used by two keys"),
            ));
        }
        if out.iter().any(|o| o.hash == hash) {
            return Err(ConfigError::invalid(
                at("hash"),
                "the same secret is declared twice",
            ));
        }
        out.push(ConfiguredKey {
            id,
            name: k.name,
            hash,
            scopes: std::sync::Arc::new(scopes),
        });
    }
    Ok(out)
}

fn provider(name: &str, p: ProviderFile, env: Env<'_>) -> Result<Provider, ConfigError> {
    let at = |field: &str| format!("providers.{name}.{field}");
    let dialect = Dialect::parse(&p.dialect).ok_or_else(|| {
        ConfigError::invalid(
            at("dialect"),
            format!(
                "`{}` is not a supported dialect (supported: {})",
                p.dialect,
                Dialect::NAMES.join(", ")
            ),
        )
    })?;
    let url = p.base_url.trim_end_matches('/').to_owned();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ConfigError::invalid(
            at("base_url"),
            format!("`{url}` must start with http:// or https://"),
        ));
    }
    let preset_name = p
        .preset
        .clone()
        .unwrap_or_else(|| dialect.default_preset().to_owned());
    // The provider's profile, and each configured model's (resolved here, so that a patch
    // cannot fail at request time). Only a Responses upstream takes every tool as declared, and
    // it takes nothing else: the planner's passthrough follows the dialect, whatever preset was
    // named.
    let resolve = |patches: &[&ProfilePatch], field: String| {
        let mut profile = Profile::resolve(&preset_name, patches).map_err(|e| match e {
            ProfileError::UnknownPreset(_) => ConfigError::invalid(
                at("preset"),
                format!(
                    "`{preset_name}` is not a preset (presets: {})",
                    Profile::preset_names().join(", ")
                ),
            ),
            ProfileError::Invalid(message) => ConfigError::invalid(field, message),
        })?;
        profile.tools.responses_native = dialect.passes_through();
        Ok::<_, ConfigError>(profile)
    };
    let profile = resolve(&[&p.profile], at("profile"))?;
    let mut model_profiles = BTreeMap::new();
    for (model, m) in &p.models {
        let field = at(&format!("models.{model}.profile"));
        model_profiles.insert(model.clone(), resolve(&[&p.profile, &m.profile], field)?);
    }
    let api_key = match &p.api_key_env {
        Some(var) => env(var).filter(|k| !k.is_empty()),
        None => None,
    };
    let secs = |v: Option<u64>, default: u64| Duration::from_secs(v.unwrap_or(default));
    let policy = |field: &str, value: Option<&String>, default: InvalidCalls, allowed: &[&str]| {
        match value {
            None => Ok(default),
            Some(v) => InvalidCalls::parse(v)
                .filter(|_| allowed.contains(&v.as_str()))
                .ok_or_else(|| {
                    ConfigError::invalid(
                        at(field),
                        format!("`{v}` is not one of: {}", allowed.join(", ")),
                    )
                }),
        }
    };
    let repair = RepairPolicy {
        enabled: p.repair.unwrap_or(true),
        invalid_calls: policy(
            "invalid_calls",
            p.invalid_calls.as_ref(),
            InvalidCalls::Reask,
            &["reask", "pass", "fail"],
        )?,
        after_reask: policy(
            "invalid_calls_after_reask",
            p.invalid_calls_after_reask.as_ref(),
            InvalidCalls::Pass,
            &["pass", "fail"],
        )?,
    };
    Ok(Provider {
        name: name.to_owned(),
        dialect,
        base_url: url,
        api_key,
        profile,
        model_profiles,
        models: p.models,
        request_timeout: secs(p.request_timeout_secs, 600),
        idle_timeout: secs(p.idle_timeout_secs, 300),
        connect_timeout: secs(p.connect_timeout_secs, 10),
        stream_timeout: secs(p.stream_timeout_secs, 3600),
        max_retries: p.max_retries.unwrap_or(2),
        retry_budget: secs(p.retry_budget_secs, 15),
        repair,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_secrets() {
        let env = |k: &str| match k {
            "TOOLBRIDGE_UPSTREAM_URL" => Some("http://127.0.0.1:1/v1".to_owned()),
            "TOOLBRIDGE_UPSTREAM_API_KEY" => Some("sk-very-secret".to_owned()),
            "TOOLBRIDGE_API_KEYS" => Some("tb-gateway-secret".to_owned()),
            _ => None,
        };
        let config = Config::from_env(&env).unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(!shown.contains("tb-gateway-secret"), "{shown}");
        assert!(shown.contains("[redacted]"));
    }

    fn with_dialect(dialect: &str) -> Result<Config, ConfigError> {
        let text = format!(
            "[providers.up]\ndialect = \"{dialect}\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        );
        let file: FileConfig = toml::from_str(&text).unwrap();
        Config::from_file(file, &|_: &str| None)
    }

    #[test]
    fn the_dialect_is_read_and_an_unknown_one_names_the_field() {
        assert_eq!(
            with_dialect("chat").unwrap().providers["up"].dialect,
            Dialect::Chat
        );
        assert_eq!(
            with_dialect("anthropic").unwrap().providers["up"].dialect,
            Dialect::Anthropic
        );
        assert_eq!(
            with_dialect("gemini").unwrap().providers["up"].dialect,
            Dialect::Gemini
        );
        let responses = with_dialect("responses").unwrap();
        assert_eq!(responses.providers["up"].dialect, Dialect::Responses);
        assert_eq!(responses.providers["up"].profile.name, "responses");
        assert!(responses.providers["up"].profile.tools.responses_native);
        let error = with_dialect("bedrock").unwrap_err();
        assert_eq!(
            error,
            ConfigError::invalid(
                "providers.up.dialect",
                "`bedrock` is not a supported dialect (supported: chat, anthropic, gemini, responses)"
            )
        );
    }

    /// A profile patch is checked at load, against the whole profile it makes: a field no
    /// profile has is refused with the patch's path, the provider's or the model's.
    #[test]
    fn a_profile_patch_is_checked_at_load_with_its_path() {
        let load = |patch: &str| {
            let text = format!(
                "[providers.up]\nbase_url = \"http://127.0.0.1:1/v1\"\npreset = \"glm\"\n{patch}\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
            );
            let file: FileConfig = toml::from_str(&text).unwrap();
            Config::from_file(file, &|_: &str| None)
        };
        let ok = load("[providers.up.models.m.profile.tools]\nweb_search = \"none\"\n").unwrap();
        let up = &ok.providers["up"];
        assert!(up.profile_for("other").tools.web_search.is_some());
        assert_eq!(up.profile_for("m").tools.web_search, None);
        assert_eq!(up.profile_for("m").name, "glm");
        for (patch, field) in [
            (
                "[providers.up.profile]\ndeveloper_rol = true\n",
                "providers.up.profile",
            ),
            (
                "[providers.up.models.m.profile.tools.tool_types]\nshell = \"gateway\"\n",
                "providers.up.models.m.profile",
            ),
        ] {
            match load(patch) {
                Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{patch}"),
                other => panic!("{patch}: {other:?}"),
            }
        }
    }

    fn with_keys(keys: &str, store: &str) -> Result<Config, ConfigError> {
        let text = format!(
            "{keys}\n[providers.up]\nbase_url = \"http://127.0.0.1:1/v1\"\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        );
        let file: FileConfig = toml::from_str(&text).unwrap();
        let store = store.to_owned();
        Config::from_file(file, &move |k: &str| {
            (k == "TOOLBRIDGE_STORE_URL").then(|| store.clone())
        })
    }

    #[test]
    fn keys_and_limits_are_validated_with_the_field_named() {
        let hash = crate::auth::keys::hash_secret("tb-x");
        let ok = with_keys(
            &format!("api_keys = [\"plain\"]\n[[keys]]\nname = \"ci\"\nhash = \"{hash}\"\nmodels = [\"gpt-*\"]\ndaily_tokens = 5\n"),
            "sqlite://x.db",
        )
        .unwrap();
        assert_eq!(ok.keys.len(), 2);
        assert_eq!(ok.keys[0].id, "api_keys[0]");
        assert_eq!(ok.keys[0].hash, crate::auth::keys::hash_secret("plain"));
        assert_eq!(ok.keys[1].id, "ci");
        assert!(
            !format!("{ok:?}").contains(&hash),
            "hashes stay out of Debug"
        );

        let bad_hash = with_keys("[[keys]]\nname = \"ci\"\nhash = \"tb-plain\"\n", "none");
        assert!(
            matches!(bad_hash, Err(ConfigError::Invalid { field, .. }) if field == "keys[0].hash")
        );
        let no_store = with_keys(
            &format!("[[keys]]\nname = \"ci\"\nhash = \"{hash}\"\nmonthly_tokens = 5\n"),
            "none",
        );
        assert!(matches!(no_store, Err(ConfigError::Invalid { field, .. }) if field == "keys[0]"));
        let bad_glob = with_keys(
            &format!("[[keys]]\nname = \"ci\"\nhash = \"{hash}\"\nmodels = [\"[\"]\n"),
            "none",
        );
        assert!(matches!(bad_glob, Err(ConfigError::Invalid { field, .. }) if field == "keys[0]"));
        let twice = with_keys(
            &format!(
                "[[keys]]\nname = \"a\"\nhash = \"{hash}\"\n[[keys]]\nname = \"b\"\nhash = \"{hash}\"\n"
            ),
            "none",
        );
        assert!(
            matches!(twice, Err(ConfigError::Invalid { field, .. }) if field == "keys[1].hash")
        );
        let limit = with_keys("[limits.providers.nope]\nrequests_per_minute = 5\n", "none");
        assert!(
            matches!(limit, Err(ConfigError::Invalid { field, .. }) if field == "limits.providers.nope")
        );
    }
}
