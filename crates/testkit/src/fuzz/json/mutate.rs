//! The mutations a fuzz target applies to a document shaped like real traffic, and the damage
//! it may then do to its bytes.
//!
//! Each [`Mutation`] chooses its node by an index into the tree (pre-order, among the nodes it
//! applies to), so a failing input shrinks by dropping mutations and simplifying the document
//! they apply to; a mutation that finds no node of its kind does nothing.

use proptest::prelude::*;
use proptest::sample::Index;

use super::{BAD_BYTES, Json, NUMBER_LITERALS, Num, Text, key, text, wild};

/// A change to a document, at the node its index chooses.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// The node replaced by any value (usually of the wrong type).
    Replace(Index, Json),
    /// The node wrapped in `depth` arrays or objects (past serde_json's recursion limit too).
    Nest(Index, usize, bool),
    /// A key of an object given again, with this value.
    Duplicate(Index, Index, Json),
    /// An object's keys rotated (`type` no longer first) or reversed.
    Reorder(Index, Index, bool),
    /// A key of an object removed.
    Remove(Index, Index),
    /// A key added to an object.
    Add(Index, Text, Json),
    /// An object's `type` (added when missing) set to this.
    Retype(Index, Text),
    /// A string's text replaced with this one (bad pieces and all).
    Restring(Index, Text),
    /// A number replaced with a literal no machine number holds.
    Renumber(Index, &'static str),
}

/// Types an object may claim that no parser knows.
const ODD_TYPES: &[&str] = &[
    "",
    "unknown",
    "message ",
    "Message",
    "function_call_output_extra",
    "item_reference",
    "compaction",
    "reasoning",
    "response.create",
    "null",
    "🎉",
];

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), wild()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        1 => (any::<Index>(), 1..300usize, any::<bool>())
            .prop_map(|(i, d, a)| Mutation::Nest(i, d, a)),
        2 => (any::<Index>(), any::<Index>(), wild())
            .prop_map(|(i, k, v)| Mutation::Duplicate(i, k, v)),
        2 => (any::<Index>(), any::<Index>(), any::<bool>())
            .prop_map(|(i, k, r)| Mutation::Reorder(i, k, r)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, k)| Mutation::Remove(i, k)),
        2 => (any::<Index>(), key(), wild()).prop_map(|(i, k, v)| Mutation::Add(i, k, v)),
        2 => (
            any::<Index>(),
            prop_oneof![prop::sample::select(ODD_TYPES).prop_map(Text::plain), text()],
        )
            .prop_map(|(i, t)| Mutation::Retype(i, t)),
        2 => (any::<Index>(), text()).prop_map(|(i, t)| Mutation::Restring(i, t)),
        1 => (any::<Index>(), prop::sample::select(NUMBER_LITERALS))
            .prop_map(|(i, l)| Mutation::Renumber(i, l)),
    ]
}

