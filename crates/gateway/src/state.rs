//! The application state every handler shares ([`AppState`]): configuration, upstream clients,
//! the store, keys, limits, the session bus and the caches, built once at start and rebuilt on a
//! config reload. It depends on the platform, upstream and catalog layers, and on two types of
//! the response pipeline it holds for every request (`http::responses::LateFinals` and
//! `http::responses::SocketCaps`), so `state` and `http` import each other (ARCHITECTURE.md's
//! import table of `crates/gateway/src`).

use std::sync::Arc;

use tokio::sync::watch;

use crate::config::Config;
use crate::platform::auth::KeyResolver;
use crate::platform::limits::Limits;
use crate::platform::seal::AeadSealer;
use crate::platform::sessions::EventBus;
use crate::upstream::Upstreams;
use toolbridge_core::reasoning::Sealer;
use toolbridge_store::{CaptureStore, KeyStore, ProviderStateStore, ResponseStore, SqlStore};

/// Shared, read-only state of the application, behind one `Arc`: the router and its layers
/// clone it about thirty times per request, and each clone is then one count, not one per
/// field.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] shares.
#[derive(Clone)]
pub struct Shared {
    pub(crate) config: Arc<Config>,
    pub(crate) upstreams: Arc<Upstreams>,
    /// Turns true when in-flight streams must end now (the shutdown grace period ran out).
    pub(crate) shutdown: watch::Receiver<bool>,
    /// Seals and opens reasoning blobs.
    pub(crate) sealer: Arc<dyn Sealer>,
    /// Stored responses; `None` when storage is off.
    pub(crate) store: Option<Arc<dyn ResponseStore>>,
    /// Background runs of this process, so a cancel landing here stops them at once (a cancel
    /// landing on another process still wins through the store).
    pub(crate) running:
        Arc<std::sync::Mutex<std::collections::HashMap<String, tokio::task::AbortHandle>>>,
    /// Stored responses in flight here (foreground and background), so a cancel stops them.
    pub(crate) in_flight: Arc<crate::platform::inflight::InFlight>,
    /// Streams being finished after their clients left; shutdown waits for them.
    pub(crate) drains: Arc<crate::platform::inflight::Drains>,
    /// Final writes the store refused while it was down, written again once it is back.
    pub(crate) late_finals: Arc<crate::http::responses::LateFinals>,
    /// The histories of recent stored responses, so continuing one costs what the turn adds.
    pub(crate) recent_chains: Arc<crate::http::responses::RecentChains>,
    /// The last request of recent HTTP sessions, so a history resent whole is parsed for what
    /// it adds.
    pub(crate) resent_inputs: Arc<crate::http::responses::ResentInputs>,
    /// The output tokens each route's answers used lately, for budget reservations.
    pub(crate) observed_output: Arc<crate::platform::auth::budget::ObservedOutput>,
    /// The WebSocket mode's caps on open sockets and responses in flight.
    pub(crate) websocket_caps: Arc<crate::http::responses::SocketCaps>,
    /// Gateway keys: config keys and store keys through a cache.
    pub(crate) keys: Arc<KeyResolver>,
    /// Store keys and their token ledger; `None` when storage is off.
    pub(crate) key_store: Option<Arc<dyn KeyStore>>,
    /// Budget charges the store refused while it was down, written once it is back.
    pub(crate) late_charges: Arc<crate::platform::auth::late_charges::LateCharges>,
    /// Requests and tokens per minute, per key and per provider.
    pub(crate) limits: Arc<Limits>,
    /// Session side-channel events (`GET /v1/sessions/{id}/events`): in-process or Redis.
    pub(crate) sessions: EventBus,
    /// Request captures (`[capture]`); `None` when storage is off.
    pub(crate) captures: Option<Arc<dyn CaptureStore>>,
    /// The prompt-cache ledger: its writer, and the store it reads from; `None` when storage
    /// is off.
    pub(crate) cache_ledger: Option<Arc<crate::platform::cache_ledger::LedgerWriter>>,
    pub(crate) cache_turns: Option<Arc<dyn toolbridge_store::CacheLedger>>,
    /// Provider state by `call_id` (signatures a later turn must send back); `None` when
    /// storage is off (sealed `encrypted_content` is then the only way back).
    pub(crate) provider_states: Option<Arc<dyn ProviderStateStore>>,
    /// Compiled tool checks shared by every request (kept across reloads: they depend only on
    /// the tools a request declares).
    pub(crate) schema_cache: Arc<toolbridge_core::repair::SchemaCache>,
    /// The Codex catalog's version (`x-models-etag`), made once from the config.
    pub(crate) catalog_etag: Arc<std::sync::OnceLock<String>>,
    /// The latest requests, for the console; `None` when the console is off.
    pub(crate) journal: Option<Arc<crate::platform::ops::journal::Journal>>,
}

