//! The request journal the console reads (`http::console`): the latest model requests this
//! process served, each with what the gateway decided for it — the route and provider, the
//! plan's decision for every declared tool, the translated upstream body, retries, fallbacks,
//! repairs and diagnostics, the items restored, status, latency, first-token time and tokens.
//!
//! Kept only when the console is on (`[console] enabled`): a request's [`Entry`] is filled by
//! the stages through its observer (`observe::RequestCtx::note`) and lands here when the
//! request's context is dropped, that is once its answer (a stream too) is over. The journal
//! is in memory and per process, bounded by entries and by bytes (the oldest go first); an
//! upstream body is kept at most [`MAX_BODY`] bytes. Every entry names its tenant, and every
//! read filters by the reader's.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use serde::Serialize;
use toolbridge_store::Tenant;

/// The most bytes of one translated upstream body kept.
pub(crate) const MAX_BODY: usize = 256 * 1024;

/// One request, as the console shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Entry {
    pub id: String,
    /// Milliseconds since the epoch at its start.
    pub at_ms: u64,
    pub route: String,
    pub tenant: String,
    pub key_id: Option<String>,
    /// The model the client asked for.
    pub model: String,
    pub provider: Option<String>,
    pub upstream_model: Option<String>,
    pub stream: bool,
    /// The conversation, `prompt_cache_key` or Codex session the request belongs to.
    pub session: Option<String>,
    pub http_status: u16,
    /// The response's own status (`completed`, `incomplete`, `failed`, `cancelled`).
    pub status: Option<String>,
    pub error_code: Option<String>,
    pub latency_ms: f64,
    /// Time to the first output delta of a stream.
    pub first_token_ms: Option<f64>,
    pub tokens: Option<Tokens>,
    pub plan: Vec<PlanRow>,
    pub diagnostics: Vec<DiagnosticRow>,
    pub retries: u32,
    pub fallback: bool,
    pub output: Vec<ItemRow>,
    /// The translated upstream body of the first round, cut at [`MAX_BODY`].
    #[serde(skip)]
    pub upstream_body: Option<Bytes>,
}

/// A response's tokens.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
    pub cache_write: u64,
}

/// One declared tool and what the plan did with it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlanRow {
    pub param: String,
    pub kind: String,
    pub name: Option<String>,
    pub decision: &'static str,
    pub reason: &'static str,
    /// The name the provider saw.
    pub upstream_name: Option<String>,
}

/// One diagnostic the response carried.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DiagnosticRow {
    pub code: String,
    pub param: Option<String>,
    pub message: String,
}

/// One output item restored for the client.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ItemRow {
    pub kind: String,
    pub name: Option<String>,
    pub call_id: Option<String>,
}

impl From<&toolbridge_wire::responses::Diagnostic> for DiagnosticRow {
    fn from(d: &toolbridge_wire::responses::Diagnostic) -> Self {
        Self {
            code: d.code.clone(),
            param: d.param.clone(),
            message: d.message.clone(),
        }
    }
}

impl Entry {
    /// What the entry holds, roughly, in bytes (for the journal's byte bound).
    fn weight(&self) -> usize {
        let strings: usize = self
            .plan
            .iter()
            .map(|p| p.param.len() + p.kind.len() + 64)
            .chain(self.diagnostics.iter().map(|d| d.message.len() + 64))
            .chain(self.output.iter().map(|i| i.kind.len() + 64))
            .sum();
        512 + strings + self.upstream_body.as_ref().map_or(0, Bytes::len)
    }

    /// Whether `reader` may see this entry: its own tenant's, or every tenant's for an admin.
    pub(crate) fn visible_to(&self, reader: &Tenant) -> bool {
        reader.reads_all() || reader.name() == self.tenant
    }

    /// The repairs the gateway made to calls (their diagnostics).
    pub(crate) fn repairs(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.code.contains("repair"))
            .count()
    }
}

/// The journal: the latest entries, bounded.
pub(crate) struct Journal {
    ring: Mutex<Ring>,
    max_entries: usize,
    max_bytes: usize,
}

#[derive(Default)]
struct Ring {
    entries: VecDeque<(Arc<Entry>, usize)>,
    bytes: usize,
}

impl Journal {
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            ring: Mutex::default(),
            max_entries: max_entries.max(1),
            max_bytes,
        }
    }

    /// Keeps `entry`, evicting the oldest past the bounds.
    pub(crate) fn push(&self, entry: Entry) {
        let weight = entry.weight();
        let Ok(mut ring) = self.ring.lock() else {
            return;
        };
        ring.entries.push_back((Arc::new(entry), weight));
        ring.bytes += weight;
        while ring.entries.len() > self.max_entries
            || (ring.bytes > self.max_bytes && ring.entries.len() > 1)
        {
            if let Some((_, w)) = ring.entries.pop_front() {
                ring.bytes -= w;
            }
        }
    }

    /// The entries `reader` may see, newest first, that `keep` accepts; at most `limit`.
    pub(crate) fn list(
        &self,
        reader: &Tenant,
        limit: usize,
        keep: impl Fn(&Entry) -> bool,
    ) -> Vec<Arc<Entry>> {
        let Ok(ring) = self.ring.lock() else {
            return Vec::new();
        };
        ring.entries
            .iter()
            .rev()
            .map(|(e, _)| e)
            .filter(|e| e.visible_to(reader) && keep(e))
            .take(limit)
            .cloned()
            .collect()
    }

    /// The entry `id`, when `reader` may see it.
    pub(crate) fn get(&self, reader: &Tenant, id: &str) -> Option<Arc<Entry>> {
        let ring = self.ring.lock().ok()?;
        ring.entries
            .iter()
            .map(|(e, _)| e)
            .find(|e| e.id == id && e.visible_to(reader))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, tenant: &str, body: usize) -> Entry {
        Entry {
            id: id.into(),
            tenant: tenant.into(),
            upstream_body: Some(Bytes::from(vec![b'x'; body])),
            ..Entry::default()
        }
    }

    #[test]
    fn the_oldest_entries_go_past_either_bound() {
        let journal = Journal::new(3, 10_000);
        for i in 0..5 {
            journal.push(entry(&format!("r{i}"), "a", 10));
        }
        let ids: Vec<_> = journal
            .list(&Tenant::named("a"), 10, |_| true)
            .iter()
            .map(|e| e.id.clone())
            .collect();
        assert_eq!(ids, ["r4", "r3", "r2"]);
        let journal = Journal::new(100, 5_000);
        for i in 0..5 {
            journal.push(entry(&format!("r{i}"), "a", 2_000));
        }
        assert_eq!(journal.list(&Tenant::named("a"), 10, |_| true).len(), 1);
    }

    #[test]
    fn a_reader_sees_only_its_tenant_unless_it_reads_all() {
        let journal = Journal::new(10, 1 << 20);
        journal.push(entry("mine", "a", 0));
        journal.push(entry("theirs", "b", 0));
        let a = Tenant::named("a");
        assert_eq!(journal.list(&a, 10, |_| true).len(), 1);
        assert!(journal.get(&a, "theirs").is_none());
        assert!(journal.get(&a, "mine").is_some());
        let admin = Tenant::named("ops").reading_all();
        assert_eq!(journal.list(&admin, 10, |_| true).len(), 2);
    }
}
