//! Whole histories resent over HTTP: a session's last request held with the input items parsed
//! from it, so the next request, which resends those items byte for byte and adds a few, parses
//! only what it adds.
//!
//! Codex over HTTP sends its whole conversation every turn: each turn's body is the last one's
//! with new items appended to `input`, the fields around it unchanged. Reading those bytes again
//! (the JSON scan, the duplicate-key scan, the typed parse) was most of what a long session's turn
//! cost beyond its first (the session bench, `TOOLBRIDGE_BENCH_COUNT=instructions`: see
//! docs/performance.md). A [`Held`] request is found by tenant and the session's hint (Codex's
//! `session-id` header, else the body's `prompt_cache_key`); the new body is compared with the
//! held one byte for byte, and the held items lying wholly inside the common prefix are taken as
//! they are: the same bytes parse to the same items. What remains (the fields before `input`, the
//! new items, the fields after it) is parsed as one shorter document with the same checks (UTF-8,
//! duplicate keys, the typed parse); when that fails, the whole body is parsed again, so an error
//! names its place in the client's body.
//!
//! *Never wrong:* the hint only chooses which held request to compare with; the bytes decide.
//! *Tenants:* entries are keyed by tenant and hint, both checked on a hit. *Bounds:*
//! [`MAX_ENTRIES`] requests and [`MAX_BYTES`], each counted as twice its body (the bytes and
//! the items parsed from them); a body under [`MIN_BYTES`] is parsed as it is and not held.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use toolbridge_store::Tenant;
use toolbridge_wire::lru::Lru;
use toolbridge_wire::responses::{CreateResponse, Input, InputItem};

use super::parse_request;
use crate::http::responses::tenant_key;
use crate::platform::ops::metrics::names;

/// Requests held, at most.
pub(crate) const MAX_ENTRIES: usize = 1024;
/// Bytes held (each request counted as twice its body), at most.
pub(crate) const MAX_BYTES: usize = 64 << 20;
/// Bodies shorter than this are parsed whole and not held: parsing them costs less than keeping
/// them.
pub(crate) const MIN_BYTES: usize = 16 << 10;
/// The longest `prompt_cache_key` taken as a hint.
const MAX_HINT: usize = 256;

/// One request held: its body, where its input items end in it, and the items.
struct Held {
    tenant: Arc<str>,
    hint: Box<str>,
    body: Bytes,
    items: Spans,
    parsed: Vec<InputItem>,
}

/// Where a body's input items are: the offset of the `input` array's `[` and, for each item, the
/// offset just past it.
#[derive(Debug, PartialEq)]
struct Spans {
    open: usize,
    ends: Vec<usize>,
}

/// The requests held, by tenant and session hint.
#[derive(Default)]
pub(crate) struct ResentInputs {
    held: Mutex<Lru<u64, Arc<Held>>>,
}

impl ResentInputs {
    /// Parses `body` as `parse_request` does, taking the input items it shares with the
    /// session's held request from there, and holds it for the session's next request.
    pub(crate) fn parse(
        &self,
        tenant: &Tenant,
        session: Option<&str>,
        body: &Bytes,
    ) -> Result<CreateResponse, toolbridge_core::Error> {
        if body.len() < MIN_BYTES {
            return parse_request(body);
        }
        let Some(hint) = session
            .map(str::to_owned)
            .or_else(|| prompt_cache_key(body))
        else {
            return parse_request(body);
        };
        let key = tenant_key(tenant, &hint);
        let held = self.held.lock().ok().and_then(|mut lru| lru.get(&key));
        let held = held.filter(|h| h.tenant.as_ref() == tenant.name() && *h.hint == *hint);
        let (req, items) = match held.as_deref().and_then(|held| resume(held, body)) {
            Some(resumed) => {
                metrics::counter!(names::RESENT_INPUTS, "outcome" => "resumed").increment(1);
                resumed
            }
            None => {
                let req = parse_request(body)?;
                metrics::counter!(names::RESENT_INPUTS, "outcome" => "parsed").increment(1);
                let items = std::str::from_utf8(body)
                    .ok()
                    .and_then(|text| spans(text, 0));
                (req, items)
            }
        };
        if let (Some(items), Some(Input::Items(parsed))) = (items, &req.input) {
            let held = Held {
                tenant: tenant.name().into(),
                hint: hint.into(),
                body: body.clone(),
                items,
                parsed: parsed.clone(),
            };
            if let Ok(mut lru) = self.held.lock() {
                lru.insert(key, Arc::new(held), 2 * body.len(), MAX_ENTRIES, MAX_BYTES);
            }
        }
        Ok(req)
    }
}