/// `json` changed by `mutations`, in order.
pub fn apply(mut json: Json, mutations: &[Mutation]) -> Json {
    fn is_obj(j: &Json) -> bool {
        matches!(j, Json::Obj(_))
    }
    fn is_str(j: &Json) -> bool {
        matches!(j, Json::Str(_))
    }
    fn is_num(j: &Json) -> bool {
        matches!(j, Json::Num(_))
    }
    fn any(_: &Json) -> bool {
        true
    }
    for m in mutations {
        match m {
            Mutation::Replace(i, v) => {
                // Not the root: a document of the wrong type altogether is the byte targets'.
                let n = json.count();
                if n > 1
                    && let Some(node) = json.nth_mut(1 + i.index(n - 1))
                {
                    *node = v.clone();
                }
            }
            Mutation::Nest(i, depth, arrays) => {
                if let Some(node) = json.pick_mut(i, any) {
                    let mut nested = std::mem::replace(node, Json::Null);
                    for _ in 0..*depth {
                        nested = if *arrays {
                            Json::Arr(vec![nested])
                        } else {
                            Json::Obj(vec![(Text::plain("a"), nested)])
                        };
                    }
                    *node = nested;
                }
            }
            Mutation::Duplicate(i, k, v) => {
                if let Some(Json::Obj(pairs)) = json.pick_mut(i, is_obj)
                    && !pairs.is_empty()
                {
                    let key = pairs[k.index(pairs.len())].0.clone();
                    pairs.push((key, v.clone()));
                }
            }
            Mutation::Reorder(i, k, reverse) => {
                if let Some(Json::Obj(pairs)) = json.pick_mut(i, is_obj)
                    && !pairs.is_empty()
                {
                    if *reverse {
                        pairs.reverse();
                    } else {
                        let len = pairs.len();
                        pairs.rotate_left((1 + k.index(len)) % len);
                    }
                }
            }
            Mutation::Remove(i, k) => {
                if let Some(Json::Obj(pairs)) = json.pick_mut(i, is_obj)
                    && !pairs.is_empty()
                {
                    pairs.remove(k.index(pairs.len()));
                }
            }
            Mutation::Add(i, key, v) => {
                if let Some(Json::Obj(pairs)) = json.pick_mut(i, is_obj) {
                    pairs.push((key.clone(), v.clone()));
                }
            }
            Mutation::Retype(i, kind) => {
                if let Some(Json::Obj(pairs)) = json.pick_mut(i, is_obj) {
                    match pairs
                        .iter_mut()
                        .find(|(k, _)| k.decoded().as_deref() == Some("type"))
                    {
                        Some((_, v)) => *v = Json::Str(kind.clone()),
                        None => pairs.insert(0, (Text::plain("type"), Json::Str(kind.clone()))),
                    }
                }
            }
            Mutation::Restring(i, text) => {
                if let Some(node) = json.pick_mut(i, is_str) {
                    *node = Json::Str(text.clone());
                }
            }
            Mutation::Renumber(i, literal) => {
                if let Some(node) = json.pick_mut(i, is_num) {
                    *node = Json::Num(Num::Literal(literal));
                }
            }
        }
    }
    json
}

/// `base` documents with up to `max` mutations each (none, often).
pub fn mutated(base: impl Strategy<Value = Json>, max: usize) -> impl Strategy<Value = Json> {
    let mutations = prop_oneof![
        1 => Just(Vec::new()),
        3 => prop::collection::vec(mutation(), 1..=max.max(1)),
    ];
    (base, mutations).prop_map(|(json, mutations)| apply(json, &mutations))
}

/// Bytes that change a document's structure.
const STRAY: &[&[u8]] = &[b"{", b"}", b"]", b",", b"\"", b":", b"\\", b" ", b"null"];

/// Damage to a rendered document.
#[derive(Clone, Debug)]
pub enum ByteEdit {
    /// Cut at this point.
    Truncate(Index),
    /// These bytes inserted at this point.
    Insert(Index, Vec<u8>),
    /// The byte at this point replaced.
    Overwrite(Index, u8),
    /// Data after the document.
    Trailing(Vec<u8>),
}

pub fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    let stray = prop_oneof![
        prop::collection::vec(any::<u8>(), 1..4),
        prop::sample::select(BAD_BYTES).prop_map(<[u8]>::to_vec),
        prop::sample::select(STRAY).prop_map(<[u8]>::to_vec),
    ];
    prop_oneof![
        any::<Index>().prop_map(ByteEdit::Truncate),
        (any::<Index>(), stray.clone()).prop_map(|(i, b)| ByteEdit::Insert(i, b)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| ByteEdit::Overwrite(i, b)),
        stray.prop_map(ByteEdit::Trailing),
    ]
}

/// `bytes` damaged by `edits`, in order.
pub fn edit(mut bytes: Vec<u8>, edits: &[ByteEdit]) -> Vec<u8> {
    for e in edits {
        let len = bytes.len();
        match e {
            ByteEdit::Truncate(i) => bytes.truncate(i.index(len + 1)),
            ByteEdit::Insert(i, b) => {
                let at = i.index(len + 1);
                bytes.splice(at..at, b.iter().copied());
            }
            ByteEdit::Overwrite(i, b) if len > 0 => bytes[i.index(len)] = *b,
            ByteEdit::Overwrite(..) => {}
            ByteEdit::Trailing(b) => bytes.extend_from_slice(b),
        }
    }
    bytes
}
