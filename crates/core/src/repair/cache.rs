//! [`SchemaCache`]: compiled tool checks shared across requests.
//!
//! Codex sends the same tools on every turn, and compiling their checks (a JSON Schema
//! validator per function, the `apply_patch` Lark grammar's regular expressions) costs far more
//! than the rest of a request's translation. The cache keys a request's [`ToolSchemas`] by a
//! hash of its tool declarations as JSON (foldhash, seeded per process) and compares the
//! declarations in full on a hit, so a repeated tool set costs one fast hash and one comparison,
//! and a collision costs a compilation, never another set's checks. (It was keyed by a BLAKE3
//! digest alone: about 7 instructions a byte, 60 K of a Codex request's 1 M.) Each compiled
//! grammar is keyed by a BLAKE3 hash of its text (hashed only when a set is compiled), so a
//! grammar compiles once per process however many tool sets carry it.
//!
//! Bounded: at most [`SchemaCache::new`]'s entry count of tool sets and of grammars, and at most
//! its byte budget of declarations (their JSON length, the measure of what they compile to); past
//! either, the least recently used entry goes. Two requests missing at once may both compile; the
//! second result replaces the first. No clock: recency is a counter. The lock is held only to
//! look up and to insert, never while compiling.
//!
//! Not here: what a check does (see [`super::schemas`]), or when the gateway uses one.

use std::sync::{Arc, Mutex};

use toolbridge_wire::raw::RawJson;
use toolbridge_wire::responses::Tool;

use toolbridge_wire::lru::Lru;

use super::lark::Grammar;
use super::schemas::ToolSchemas;

/// A grammar's key, the BLAKE3 digest of its text: collisions are not a concern at 256 bits.
type Key = [u8; 32];

/// A cached tool set: its checks, and the declarations they were compiled from (compared on a
/// hit).
#[derive(Debug, Clone)]
struct Set {
    checks: Arc<ToolSchemas>,
    text: RawJson,
}

/// Shared compiled checks; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct SchemaCache {
    inner: Mutex<Inner>,
    max_entries: usize,
    max_bytes: usize,
    /// The checks of a request without tools (nothing to check), shared: such a request is
    /// neither hashed nor counted.
    none: Arc<ToolSchemas>,
    /// The tool sets' hash.
    hasher: hashbrown::DefaultHashBuilder,
}

#[derive(Debug, Default)]
struct Inner {
    sets: Lru<u64, Set>,
    grammars: Lru<Key, Arc<Grammar>>,
    /// Hits and misses of tool sets, for tests and benchmarks.
    hits: u64,
    misses: u64,
}

impl Default for SchemaCache {
    /// 256 tool sets and grammars, 64 MiB of declarations.
    fn default() -> Self {
        Self::new(256, 64 * 1024 * 1024)
    }
}