/// `body` parsed with the items it shares with `held` taken from there, and where its items
/// are; `None` when it shares no whole item, or its remainder did not parse (the caller parses
/// the whole body, to name the place of an error).
fn resume(held: &Held, body: &[u8]) -> Option<(CreateResponse, Option<Spans>)> {
    let common = common_prefix(&held.body, body);
    let shared = held.items.ends.partition_point(|&end| end <= common);
    let cut = *held.items.ends.get(shared.checked_sub(1)?)?;
    // After the last item shared: a comma and the new items, or the array's end.
    let rest = &body[cut..];
    let blank = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
    let next = match rest.get(blank) {
        Some(b',') => cut + blank + 1,
        Some(b']') => cut + blank,
        _ => return None,
    };
    let open = held.items.open;
    let mut remainder = Vec::with_capacity(open + 1 + body.len() - next);
    remainder.extend_from_slice(&body[..=open]);
    remainder.extend_from_slice(&body[next..]);
    let mut req = parse_request(&remainder).ok()?;
    let Some(Input::Items(new)) = req.input.take() else {
        return None;
    };
    // The remainder is valid UTF-8: it parsed.
    let added = std::str::from_utf8(&remainder)
        .ok()
        .and_then(|text| spans(text, open));
    let items = added.map(|added| {
        let mut ends = held.items.ends[..shared].to_vec();
        ends.extend(added.ends.iter().map(|end| end - (open + 1) + next));
        Spans { open, ends }
    });
    let mut parsed = Vec::with_capacity(shared + new.len());
    parsed.extend_from_slice(&held.parsed[..shared]);
    parsed.extend(new);
    req.input = Some(Input::Items(parsed));
    Some((req, items))
}

/// The length of what `a` and `b` begin with alike: compared a block at a time (each block one
/// `memcmp`), then byte by byte inside the first block that differs.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let len = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= len && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..len]
        .iter()
        .zip(&b[at..len])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Where the input items of `text` are, reading from `from` (0: the whole request; else the
/// offset of the `input` array's `[`); `None` when `input` is not a list of items.
fn spans(text: &str, from: usize) -> Option<Spans> {
    #[derive(Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        input: Option<Vec<&'a RawValue>>,
    }
    let base = text.as_ptr() as usize;
    let items: Vec<&RawValue> = if from == 0 {
        serde_json::from_str::<Request<'_>>(text).ok()?.input?
    } else {
        // Only the array: the reader stops at its `]`.
        let mut de = serde_json::Deserializer::from_str(text.get(from..)?);
        Vec::<&RawValue>::deserialize(&mut de).ok()?
    };
    let end = |raw: &RawValue| raw.get().as_ptr() as usize - base + raw.get().len();
    let open = if from == 0 {
        // The `[` before the first item (a list without items is not worth holding).
        let first = items.first()?.get().as_ptr() as usize - base;
        text[..first].trim_end().len().checked_sub(1)?
    } else {
        from
    };
    (text.as_bytes().get(open) == Some(&b'[')).then(|| Spans {
        open,
        ends: items.iter().map(|raw| end(raw)).collect(),
    })
}

