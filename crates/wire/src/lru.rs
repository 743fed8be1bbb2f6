//! [`Lru`]: a least-recently-used map bounded by entries and bytes, with no clock (recency is
//! a counter). The process-wide caches use it: `core`'s compiled tool checks and grammars
//! (`repair::cache`) and tool schemas known valid (`request::parameters`), and the long JSON
//! literals here (`raw::literals`).

use std::collections::HashMap;

/// A least-recently-used map with a byte count.
#[derive(Debug)]
pub struct Lru<K, V> {
    entries: HashMap<K, Entry<V>>,
    bytes: usize,
    clock: u64,
}

impl<K, V> Default for Lru<K, V> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            bytes: 0,
            clock: 0,
        }
    }
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    bytes: usize,
    used: u64,
}

impl<K: std::hash::Hash + Eq + Copy, V: Clone> Lru<K, V> {
    /// The value under `key`, its use recorded.
    pub fn get(&mut self, key: &K) -> Option<V> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|e| {
            e.used = clock;
            e.value.clone()
        })
    }

    /// Inserts, then evicts the least recently used entries until both bounds hold (an entry
    /// larger than the byte budget is not kept at all).
    pub fn insert(&mut self, key: K, value: V, bytes: usize, max_entries: usize, max_bytes: usize) {
        if bytes > max_bytes || max_entries == 0 {
            return;
        }
        self.clock += 1;
        if let Some(old) = self.entries.insert(
            key,
            Entry {
                value,
                bytes,
                used: self.clock,
            },
        ) {
            self.bytes -= old.bytes;
        }
        self.bytes += bytes;
        while self.entries.len() > max_entries || self.bytes > max_bytes {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some(gone) = self.entries.remove(&oldest) {
                self.bytes -= gone.bytes;
            }
        }
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes kept, as counted at insertion.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}
