//! The JSON literals of long texts seen recently, and the texts of long literals: a text sent
//! again is neither decoded nor escaped again.
//!
//! Codex sends the same long texts on every turn of a conversation: its base prompt (21.6 KB
//! with hundreds of line breaks and quotes), its skills message, and the whole conversation so
//! far. Decoding them from the request and escaping them again for the upstream were a third of
//! a Codex request's instructions (counted with `scripts/bench-instructions`: `parse_str` 248 K
//! and the escaper 148 K of 1.2 M), though the same literal gives the same text every time and
//! the same text the same literal. An input of [`CACHED`] bytes or more is looked up by a
//! foldhash of its bytes and compared in full on a hit (so a collision costs a comparison,
//! never a wrong answer); a miss converts it and keeps both.
//!
//! Bounds: [`BUDGET`] bytes of inputs and outputs per direction, least recently used out
//! first; an entry too large for the budget is converted and not kept. One lock per direction,
//! held for the lookup and the comparison only (converting runs outside it).

use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use crate::lru::Lru;

/// Inputs at least this long are cached (shorter ones cost less to convert than to look up).
pub(crate) const CACHED: usize = 1024;
/// The bytes of inputs and outputs kept per direction, at most.
pub(crate) const BUDGET: usize = 2 * 1024 * 1024;

/// Inputs by the hash of their bytes, each with what it converts to.
#[derive(Default)]
struct Cache {
    hasher: hashbrown::DefaultHashBuilder,
    entries: Lru<u64, (Arc<str>, Arc<str>)>,
}

/// Texts to their literals.
static ESCAPED: Mutex<Option<Cache>> = Mutex::new(None);
/// Literals to their texts.
static DECODED: Mutex<Option<Cache>> = Mutex::new(None);

/// The literal of `text` (at least [`CACHED`] bytes), from the cache or made by `escape`.
pub(crate) fn literal(text: &str, escape: impl FnOnce(&str) -> String) -> Arc<str> {
    match cached(&ESCAPED, text, |text| {
        Ok::<_, std::convert::Infallible>(escape(text))
    }) {
        Ok(literal) => literal,
        Err(never) => match never {},
    }
}

/// The text of the JSON string literal `raw` (at least [`CACHED`] bytes), from the cache or
/// made by `decode`; an error of `decode` is not kept.
pub(crate) fn decoded<E>(
    raw: &str,
    decode: impl FnOnce(&str) -> Result<String, E>,
) -> Result<Arc<str>, E> {
    cached(&DECODED, raw, decode)
}

fn cached<E>(
    cache: &Mutex<Option<Cache>>,
    input: &str,
    convert: impl FnOnce(&str) -> Result<String, E>,
) -> Result<Arc<str>, E> {
    let key = {
        let Ok(mut guard) = cache.lock() else {
            return convert(input).map(Arc::from);
        };
        let cache = guard.get_or_insert_with(Cache::default);
        let key = cache.hasher.hash_one(input.as_bytes());
        if let Some((kept, output)) = cache.entries.get(&key)
            && *kept == *input
        {
            return Ok(output);
        }
        key
    };
    let output: Arc<str> = convert(input)?.into();
    let bytes = input.len() + output.len();
    if bytes <= BUDGET
        && let Ok(mut guard) = cache.lock()
    {
        // A colliding entry is replaced; an entry past the budget is not kept.
        let entry = (Arc::from(input), Arc::clone(&output));
        guard.get_or_insert_with(Cache::default).entries.insert(
            key,
            entry,
            bytes,
            usize::MAX,
            BUDGET,
        );
    }
    Ok(output)
}

/// `(entries, bytes)` of literals kept now.
#[cfg(test)]
pub(crate) fn size() -> (usize, usize) {
    ESCAPED
        .lock()
        .ok()
        .and_then(|guard| guard.as_ref().map(|c| (c.entries.len(), c.entries.bytes())))
        .unwrap_or_default()
}