impl AppState {
    /// The Codex catalog's version, sent as `x-models-etag` with the catalog and with every
    /// answer: a digest of the whole catalog, so every gateway on one config says the same,
    /// and Codex fetches the catalog again when the config changed under it.
    pub(crate) fn catalog_etag(&self) -> &str {
        self.catalog_etag.get_or_init(|| {
            let catalog = crate::catalog::codex_catalog(&self.config);
            let digest = blake3::hash(catalog.to_string().as_bytes());
            format!("\"{}\"", &digest.to_hex()[..16])
        })
    }

    /// The session side channel, for tests that publish and watch events.
    pub fn sessions(&self) -> &EventBus {
        &self.sessions
    }

    /// The compiled tool checks shared by every request, for tests that count compilations.
    pub fn schema_cache(&self) -> &Arc<toolbridge_core::repair::SchemaCache> {
        &self.schema_cache
    }

    /// State for `config`; the returned sender forces in-flight streams to end.
    pub async fn new(config: Config) -> Result<(Self, watch::Sender<bool>), String> {
        let mut key_store: Option<Arc<dyn KeyStore>> = None;
        let mut captures: Option<Arc<dyn CaptureStore>> = None;
        let mut cache_turns: Option<Arc<dyn toolbridge_store::CacheLedger>> = None;
        let mut provider_states: Option<Arc<dyn ProviderStateStore>> = None;
        let store: Option<Arc<dyn ResponseStore>> = match &config.store_url {
            None => None,
            Some(url) => {
                let store = open_store(url, config.store_options)
                    .await
                    .map_err(|e| format!("cannot open the response store: {e}"))?;
                // Responses a dead process left running will never finish: say so.
                let now = crate::platform::time::now();
                store
                    .heartbeat(now)
                    .await
                    .map_err(|e| format!("cannot open the response store: {e}"))?;
                let failed = store
                    .fail_interrupted(now)
                    .await
                    .map_err(|e| format!("cannot open the response store: {e}"))?;
                if failed > 0 {
                    tracing::warn!(
                        failed,
                        "marked responses interrupted by a restart as failed"
                    );
                }
                key_store = Some(Arc::new(store.clone()));
                captures = Some(Arc::new(store.clone()));
                cache_turns = Some(Arc::new(store.clone()));
                provider_states = Some(Arc::new(store.clone()));
                Some(Arc::new(store))
            }
        };
        let keys = KeyResolver::new(
            config.keys.clone(),
            config.require_keys,
            key_store.clone(),
            config.key_cache,
        );
        let limits = Limits::new(config.limits.clone())?;
        if let Some(tools) = &config.gateway_tools {
            tools.connect_configured().await;
        }
        let upstreams = Upstreams::new(&config).map_err(|e| e.to_string())?;
        let sealer = if config.reasoning_keys.is_empty() {
            tracing::warn!(
                "no reasoning_keys configured: reasoning sealed into encrypted_content will not survive a restart or work across gateway processes"
            );
            AeadSealer::random()?
        } else {
            AeadSealer::new(&config.reasoning_keys)?
        };
        let sessions = EventBus::from_config(&config.sessions).await?;
        crate::platform::ops::metrics::set_enabled(config.ops.metrics.enabled);
        let (tx, rx) = watch::channel(false);
        let journal = journal_for(&config, None);
        Ok((
            Self(Arc::new(Shared {
                journal,
                config: Arc::new(config),
                upstreams: Arc::new(upstreams),
                shutdown: rx,
                sealer: Arc::new(sealer),
                store,
                running: Arc::default(),
                in_flight: Arc::default(),
                drains: Arc::default(),
                late_finals: Arc::default(),
                recent_chains: Arc::default(),
                resent_inputs: Arc::default(),
                websocket_caps: Arc::default(),
                observed_output: Arc::default(),
                keys: Arc::new(keys),
                key_store,
                late_charges: Arc::default(),
                limits: Arc::new(limits),
                sessions,
                captures,
                cache_ledger: cache_turns.clone().map(|store| {
                    Arc::new(crate::platform::cache_ledger::LedgerWriter::start(store))
                }),
                cache_turns,
                provider_states,
                schema_cache: Arc::default(),
                catalog_etag: Arc::default(),
            })),
            tx,
        ))
    }

