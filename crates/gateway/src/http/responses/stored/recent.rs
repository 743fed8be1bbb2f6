//! The histories of recent stored responses, held in memory, so a turn that continues one with
//! `previous_response_id` costs what it adds rather than the whole chain again.
//!
//! A [`Link`] is one stored response's items (its input, then its output, as the store keeps
//! them) and the link before it: a chain is shared by every response continuing it, so memory
//! grows with what each turn adds. A stored response's final write, once the store took it (not
//! when a cancel stored first kept it out), adds its link ([`HeldOnceWritten::written`]); a chain
//! read from the store is kept the same way. Its items are parsed once, the first time the
//! chain is continued (a response nobody continues is never parsed).
//!
//! *Never stale:* a hit is used only after the store confirms the chain, link for link
//! (`ResponseStore::chain_links`: one query of ids and statuses, tenant-filtered at each step,
//! the same walk and errors as the full read). A response deleted or expired, a chain rewritten,
//! another process's different answer: the ids differ, and the chain is read from the store as
//! if nothing were held. *Tenants:* entries are keyed by tenant and id, and a hit is only ever
//! confirmed by the tenant's own query. *Bounds:* [`MAX_ENTRIES`] chains and [`MAX_BYTES`],
//! each chain counted whole (its links' JSON bytes), so what is held, shared or not, stays
//! under the bound.
//!
//! Not here: reading a chain from the store, and when a chain is used (`history`).

use std::sync::{Arc, Mutex, OnceLock};

use toolbridge_store::{ResponseRecord, StoredResponse, Tenant};
use toolbridge_wire::lru::Lru;
use toolbridge_wire::responses::InputItem;

use crate::http::responses::tenant_key;

/// Chains held, at most.
pub(crate) const MAX_ENTRIES: usize = 4096;
/// Bytes of chains held (each counted whole), at most.
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// One stored response in a chain.
pub(crate) struct Link {
    id: String,
    previous: Option<Arc<Link>>,
    /// The item texts, input then output, until first parsed.
    texts: Vec<Box<str>>,
    items: OnceLock<Result<Vec<InputItem>, String>>,
    /// Links in the chain ending here.
    depth: usize,
    /// JSON bytes of the chain ending here.
    bytes: usize,
}

impl Link {
    /// The link of `id`, whose items are `texts` (input then output), after `previous`.
    fn new(id: String, previous: Option<Arc<Link>>, texts: Vec<Box<str>>) -> Arc<Self> {
        let own: usize = texts.iter().map(|t| t.len()).sum::<usize>() + id.len();
        let (depth, bytes) = previous
            .as_ref()
            .map_or((1, own), |p| (p.depth + 1, p.bytes + own));
        Arc::new(Self {
            id,
            previous,
            texts,
            items: OnceLock::new(),
            depth,
            bytes,
        })
    }

    /// The chain read from the store (oldest first), as links.
    pub(crate) fn from_chain(chain: &[StoredResponse]) -> Option<Arc<Self>> {
        let mut last: Option<Arc<Self>> = None;
        for stored in chain {
            let texts = stored
                .input_items
                .iter()
                .chain(&stored.output_items)
                .map(|v| v.to_string().into_boxed_str())
                .collect();
            last = Some(Self::new(stored.id.clone(), last.take(), texts));
        }
        last
    }

    /// The ids of the chain ending here, oldest first.
    pub(crate) fn ids(&self) -> Vec<&str> {
        let mut ids = Vec::with_capacity(self.depth);
        let mut at = Some(self);
        while let Some(link) = at {
            ids.push(link.id.as_str());
            at = link.previous.as_deref();
        }
        ids.reverse();
        ids
    }

    /// Every item of the chain ending here, oldest first (each link parsed on its first use).
    pub(crate) fn items(&self) -> Result<Vec<InputItem>, String> {
        let mut links = Vec::with_capacity(self.depth);
        let mut at = Some(self);
        while let Some(link) = at {
            links.push(link);
            at = link.previous.as_deref();
        }
        let mut items = Vec::new();
        for link in links.into_iter().rev() {
            items.extend(link.parsed()?.iter().cloned());
        }
        Ok(items)
    }

    fn parsed(&self) -> Result<&[InputItem], String> {
        let parsed = self.items.get_or_init(|| {
            self.texts
                .iter()
                .map(|text| serde_json::from_str(text).map_err(|e| e.to_string()))
                .collect()
        });
        parsed.as_deref().map_err(Clone::clone)
    }
}

/// The recent chains, by tenant and head id.
#[derive(Default)]
pub(crate) struct RecentChains {
    held: Mutex<Lru<u64, Held>>,
}

