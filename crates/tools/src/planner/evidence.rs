//! Evidence: the record of past executions, where it is kept, and how it ranks tools.
//!
//! Every execution through the bridge or the plan executor appends an [`EvidenceRecord`] to an
//! [`EvidenceStore`]. The [`EvidenceScorer`] ranks a capability's tools from the **most recent**
//! `window` records of each (the system this replaces queried the oldest records, so a tool that
//! had recovered, or had started failing, never looked different), combined with the tool's
//! static [`ToolTraits`].
//!
//! Only an in-memory store is provided. A SQLite store would implement the same trait; it is
//! left out because the project's SQL crate (sqlx) is heavy for this library crate.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::capability::ToolTraits;
use crate::tool::{BoxFuture, ToolError};

/// One execution of one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceRecord {
    /// The tool that ran.
    pub tool: String,
    /// The capability it ran for, when the planner chose it.
    pub capability: Option<String>,
    /// Whether it returned an output.
    pub success: bool,
    /// The error code when it failed.
    pub error_code: Option<String>,
    /// How long it ran.
    pub latency: Duration,
    /// When it finished.
    pub at: SystemTime,
}

impl EvidenceRecord {
    /// A record of a call of `tool` that took `latency` and ended in `outcome`.
    pub fn new<T>(tool: &str, latency: Duration, outcome: &Result<T, ToolError>) -> Self {
        Self {
            tool: tool.to_owned(),
            capability: None,
            success: outcome.is_ok(),
            error_code: outcome.as_ref().err().map(|e| e.code().to_owned()),
            latency,
            at: SystemTime::now(),
        }
    }

    /// Sets the capability.
    pub fn for_capability(mut self, capability: Option<&str>) -> Self {
        self.capability = capability.map(str::to_owned);
        self
    }
}

/// Where evidence is kept. Asynchronous so that a database-backed store fits.
pub trait EvidenceStore: Send + Sync {
    /// Appends a record.
    fn record(&self, record: EvidenceRecord) -> BoxFuture<'_, Result<(), ToolError>>;

    /// The most recent records of `tool`, newest first, at most `limit`.
    fn recent<'a>(
        &'a self,
        tool: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<EvidenceRecord>, ToolError>>;
}

/// An in-memory store keeping the newest `capacity` records per tool.
#[derive(Debug)]
pub struct MemoryEvidenceStore {
    capacity: usize,
    records: Mutex<HashMap<String, VecDeque<EvidenceRecord>>>,
}

impl Default for MemoryEvidenceStore {
    /// 1,000 records per tool.
    fn default() -> Self {
        Self::with_capacity(1000)
    }
}

impl MemoryEvidenceStore {
    /// A store keeping at most `capacity` records per tool (at least 1); older ones are dropped.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            records: Mutex::new(HashMap::new()),
        }
    }

    /// How many records are kept for `tool`.
    pub fn len(&self, tool: &str) -> usize {
        self.lock().get(tool).map_or(0, VecDeque::len)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<EvidenceRecord>>> {
        // A panic while holding this lock cannot leave the map half-updated (each operation is a
        // single push/pop), so a poisoned lock is still usable.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl EvidenceStore for MemoryEvidenceStore {
    fn record(&self, record: EvidenceRecord) -> BoxFuture<'_, Result<(), ToolError>> {
        let mut records = self.lock();
        let queue = records.entry(record.tool.clone()).or_default();
        queue.push_back(record);
        while queue.len() > self.capacity {
            queue.pop_front();
        }
        drop(records);
        Box::pin(async { Ok(()) })
    }

    fn recent<'a>(
        &'a self,
        tool: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<EvidenceRecord>, ToolError>> {
        let recent = self.lock().get(tool).map_or_else(Vec::new, |queue| {
            queue.iter().rev().take(limit).cloned().collect()
        });
        Box::pin(async move { Ok(recent) })
    }
}

/// How much each factor counts in a [`ToolScore`]; the factors are each in `0..=1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreWeights {
    /// Weight of the (smoothed) success rate.
    pub success: f64,
    /// Weight of the latency score.
    pub latency: f64,
    /// Weight of the cost score.
    pub cost: f64,
    /// Weight of determinism.
    pub determinism: f64,
    /// Weight of having no side effects.
    pub side_effects: f64,
}