    /// The state after a config reload: a new config, upstream clients, key resolver and
    /// reasoning keys; the store, limits, session channels and shutdown signal carry over.
    pub fn reloaded(&self, config: Config) -> Result<Self, String> {
        let old = &self.config;
        for (changed, what) in [
            (old.listen != config.listen, "listen"),
            (old.store_url != config.store_url, "store_url"),
            (
                old.store_options != config.store_options,
                "store timeouts and circuit",
            ),
            (old.sessions != config.sessions, "[sessions]"),
            (old.server != config.server, "[server]"),
            (old.ops.log_format != config.ops.log_format, "[logging]"),
            (old.ops.telemetry != config.ops.telemetry, "[telemetry]"),
        ] {
            if changed {
                tracing::warn!("`{what}` changed: it applies at the next restart");
            }
        }
        let upstreams = Upstreams::new(&config).map_err(|e| e.to_string())?;
        let keys = KeyResolver::new(
            config.keys.clone(),
            config.require_keys,
            self.key_store.clone(),
            config.key_cache,
        );
        let sealer: Arc<dyn Sealer> = if config.reasoning_keys.is_empty() {
            self.sealer.clone()
        } else {
            Arc::new(AeadSealer::new(&config.reasoning_keys)?)
        };
        crate::platform::ops::metrics::set_enabled(config.ops.metrics.enabled);
        let journal = journal_for(&config, self.journal.as_ref());
        Ok(Self(Arc::new(Shared {
            journal,
            config: Arc::new(config),
            upstreams: Arc::new(upstreams),
            sealer,
            keys: Arc::new(keys),
            // A new config is a new catalog.
            catalog_etag: Arc::default(),
            ..Shared::clone(self)
        })))
    }
}

/// The console's journal under `config`: the running one kept across a reload (its bounds
/// apply at the next restart), a new one when the console is turned on, none when it is off.
fn journal_for(
    config: &Config,
    running: Option<&Arc<crate::platform::ops::journal::Journal>>,
) -> Option<Arc<crate::platform::ops::journal::Journal>> {
    let console = &config.console;
    if !console.enabled {
        return None;
    }
    Some(running.cloned().unwrap_or_else(|| {
        Arc::new(crate::platform::ops::journal::Journal::new(
            console.max_requests,
            console.max_bytes,
        ))
    }))
}

/// How many times opening the store is tried when the database is slow or not up yet.
const STORE_OPEN_ATTEMPTS: u32 = 5;

/// Opens the store, trying again (after 0.5, 1, 2 and 4 s) while the database is unreachable
/// or too slow to hand out its first connection: a database still starting beside the gateway,
/// or a machine too busy to open SQLite within the pool's acquire timeout, delays the start
/// instead of failing it. A refusal (a bad URL, a failed migration) fails at once.
async fn open_store(
    url: &str,
    options: toolbridge_store::StoreOptions,
) -> Result<SqlStore, toolbridge_store::StoreError> {
    let mut wait = std::time::Duration::from_millis(500);
    let mut attempt = 1;
    loop {
        match SqlStore::open_with(url, options).await {
            Err(e) if e.is_outage() && attempt < STORE_OPEN_ATTEMPTS => {
                tracing::warn!(
                    attempt,
                    "the response store did not open, trying again: {e}"
                );
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            opened => return opened,
        }
    }
}
