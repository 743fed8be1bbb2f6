//! Duplicate keys at any depth of a JSON text: [`duplicate_key`] answers the path of the first
//! key an object repeats (`input[0].role`).
//!
//! The typed parse refuses a named field given twice (`read_fields!`, serde's derives), but a
//! key it keeps whole (in `extra`, in a `Value`: an unknown item, `metadata`, a tool's extra
//! keys) goes into a map where the last one silently wins, and one client's JSON library keeps
//! the first. A request that means two things is refused instead, wherever the repeat is.
//!
//! The check runs after a successful parse, over text already known to be JSON, so it is a
//! scan, not a parser: it follows only the structure (braces, brackets, commas, strings), skips
//! string contents with `memchr` (most of a request's bytes are in long strings: prompts,
//! outputs) and compares keys as written, decoding only a key with an escape. It allocates
//! nothing but its stack of open objects' keys; an object with many keys gets a hash set, so a
//! body of a million keys costs linear time. Not here: what a key means, the typed parse's.

use std::borrow::Cow;

use hashbrown::HashSet;

/// Keys an object holds before its duplicate check moves from a linear look to a hash set.
const LINEAR_KEYS: usize = 16;

/// An open object or array, while the scan is inside it.
enum Open<'a> {
    Object {
        /// Where this object's keys start in the scan's key stack.
        start: usize,
        /// Its keys once they are more than [`LINEAR_KEYS`] (then also in the stack).
        set: Option<HashSet<Cow<'a, str>>>,
    },
    Array {
        index: usize,
    },
}

/// The path (`input[0].role`, `metadata.k` at the top level as `k`) of the first key that an
/// object of `text` repeats, and that key; `None` when every object's keys are distinct. `text`
/// must be JSON (the scan does not check it); on anything else it answers without panicking.
pub fn duplicate_key(text: &str) -> Option<(String, String)> {
    let bytes = text.as_bytes();
    let mut open: Vec<Open<'_>> = Vec::new();
    // The keys of every open object, innermost last; an object's current key is its last.
    let mut keys: Vec<Cow<'_, str>> = Vec::new();
    let mut expect_key = false;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'{' => {
                open.push(Open::Object {
                    start: keys.len(),
                    set: None,
                });
                expect_key = true;
            }
            b'[' => {
                open.push(Open::Array { index: 0 });
                expect_key = false;
            }
            b'}' | b']' => {
                if let Some(Open::Object { start, .. }) = open.pop() {
                    keys.truncate(start);
                }
                expect_key = false;
            }
            b',' => match open.last_mut() {
                Some(Open::Object { .. }) => expect_key = true,
                Some(Open::Array { index }) => *index += 1,
                None => {}
            },
            b'"' => {
                let end = string_end(bytes, at + 1)?;
                if expect_key {
                    expect_key = false;
                    let key = key_text(text, at, end)?;
                    if let Some(Open::Object { start, set }) = open.last_mut() {
                        let own = keys.get(*start..).unwrap_or_default();
                        let repeated = match set {
                            Some(set) => !set.insert(key.clone()),
                            None => own.contains(&key),
                        };
                        if repeated {
                            return Some((path(&open, &keys, &key), key.into_owned()));
                        }
                        if set.is_none() && own.len() >= LINEAR_KEYS {
                            let mut all: HashSet<Cow<'_, str>> = own.iter().cloned().collect();
                            all.insert(key.clone());
                            *set = Some(all);
                        }
                        keys.push(key);
                    }
                }
                at = end;
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// The index of the quote that closes the string whose contents start at `from`.
fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let found = from + memchr::memchr2(b'"', b'\\', bytes.get(from..)?)?;
        if bytes.get(found) == Some(&b'"') {
            return Some(found);
        }
        // An escape: the next byte is escaped (a `\uXXXX`'s hex digits hold no quote).
        from = found + 2;
    }
}

/// A key as the typed parse sees it: the text between its quotes, decoded when it has escapes
/// (`"\u0061"` is the key `a`).
fn key_text(text: &str, open: usize, close: usize) -> Option<Cow<'_, str>> {
    let raw = text.get(open + 1..close)?;
    if raw.contains('\\') {
        serde_json::from_str::<String>(text.get(open..=close)?)
            .ok()
            .map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(raw))
    }
}

/// The path to `leaf` inside the open objects and arrays, as `serde_path_to_error` writes one.
fn path(open: &[Open<'_>], keys: &[Cow<'_, str>], leaf: &str) -> String {
    let mut path = String::new();
    // Each enclosing object's current key is the last key pushed before the next object's
    // start (or, for the innermost, `leaf` itself).
    for (depth, frame) in open.iter().enumerate() {
        match frame {
            Open::Array { index } => {
                path.push('[');
                path.push_str(&index.to_string());
                path.push(']');
            }
            Open::Object { .. } => {
                let key = match open.get(depth + 1..).and_then(|rest| {
                    rest.iter().find_map(|inner| match inner {
                        Open::Object { start, .. } => Some(*start),
                        Open::Array { .. } => None,
                    })
                }) {
                    Some(next_start) => next_start.checked_sub(1).and_then(|i| keys.get(i)),
                    None => None,
                };
                let key = if depth + 1 == open.len() {
                    leaf
                } else {
                    key.map_or("?", |k| k.as_ref())
                };
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
        }
    }
    path
}
