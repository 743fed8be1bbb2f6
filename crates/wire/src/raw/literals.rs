//! The JSON literals of long texts seen recently, so that a text sent again is not escaped
//! again.
//!
//! Codex sends the same long texts on every turn of a conversation: its base prompt (21.6 KB
//! with hundreds of line breaks and quotes), its skills message, and the whole conversation so
//! far. Escaping them for the upstream was an eighth of a Codex request's instructions
//! (148 K of 1.2 M, counted with `scripts/bench-instructions`), though the same text gives the
//! same literal every time. A text of [`CACHED`] bytes or more is looked up here by a foldhash
//! of its bytes and compared in full on a hit (so a collision costs a comparison, never a wrong
//! literal); a miss escapes it and keeps it.
//!
//! Bounds: [`BUDGET`] bytes of texts and literals together, least recently used out first; a
//! text too large for the budget is escaped and not kept. One lock, held for the lookup and the
//! comparison only (escaping runs outside it).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

/// Texts at least this long are cached (shorter ones cost less to escape than to look up).
pub(crate) const CACHED: usize = 1024;
/// The bytes of texts and literals kept, at most.
pub(crate) const BUDGET: usize = 2 * 1024 * 1024;

/// A text and its literal.
struct Entry {
    text: Box<str>,
    literal: Arc<str>,
    used: u64,
}

impl Entry {
    fn bytes(&self) -> usize {
        self.text.len() + self.literal.len()
    }
}

#[derive(Default)]
struct Cache {
    hasher: hashbrown::DefaultHashBuilder,
    entries: HashMap<u64, Entry>,
    bytes: usize,
    clock: u64,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// The literal of `text` (at least [`CACHED`] bytes), from the cache or made by `escape`.
pub(crate) fn literal(text: &str, escape: impl FnOnce(&str) -> String) -> Arc<str> {
    let key = {
        let Ok(mut guard) = CACHE.lock() else {
            return escape(text).into();
        };
        let cache = guard.get_or_insert_with(Cache::default);
        let key = cache.hasher.hash_one(text.as_bytes());
        cache.clock += 1;
        let clock = cache.clock;
        if let Some(entry) = cache.entries.get_mut(&key)
            && *entry.text == *text
        {
            entry.used = clock;
            return Arc::clone(&entry.literal);
        }
        key
    };
    let literal: Arc<str> = escape(text).into();
    let entry = Entry {
        text: text.into(),
        literal: Arc::clone(&literal),
        used: 0,
    };
    if entry.bytes() <= BUDGET
        && let Ok(mut guard) = CACHE.lock()
    {
        let cache = guard.get_or_insert_with(Cache::default);
        cache.insert(key, entry);
    }
    literal
}

impl Cache {
    /// Keeps `entry` (replacing a colliding one), then drops the least recently used until
    /// the budget holds.
    fn insert(&mut self, key: u64, mut entry: Entry) {
        self.clock += 1;
        entry.used = self.clock;
        self.bytes += entry.bytes();
        if let Some(old) = self.entries.insert(key, entry) {
            self.bytes -= old.bytes();
        }
        while self.bytes > BUDGET {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some(gone) = self.entries.remove(&oldest) {
                self.bytes -= gone.bytes();
            }
        }
    }
}

/// `(entries, bytes)` kept now.
#[cfg(test)]
pub(crate) fn size() -> (usize, usize) {
    CACHE
        .lock()
        .ok()
        .and_then(|guard| guard.as_ref().map(|c| (c.entries.len(), c.bytes)))
        .unwrap_or_default()
}