impl SchemaCache {
    /// A cache of at most `max_entries` tool sets (and as many grammars) and `max_bytes` of
    /// declarations; `max_entries = 0` caches nothing.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_entries,
            max_bytes,
            none: Arc::new(ToolSchemas::from_tools(&[])),
            hasher: hashbrown::DefaultHashBuilder::default(),
        }
    }

    /// The compiled checks of `tools`: from the cache when these exact declarations were seen,
    /// else compiled (grammars from the cache when their text was seen) and kept.
    pub fn schemas(&self, tools: &[Tool]) -> Arc<ToolSchemas> {
        self.schemas_and_text(tools).0
    }

    /// [`Self::schemas`], and the declarations' JSON text it was keyed by (serialised once here,
    /// so that a response echoing the same tools writes this text instead of serialising them
    /// again); `None` for no tools, or tools that cannot be serialised (compiled uncached, as if
    /// new).
    pub fn schemas_and_text(&self, tools: &[Tool]) -> (Arc<ToolSchemas>, Option<RawJson>) {
        if tools.is_empty() {
            return (Arc::clone(&self.none), None);
        }
        let Some(text) = RawJson::of(tools) else {
            let compiled = ToolSchemas::compile(tools, &mut |text| self.grammar(text));
            return (Arc::new(compiled), None);
        };
        let key = std::hash::BuildHasher::hash_one(&self.hasher, text.text().as_bytes());
        let bytes = text.text().len();
        if let Ok(mut inner) = self.inner.lock() {
            // A set under the same hash with other declarations is a collision: compiled anew
            // (and it replaces the other).
            if let Some(found) = inner
                .sets
                .get(&key)
                .filter(|set| set.text.text() == text.text())
            {
                inner.hits += 1;
                return (found.checks, Some(text));
            }
            inner.misses += 1;
        }
        let compiled = Arc::new(ToolSchemas::compile(tools, &mut |text| self.grammar(text)));
        if let Ok(mut inner) = self.inner.lock() {
            let set = Set {
                checks: Arc::clone(&compiled),
                text: text.clone(),
            };
            inner
                .sets
                .insert(key, set, bytes, self.max_entries, self.max_bytes);
        }
        (compiled, Some(text))
    }

    /// A compiled grammar by its text, compiled at most once while it stays cached.
    fn grammar(&self, definition: &str) -> Result<Arc<Grammar>, String> {
        let key = *blake3::hash(definition.as_bytes()).as_bytes();
        if let Ok(mut inner) = self.inner.lock()
            && let Some(found) = inner.grammars.get(&key)
        {
            return Ok(found);
        }
        let grammar = Arc::new(Grammar::compile(definition)?);
        if let Ok(mut inner) = self.inner.lock() {
            inner.grammars.insert(
                key,
                Arc::clone(&grammar),
                definition.len(),
                self.max_entries,
                self.max_bytes,
            );
        }
        Ok(grammar)
    }

    /// `(hits, misses)` of tool sets so far.
    pub fn stats(&self) -> (u64, u64) {
        self.inner
            .lock()
            .map(|inner| (inner.hits, inner.misses))
            .unwrap_or_default()
    }

    /// How many tool sets and grammars are cached.
    pub fn len(&self) -> (usize, usize) {
        self.inner
            .lock()
            .map(|inner| (inner.sets.len(), inner.grammars.len()))
            .unwrap_or_default()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn tools(json: serde_json::Value) -> Vec<Tool> {
        serde_json::from_value(json).unwrap()
    }

    fn patch_tool(name: &str) -> serde_json::Value {
        serde_json::json!({"type": "custom", "name": name, "format": {"type": "grammar", "syntax": "lark",
            "definition": "start: \"*** Begin Patch\" LF body \"*** End Patch\" LF?\nbody: /(.|\\n)*?/\nLF: \"\\n\"\n"}})
    }

    #[test]
    fn a_repeated_tool_set_is_compiled_once_and_a_grammar_once_per_text() {
        let cache = SchemaCache::new(8, 1 << 20);
        let a = tools(serde_json::json!([
            {"type": "function", "name": "f", "parameters": {"type": "object"}},
            patch_tool("apply_patch"),
        ]));
        let first = cache.schemas(&a);
        let again = cache.schemas(&a);
        assert!(Arc::ptr_eq(&first, &again), "the same compiled checks");
        assert_eq!(cache.stats(), (1, 1));
        // Another tool set carrying the same grammar compiles its own set, not the grammar.
        let b = tools(serde_json::json!([patch_tool("apply_patch")]));
        let other = cache.schemas(&b);
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(cache.len(), (2, 1));
        // No tools: the shared empty checks, neither compiled, kept nor counted.
        let none = cache.schemas(&[]);
        assert!(Arc::ptr_eq(&none, &cache.schemas(&[])));
        assert_eq!(
            none.diagnostics(),
            ToolSchemas::from_tools(&[]).diagnostics()
        );
        assert_eq!((cache.stats(), cache.len()), ((1, 2), (2, 1)));
        // And the checks are the same as compiling without a cache.
        let direct = ToolSchemas::from_tools(&a);
        let text = "*** Begin Patch\nanything\n*** End Patch\n";
        let identity = crate::plan::Identity::Custom {
            namespace: None,
            name: "apply_patch".to_owned(),
        };
        assert_eq!(
            first.repair(Some(&identity), text),
            direct.repair(Some(&identity), text)
        );
        assert_eq!(first.diagnostics(), direct.diagnostics());
    }

    #[test]
    fn the_cache_is_bounded_by_entries_and_bytes_and_evicts_the_least_recently_used() {
        let cache = SchemaCache::new(2, 1 << 20);
        let set = |name: &str| {
            tools(
                serde_json::json!([{"type": "function", "name": name, "parameters": {"type": "object"}}]),
            )
        };
        let (a, b, c) = (set("a"), set("b"), set("c"));
        let first_a = cache.schemas(&a);
        cache.schemas(&b);
        cache.schemas(&a); // a is now the most recent
        cache.schemas(&c); // evicts b
        assert_eq!(cache.len().0, 2);
        assert!(Arc::ptr_eq(&first_a, &cache.schemas(&a)), "a stayed");
        let (_, misses) = cache.stats();
        cache.schemas(&b);
        assert_eq!(cache.stats().1, misses + 1, "b was evicted");
        // A set larger than the byte budget is compiled but never kept.
        let tiny = SchemaCache::new(8, 10);
        tiny.schemas(&a);
        tiny.schemas(&a);
        assert_eq!(tiny.stats(), (0, 2));
        assert!(tiny.is_empty());
    }
}
