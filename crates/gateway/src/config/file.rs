//! The configuration file as written: plain serde types, one per TOML table, that
//! [`Config::from_file`](super::Config::from_file) validates and resolves.
//!
//! Not here: any validation (every field is checked where it is resolved, in the sibling
//! modules), and defaults beyond serde's (the resolved types own them).

use std::collections::BTreeMap;

use serde::Deserialize;
use toolbridge_providers::profile::ProfilePatch;

use crate::platform::limits::LimitsFile;

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
    pub server: crate::platform::serve::limits::ServerFile,
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
    pub gateway_tools: Option<crate::tools::ToolsFile>,
    /// Prometheus metrics (`/metrics` by default).
    #[serde(default)]
    pub metrics: crate::config::ops::MetricsFile,
    /// OpenTelemetry traces over OTLP/HTTP.
    #[serde(default)]
    pub telemetry: crate::config::ops::TelemetryFile,
    /// Log format.
    #[serde(default)]
    pub logging: crate::config::ops::LoggingFile,
    /// Opt-in request capture into the store.
    #[serde(default)]
    pub capture: crate::config::ops::CaptureFile,
    /// The console at `/console`.
    #[serde(default)]
    pub console: crate::config::console::ConsoleFile,
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

/// One provider as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderFile {
    /// The wire dialect: `chat` (Chat Completions), `anthropic` (Messages), `gemini`
    /// (generateContent) or `responses`. By default the preset's own (a preset is written for
    /// one dialect), else `chat`; a dialect that contradicts the preset is refused.
    #[serde(default)]
    pub dialect: Option<String>,
    pub base_url: String,
    /// The environment variable holding the upstream API key.
    pub api_key_env: Option<String>,
    /// More environment variables holding keys (accounts) of the same provider: with several
    /// keys, each session keeps one, chosen from its cache key (the key decides, so every
    /// gateway process chooses the same); the keys set in the environment, after
    /// `api_key_env`'s.
    #[serde(default)]
    pub api_key_envs: Vec<String>,
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
    /// Upstream models this provider serves in another dialect (one account, some models on
    /// `/responses`, others on `/chat/completions`); the first entry matching a model wins.
    #[serde(default)]
    pub dialect_for: Vec<DialectForFile>,
}

/// One `[[providers.NAME.dialect_for]]` entry as written: the upstream models (a name or a glob)
/// and the dialect and preset they are served with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DialectForFile {
    pub models: String,
    /// By default the preset's own dialect.
    pub dialect: Option<String>,
    /// By default the dialect's own preset.
    pub preset: Option<String>,
    /// A patch over that preset (the provider's own `profile` is for its own dialect).
    #[serde(default)]
    pub profile: ProfilePatch,
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
    /// Match only requests of this Codex request kind (`turn`, `compaction` or `prewarm`, from
    /// `x-codex-turn-metadata`), so that compaction can go to another model or provider.
    pub request_kind: Option<String>,
    /// Match only requests of Codex agents whose `agent_name` matches this glob (`/root` is the
    /// main agent; sub-agents have their own names).
    pub agent_name: Option<String>,
    /// Match only requests whose `x-codex-routing-hint` names this tier
    /// (`model=…;tier=…`), so that a client can ask for a faster or cheaper target.
    pub tier: Option<String>,
    /// What the Codex model catalog says of the models this route serves.
    #[serde(default)]
    pub catalog: CatalogFile,
}

/// `[routes.catalog]`: the Codex model catalog's entry for a route's models, where the derived
/// values are not what the operator wants.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    /// The base instructions Codex uses with these models (they replace Codex's own prompt).
    /// Default: the gateway's coding-agent prompt.
    pub base_instructions: Option<String>,
    /// A file holding them (read at load).
    pub base_instructions_file: Option<std::path::PathBuf>,
    /// The name shown in Codex's model picker. Default: the model name.
    pub display_name: Option<String>,
    pub description: Option<String>,
    /// Tokens after which Codex compacts. Default: 90% of the context window.
    pub auto_compact_token_limit: Option<u64>,
    /// Whether Codex should prefer the WebSocket transport. Default true.
    pub prefer_websockets: Option<bool>,
    /// `text` and `image`, or `text` alone. Default: from the provider's profile.
    pub input_modalities: Option<Vec<String>>,
    /// Left out of the catalog. Default false.
    #[serde(default)]
    pub hidden: bool,
}

/// One step of a route's fallback chain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackFile {
    pub provider: String,
    /// The model name sent to this provider; by default the route's upstream model.
    pub upstream_model: Option<String>,
}