#[derive(Clone)]
struct Held {
    tenant: Arc<str>,
    head: Arc<Link>,
}

impl RecentChains {
    /// The chain ending at `id`, held for `tenant` (unconfirmed: see the module doc).
    pub(crate) fn get(&self, tenant: &Tenant, id: &str) -> Option<Arc<Link>> {
        let held = self.held.lock().ok()?.get(&tenant_key(tenant, id))?;
        (held.tenant.as_ref() == tenant.name() && held.head.id == id).then_some(held.head)
    }

    /// Holds `head` for `tenant`.
    pub(crate) fn put(&self, tenant: &Tenant, head: Arc<Link>) {
        let bytes = head.bytes;
        let held = Held {
            tenant: tenant.name().into(),
            head,
        };
        if let Ok(mut lru) = self.held.lock() {
            lru.insert(
                tenant_key(tenant, &held.head.id),
                held,
                bytes,
                MAX_ENTRIES,
                MAX_BYTES,
            );
        }
    }

    /// Chains held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.lock().map_or(0, |lru| lru.len())
    }
}

/// What a stored response's final write needs to hold its chain: where, and the chain it
/// continues (`None` for a first turn).
pub(in crate::http::responses) struct ChainSink {
    pub(in crate::http::responses) recent: Arc<RecentChains>,
    pub(in crate::http::responses) previous: Option<Arc<Link>>,
}

impl ChainSink {
    /// The chain that will end at `record` once it is written: built before the write, which
    /// takes the record.
    pub(in crate::http::responses) fn link(self, record: &ResponseRecord) -> HeldOnceWritten {
        let texts = record.item_texts().map(Box::from).collect();
        HeldOnceWritten {
            recent: self.recent,
            head: Link::new(record.id().to_owned(), self.previous, texts),
        }
    }
}

/// A chain to hold once its last response is written ([`Self::written`]).
pub(in crate::http::responses) struct HeldOnceWritten {
    recent: Arc<RecentChains>,
    head: Arc<Link>,
}

impl HeldOnceWritten {
    /// Holds the chain, written for `tenant`.
    pub(in crate::http::responses) fn written(self, tenant: &Tenant) {
        self.recent.put(tenant, self.head);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(items: &[&str]) -> Vec<Box<str>> {
        items.iter().map(|t| Box::from(*t)).collect()
    }

    const USER: &str = r#"{"type":"message","role":"user","content":"hi","id":"msg_1"}"#;
    const CALL: &str =
        r#"{"type":"function_call","call_id":"c1","name":"f","arguments":"{}","id":"fc_1"}"#;

    #[test]
    fn a_chain_reads_its_links_in_order_and_shares_them() {
        let first = Link::new("resp_1".into(), None, texts(&[USER]));
        let second = Link::new("resp_2".into(), Some(first.clone()), texts(&[CALL]));
        let fork = Link::new("resp_3".into(), Some(first.clone()), texts(&[USER, CALL]));
        assert_eq!(second.ids(), ["resp_1", "resp_2"]);
        assert_eq!(fork.ids(), ["resp_1", "resp_3"]);
        let items = second.items().unwrap();
        assert_eq!(items.len(), 2);
        assert!(matches!(items[0], InputItem::Message(_)));
        assert_eq!(fork.items().unwrap().len(), 3);
        assert!(first.items.get().is_some(), "parsed once, shared");
        assert_eq!(second.bytes, first.bytes + CALL.len() + "resp_2".len());
    }

    #[test]
    fn a_link_that_does_not_parse_says_so() {
        let bad = Link::new("resp_1".into(), None, texts(&["{"]));
        assert!(bad.items().is_err());
    }

    #[test]
    fn chains_are_held_per_tenant() {
        let recent = RecentChains::default();
        let a = Tenant::named("a");
        let b = Tenant::named("b");
        recent.put(&a, Link::new("resp_1".into(), None, texts(&[USER])));
        assert!(recent.get(&a, "resp_1").is_some());
        assert!(recent.get(&b, "resp_1").is_none());
        assert!(recent.get(&a, "resp_2").is_none());
    }

    #[test]
    fn chains_past_the_bound_are_let_go() {
        let recent = RecentChains::default();
        let big = "x".repeat(MAX_BYTES / 3);
        for n in 0..4 {
            let text = format!(r#""{big}""#);
            recent.put(
                &Tenant::open(),
                Link::new(format!("resp_{n}"), None, texts(&[&text])),
            );
        }
        assert!(recent.len() < 4);
        assert!(recent.get(&Tenant::open(), "resp_3").is_some());
        assert!(recent.get(&Tenant::open(), "resp_0").is_none());
    }
}