impl Default for ScoreWeights {
    fn default() -> Self {
        Self {
            success: 0.5,
            latency: 0.2,
            cost: 0.1,
            determinism: 0.1,
            side_effects: 0.1,
        }
    }
}

/// A tool's score for a capability, with its parts.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolScore {
    /// The tool.
    pub tool: String,
    /// The weighted total.
    pub total: f64,
    /// `(successes + 1) / (samples + 2)`: 0.5 with no evidence.
    pub success_rate: f64,
    /// `reference / (reference + mean latency)`: 0.5 with no evidence.
    pub latency: f64,
    /// `1 / (1 + cost)`.
    pub cost: f64,
    /// 1 when deterministic.
    pub determinism: f64,
    /// 1 when free of side effects.
    pub side_effects: f64,
    /// How many records were used (at most the window).
    pub samples: usize,
}

/// Scores tools from their most recent records and their traits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvidenceScorer {
    /// How many of the most recent records count.
    pub window: usize,
    /// The weights.
    pub weights: ScoreWeights,
    /// The latency that scores 0.5.
    pub latency_reference: Duration,
}

impl Default for EvidenceScorer {
    /// The last 50 records, default weights, one second as the latency reference.
    fn default() -> Self {
        Self {
            window: 50,
            weights: ScoreWeights::default(),
            latency_reference: Duration::from_secs(1),
        }
    }
}

impl EvidenceScorer {
    /// Scores `tool` from `records` (only the first `window`, which must be newest first as
    /// [`EvidenceStore::recent`] returns them) and its traits.
    pub fn score(&self, tool: &str, traits: ToolTraits, records: &[EvidenceRecord]) -> ToolScore {
        let window = &records[..records.len().min(self.window)];
        let samples = window.len();
        let successes = window.iter().filter(|r| r.success).count();
        let success_rate = (successes as f64 + 1.0) / (samples as f64 + 2.0);
        let latency = if samples == 0 {
            0.5
        } else {
            let total: Duration = window.iter().map(|r| r.latency).sum();
            let mean = total.as_secs_f64() / samples as f64;
            let reference = self.latency_reference.as_secs_f64();
            if reference + mean > 0.0 {
                reference / (reference + mean)
            } else {
                1.0
            }
        };
        let cost = 1.0 / (1.0 + traits.cost.max(0.0));
        let determinism = if traits.deterministic { 1.0 } else { 0.0 };
        let side_effects = if traits.side_effects { 0.0 } else { 1.0 };
        let w = self.weights;
        let total = w.success * success_rate
            + w.latency * latency
            + w.cost * cost
            + w.determinism * determinism
            + w.side_effects * side_effects;
        ToolScore {
            tool: tool.to_owned(),
            total,
            success_rate,
            latency,
            cost,
            determinism,
            side_effects,
            samples,
        }
    }

    /// Ranks `tools` (given in order of preference) best first, reading each one's recent
    /// records from `store`; equal totals keep the order of preference.
    pub async fn rank(
        &self,
        tools: &[String],
        traits: impl Fn(&str) -> ToolTraits,
        store: &dyn EvidenceStore,
    ) -> Result<Vec<ToolScore>, ToolError> {
        let mut scores = Vec::with_capacity(tools.len());
        for tool in tools {
            let records = store.recent(tool, self.window).await?;
            scores.push(self.score(tool, traits(tool), &records));
        }
        // A stable sort keeps the preference order on ties.
        scores.sort_by(|a, b| b.total.total_cmp(&a.total));
        Ok(scores)
    }
}

/// Appends a record, logging (not returning) a store failure: evidence must never fail a call
/// that otherwise succeeded.
pub(crate) async fn record_best_effort(store: &dyn EvidenceStore, record: EvidenceRecord) {
    let tool = record.tool.clone();
    if let Err(err) = store.record(record).await {
        tracing::warn!(tool = %tool, code = err.code(), error = %err, "could not record tool evidence");
    }
}
