//! The prompt-cache ledger's writer: each upstream answer of a session (a request with a
//! `prompt_cache_key`, a conversation or Codex's session header) becomes one row of the store's
//! `toolbridge_cache_turns` — provider, model, input tokens, cache reads and writes — which
//! `toolbridge cache SESSION` and `GET /v1/cache/sessions/{id}` report as the session's cached
//! share, turn by turn.
//!
//! The answer never waits for it: a turn is handed to one writer task of the process through a
//! bounded queue ([`QUEUE`]; a full queue drops the turn, counted and logged), and the task
//! writes what has queued in one transaction. Rows expire after [`KEPT`]. A turn still queued
//! when the process stops is lost: the ledger is a report, not an account (the keys' budgets
//! are kept elsewhere).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
use toolbridge_store::{CacheLedger, CacheTurn};

/// Turns waiting for the writer, at most.
pub(crate) const QUEUE: usize = 4096;
/// Turns written in one transaction, at most.
const BATCH: usize = 256;
/// How long a turn is kept.
pub(crate) const KEPT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// The handle requests record their turns through.
#[derive(Debug)]
pub(crate) struct LedgerWriter {
    queue: mpsc::Sender<CacheTurn>,
    dropped: AtomicU64,
}

impl LedgerWriter {
    /// Starts the writer task over `store` (it ends when the last handle is dropped).
    pub(crate) fn start(store: Arc<dyn CacheLedger>) -> Self {
        let (queue, mut turns) = mpsc::channel::<CacheTurn>(QUEUE);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(BATCH);
            while turns.recv_many(&mut batch, BATCH).await > 0 {
                if let Err(e) = store.put_cache_turns(&batch).await {
                    tracing::warn!(turns = batch.len(), "writing the cache ledger failed: {e}");
                }
                batch.clear();
            }
        });
        Self {
            queue,
            dropped: AtomicU64::new(0),
        }
    }

    /// Queues one turn; a full queue drops it (counted, and logged at the first of every
    /// thousand).
    pub(crate) fn record(&self, turn: CacheTurn) {
        if self.queue.try_send(turn).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed);
            if n.is_multiple_of(1000) {
                tracing::warn!(
                    dropped = n + 1,
                    "the cache ledger's queue is full; turns dropped"
                );
            }
        }
    }
}

/// A session's cache report: each turn with its cached share, and the totals (the share of
/// turns 2..N too: the first turn of a session has nothing to read).
pub(crate) fn report(session: &str, turns: &[CacheTurn]) -> serde_json::Value {
    let share = |cached: u64, input: u64| {
        if input == 0 {
            0.0
        } else {
            (cached as f64 / input as f64 * 1000.0).round() / 1000.0
        }
    };
    let rows: Vec<serde_json::Value> = turns
        .iter()
        .map(|t| {
            serde_json::json!({
                "at_ms": t.at,
                "provider": t.provider,
                "model": t.model,
                "input_tokens": t.input_tokens,
                "cached_tokens": t.cached_tokens,
                "cache_write_tokens": t.cache_write_tokens,
                "cached_share": share(t.cached_tokens, t.input_tokens),
            })
        })
        .collect();
    let sum = |turns: &[CacheTurn], f: fn(&CacheTurn) -> u64| turns.iter().map(f).sum::<u64>();
    let later = turns.get(1..).unwrap_or_default();
    let mut providers: Vec<&str> = turns.iter().map(|t| t.provider.as_str()).collect();
    providers.dedup();
    serde_json::json!({
        "object": "cache.session",
        "session": session,
        "turns": rows,
        "total": {
            "turns": turns.len(),
            "input_tokens": sum(turns, |t| t.input_tokens),
            "cached_tokens": sum(turns, |t| t.cached_tokens),
            "cache_write_tokens": sum(turns, |t| t.cache_write_tokens),
            "cached_share": share(sum(turns, |t| t.cached_tokens), sum(turns, |t| t.input_tokens)),
            "cached_share_after_first": share(sum(later, |t| t.cached_tokens), sum(later, |t| t.input_tokens)),
            // More than one entry: the session moved between providers (each move starts a
            // cold cache).
            "providers": providers,
        },
    })
}

/// The report as text, a line a turn, for the command line.
pub(crate) fn report_text(report: &serde_json::Value) -> String {
    let mut out = format!(
        "session {}\n{:>4}  {:<16} {:<24} {:>9} {:>9} {:>9} {:>7}\n",
        report["session"].as_str().unwrap_or_default(),
        "turn",
        "provider",
        "model",
        "input",
        "cached",
        "written",
        "share"
    );
    for (n, t) in report["turns"].as_array().into_iter().flatten().enumerate() {
        out.push_str(&format!(
            "{:>4}  {:<16} {:<24} {:>9} {:>9} {:>9} {:>6.1}%\n",
            n + 1,
            t["provider"].as_str().unwrap_or_default(),
            t["model"].as_str().unwrap_or_default(),
            t["input_tokens"],
            t["cached_tokens"],
            t["cache_write_tokens"],
            t["cached_share"].as_f64().unwrap_or(0.0) * 100.0
        ));
    }
    let total = &report["total"];
    out.push_str(&format!(
        "total: {} turns, {} input tokens, {} cached ({:.1}%; {:.1}% from turn 2 on), {} written; providers: {}\n",
        total["turns"],
        total["input_tokens"],
        total["cached_tokens"],
        total["cached_share"].as_f64().unwrap_or(0.0) * 100.0,
        total["cached_share_after_first"].as_f64().unwrap_or(0.0) * 100.0,
        total["cache_write_tokens"],
        total["providers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out
}

/// The report of `session` read from the configured store, every tenant's (the operator's
/// command).
pub(crate) async fn read_report(
    config: &crate::Config,
    session: &str,
) -> Result<serde_json::Value, String> {
    let Some(url) = &config.store_url else {
        return Err(
            "the cache ledger lives in the store, and no `store_url` is configured".to_owned(),
        );
    };
    let store = toolbridge_store::SqlStore::open(url)
        .await
        .map_err(|e| format!("cannot open the store: {e}"))?;
    let operator = toolbridge_store::Tenant::open().reading_all();
    let turns = store
        .cache_turns(&operator, session)
        .await
        .map_err(|e| format!("cannot read the cache ledger: {e}"))?;
    if turns.is_empty() {
        return Err(format!(
            "no turns of session `{session}` in the cache ledger (none answered, expired, or another key: the session is its prompt_cache_key, conversation or session-id)"
        ));
    }
    Ok(report(session, &turns))
}