/// The body's `prompt_cache_key`, when it is a plain string of at most [`MAX_HINT`] bytes. A
/// hint only: a wrong one (a nested key of that name) costs a comparison. Codex writes it after
/// `input`, so the body's last [`TAIL`] bytes are searched first, then the whole body.
fn prompt_cache_key(body: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"prompt_cache_key\"";
    const TAIL: usize = 4096;
    let tail = body.len().saturating_sub(TAIL);
    let at = match memchr::memmem::rfind(&body[tail..], KEY) {
        Some(at) => tail + at,
        None => memchr::memmem::find(body, KEY)?,
    } + KEY.len();
    let rest = &body[at..];
    let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    let rest = rest.strip_prefix(b":")?;
    let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    let rest = rest.strip_prefix(b"\"")?;
    let len = rest.iter().take(MAX_HINT + 1).position(|&b| b == b'"')?;
    let value = &rest[..len];
    if value.contains(&b'\\') {
        return None;
    }
    String::from_utf8(value.to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn body(items: &[Value]) -> Bytes {
        let mut request = json!({
            "model": "m",
            "instructions": "x".repeat(MIN_BYTES),
            "input": items,
            "prompt_cache_key": "session-1",
            "tools": [],
        });
        request["store"] = json!(false);
        Bytes::from(serde_json::to_vec(&request).unwrap())
    }

    fn held(resent: &ResentInputs, tenant: &Tenant) -> Arc<Held> {
        let key = tenant_key(tenant, "session-1");
        resent.held.lock().unwrap().get(&key).unwrap()
    }

    fn message(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    /// Turn after turn, the body parses to what a whole parse gives, its shared items taken
    /// from the held request.
    #[test]
    fn a_resent_history_parses_as_a_whole_body_does() {
        let resent = ResentInputs::default();
        let tenant = Tenant::open();
        let mut items = vec![message("first")];
        for turn in 0..4 {
            let b = body(&items);
            if turn > 0 {
                let held = held(&resent, &tenant);
                let (resumed, _) = resume(&held, &b).expect("the held items are taken");
                assert_eq!(resumed, parse_request(&b).unwrap(), "turn {turn}");
            }
            let req = resent.parse(&tenant, None, &b).unwrap();
            assert_eq!(req, parse_request(&b).unwrap(), "turn {turn}");
            let held = held(&resent, &tenant);
            assert_eq!(
                held.items,
                spans(std::str::from_utf8(&b).unwrap(), 0).unwrap(),
                "turn {turn}: the spans of the items held"
            );
            items.push(json!({"type": "function_call", "call_id": format!("c{turn}"), "name": "f", "arguments": "{\"a\":\"\\\"q\\\"\"}"}));
            items.push(json!({"type": "function_call_output", "call_id": format!("c{turn}"), "output": "out\n".repeat(turn + 1)}));
        }
    }

    /// A body that differs inside a held item, has no new items, or comes from another tenant
    /// parses right; a remainder that does not parse is reported with its place in the body.
    #[test]
    fn what_differs_is_parsed_and_errors_name_the_clients_place() {
        let resent = ResentInputs::default();
        let tenant = Tenant::open();
        let first = body(&[message("a"), message("b")]);
        resent.parse(&tenant, None, &first).unwrap();
        // The same body again: every item shared, none added.
        let held = held(&resent, &tenant);
        assert!(resume(&held, &first).is_some());
        let req = resent.parse(&tenant, None, &first).unwrap();
        assert_eq!(req, parse_request(&first).unwrap());
        // An edited history: the second item differs.
        let edited = body(&[message("a"), message("c"), message("d")]);
        assert_eq!(
            resent.parse(&tenant, None, &edited).unwrap(),
            parse_request(&edited).unwrap()
        );
        // Another tenant's body under the same hint is its own.
        let other = Tenant::named("other");
        let theirs = body(&[message("a"), message("z")]);
        assert_eq!(
            resent.parse(&other, None, &theirs).unwrap(),
            parse_request(&theirs).unwrap()
        );
        // A new item that is not an item: the error names its place in the whole body.
        let text = std::str::from_utf8(&edited).unwrap();
        let broken = text.replacen("]}]", "]},{\"type\":\"message\",\"role\":7}]", 1);
        assert_ne!(broken, text);
        let e = resent
            .parse(&tenant, None, &Bytes::from(broken.clone()))
            .unwrap_err();
        let whole = parse_request(broken.as_bytes()).unwrap_err();
        assert_eq!(e.to_string(), whole.to_string());
        assert!(e.to_string().contains("input[3]"), "{e}");
    }

    /// A duplicate key in what a turn adds is refused as in a whole body.
    #[test]
    fn a_duplicate_key_in_the_added_items_is_refused() {
        let resent = ResentInputs::default();
        let tenant = Tenant::open();
        let first = body(&[message("a")]);
        resent.parse(&tenant, None, &first).unwrap();
        let text = std::str::from_utf8(&first).unwrap();
        let dup = text.replacen(
            "]}]",
            "]},{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"o\",\"output\":\"p\"}]",
            1,
        );
        let e = resent.parse(&tenant, None, &Bytes::from(dup)).unwrap_err();
        assert!(e.to_string().contains("duplicate field `output`"), "{e}");
    }

    #[test]
    fn the_common_prefix_is_found_across_blocks() {
        let a = vec![7u8; 10_000];
        let mut b = a.clone();
        assert_eq!(common_prefix(&a, &b), 10_000);
        b[9_000] = 8;
        assert_eq!(common_prefix(&a, &b), 9_000);
        assert_eq!(common_prefix(&a[..5_000], &b), 5_000);
        b[0] = 0;
        assert_eq!(common_prefix(&a, &b), 0);
    }

    #[test]
    fn the_hint_is_a_plain_prompt_cache_key() {
        assert_eq!(
            prompt_cache_key(br#"{"a":1,"prompt_cache_key" : "abc-1"}"#).as_deref(),
            Some("abc-1")
        );
        assert_eq!(prompt_cache_key(br#"{"prompt_cache_key":"a\"b"}"#), None);
        assert_eq!(prompt_cache_key(br#"{"prompt_cache_key":7}"#), None);
        // Before a long input, as well as after it.
        let early = format!(
            r#"{{"prompt_cache_key":"k-2","input":"{}"}}"#,
            "i".repeat(10_000)
        );
        assert_eq!(prompt_cache_key(early.as_bytes()).as_deref(), Some("k-2"));
        let long = format!(r#"{{"prompt_cache_key":"{}"}}"#, "k".repeat(MAX_HINT + 1));
        assert_eq!(prompt_cache_key(long.as_bytes()), None);
    }
}
