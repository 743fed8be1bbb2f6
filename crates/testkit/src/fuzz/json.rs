//! JSON documents for fuzzing: a tree that can say what `serde_json::Value` cannot (a key given
//! twice, keys in any order, a number no `f64` holds, an escape that is wrong, bytes that are
//! not UTF-8), its rendering to bytes, and the mutations a fuzz target applies to a document
//! shaped like real traffic.
//!
//! A target builds a plausible document as a `Value` (`json!` in a strategy), converts it
//! ([`Json::from`]) and maps it through [`mutated`]: a few [`Mutation`]s, each choosing its node
//! by an index into the tree, so that proptest shrinks a failure by dropping mutations and
//! simplifying the document. [`render`] writes the bytes; [`ByteEdit`]s then damage them
//! (truncation, stray bytes, trailing data).

use std::fmt;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

mod mutate;

pub use mutate::{ByteEdit, Mutation, apply, byte_edit, edit, mutated, mutation};

/// A JSON document, possibly not valid JSON once rendered.
#[derive(Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(Num),
    Str(Text),
    Arr(Vec<Json>),
    /// Keys in order, repeats allowed.
    Obj(Vec<(Text, Json)>),
    /// Bytes written as they are.
    Raw(Vec<u8>),
}

/// A number as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Num {
    Int(i64),
    Uint(u64),
    Float(f64),
    /// A literal no machine number holds exactly (`1e999`, `18446744073709551616`, `-0`).
    Literal(&'static str),
}

/// A string literal as written: plain text (escaped as serde_json escapes it) and pieces that
/// may be wrong.
#[derive(Clone, PartialEq)]
pub struct Text(pub Vec<Piece>);

#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    Plain(String),
    /// Written as it is between the quotes: an escape, right or wrong (`\u0041`, `\ud800`,
    /// `\x`), or a raw control character.
    Escape(&'static str),
    /// Bytes written as they are (not UTF-8).
    Bytes(Vec<u8>),
}

impl Text {
    pub fn plain(text: impl Into<String>) -> Self {
        Self(vec![Piece::Plain(text.into())])
    }

    /// The text a parser reads, when every piece is valid; `None` otherwise.
    pub fn decoded(&self) -> Option<String> {
        let mut out = String::new();
        for piece in &self.0 {
            match piece {
                Piece::Plain(s) => out.push_str(s),
                Piece::Escape(e) => {
                    out.push_str(&serde_json::from_str::<String>(&format!("\"{e}\"")).ok()?)
                }
                Piece::Bytes(b) => out.push_str(std::str::from_utf8(b).ok()?),
            }
        }
        Some(out)
    }
}

impl Json {
    pub fn str(text: impl Into<String>) -> Self {
        Self::Str(Text::plain(text))
    }

    /// The nodes of the tree, in pre-order (this one first).
    pub fn count(&self) -> usize {
        1 + match self {
            Self::Arr(items) => items.iter().map(Json::count).sum(),
            Self::Obj(pairs) => pairs.iter().map(|(_, v)| v.count()).sum(),
            _ => 0,
        }
    }

    /// The `n`th node in pre-order.
    pub fn nth_mut(&mut self, n: usize) -> Option<&mut Json> {
        fn walk<'a>(node: &'a mut Json, n: &mut usize) -> Option<&'a mut Json> {
            if *n == 0 {
                return Some(node);
            }
            *n -= 1;
            match node {
                Json::Arr(items) => items.iter_mut().find_map(|item| walk(item, n)),
                Json::Obj(pairs) => pairs.iter_mut().find_map(|(_, v)| walk(v, n)),
                _ => None,
            }
        }
        let mut n = n;
        walk(self, &mut n)
    }

    /// The node chosen by `index` among those `matches` accepts (pre-order), if any.
    pub fn pick_mut(&mut self, index: &Index, matches: fn(&Json) -> bool) -> Option<&mut Json> {
        let mut found = Vec::new();
        let mut n = 0;
        fn collect(node: &Json, n: &mut usize, matches: fn(&Json) -> bool, out: &mut Vec<usize>) {
            if matches(node) {
                out.push(*n);
            }
            *n += 1;
            match node {
                Json::Arr(items) => items.iter().for_each(|i| collect(i, n, matches, out)),
                Json::Obj(pairs) => pairs.iter().for_each(|(_, v)| collect(v, n, matches, out)),
                _ => {}
            }
        }
        collect(self, &mut n, matches, &mut found);
        if found.is_empty() {
            return None;
        }
        let at = found[index.index(found.len())];
        self.nth_mut(at)
    }
}

impl From<&Value> for Json {
    fn from(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => Self::Num(Num::Uint(u)),
                (None, Some(i), _) => Self::Num(Num::Int(i)),
                (None, None, Some(f)) => Self::Num(Num::Float(f)),
                _ => Self::Null,
            },
            Value::String(s) => Self::str(s.clone()),
            Value::Array(items) => Self::Arr(items.iter().map(Json::from).collect()),
            Value::Object(map) => Self::Obj(
                map.iter()
                    .map(|(k, v)| (Text::plain(k.clone()), Json::from(v)))
                    .collect(),
            ),
        }
    }
}

impl From<Value> for Json {
    fn from(value: Value) -> Self {
        Self::from(&value)
    }
}

/// The bytes of `json`, compact.
pub fn render(json: &Json) -> Vec<u8> {
    let mut out = Vec::new();
    write(json, &mut out);
    out
}

fn write(json: &Json, out: &mut Vec<u8>) {
    match json {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Json::Num(n) => match n {
            Num::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
            Num::Uint(u) => out.extend_from_slice(u.to_string().as_bytes()),
            // serde_json writes a non-finite float as `null`.
            Num::Float(f) => out.extend_from_slice(
                serde_json::to_string(f)
                    .unwrap_or_else(|_| "null".to_owned())
                    .as_bytes(),
            ),
            Num::Literal(l) => out.extend_from_slice(l.as_bytes()),
        },
        Json::Str(text) => write_text(text, out),
        Json::Arr(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Json::Obj(pairs) => {
            out.push(b'{');
            for (i, (key, value)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_text(key, out);
                out.push(b':');
                write(value, out);
            }
            out.push(b'}');
        }
        Json::Raw(bytes) => out.extend_from_slice(bytes),
    }
}

fn write_text(text: &Text, out: &mut Vec<u8>) {
    out.push(b'"');
    for piece in &text.0 {
        match piece {
            Piece::Plain(s) => {
                let quoted = serde_json::to_string(s).unwrap_or_default();
                let inner = quoted
                    .strip_prefix('"')
                    .and_then(|q| q.strip_suffix('"'))
                    .unwrap_or_default();
                out.extend_from_slice(inner.as_bytes());
            }
            Piece::Escape(e) => out.extend_from_slice(e.as_bytes()),
            Piece::Bytes(b) => out.extend_from_slice(b),
        }
    }
    out.push(b'"');
}

/// Shown as its rendering: a failing input reads as the JSON a client would have sent.
impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        shown(&render(self), f)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        write_text(self, &mut out);
        shown(&out, f)
    }
}

/// `bytes` as text, with each byte that is not UTF-8 as `\xNN`.
fn shown(bytes: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for chunk in bytes.utf8_chunks() {
        f.write_str(chunk.valid())?;
        for b in chunk.invalid() {
            write!(f, "\\x{b:02x}")?;
        }
    }
    Ok(())
}

/// Number literals that break assumptions: beyond `u64`/`i64`/`f64`, negative zero, exponents.
pub const NUMBER_LITERALS: &[&str] = &[
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    "340282366920938463463374607431768211456",
    "1e999",
    "-1e999",
    "1E400",
    "4e-400",
    "1.7976931348623157e308",
    "-0",
    "-0.0",
    "0e0",
    "1e+2",
    "1.5E-3",
    "123456789012345678901234567890.123456789",
    "0.000000000000000000000000000000000000000000001",
    "2147483648",
    "4294967296",
    "9007199254740993",
];

/// Escapes, right and wrong, and raw control characters.
pub const ESCAPES: &[&str] = &[
    "\\u0041",
    "\\u00e9",
    "\\ud83d\\ude00",
    "\\ud800",
    "\\udc00",
    "\\ud800\\u0041",
    "\\ud83d",
    "\\u12",
    "\\uzzzz",
    "\\x41",
    "\\'",
    "\\",
    "\\/",
    "\\b\\f\\n\\r\\t",
    "\\u0000",
    "\u{0}",
    "\u{1}",
    "\n",
    "\t",
    "\u{7f}",
];

/// Byte runs that are not UTF-8 (or are, oddly).
pub const BAD_BYTES: &[&[u8]] = &[
    b"\xff",
    b"\xfe\xff",
    b"\xc3",
    b"\xc3\x28",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf0\x9f\x98",
    b"\xf4\x90\x80\x80",
    b"\xc0\xaf",
    b"\x80",
    b"\xef\xbb\xbf",
];

/// Text a model or a client plausibly writes: words, markup, quotes and escapes, non-ASCII,
/// sometimes long (at least 1 KiB: the parser caches long literals).
pub fn plausible_text() -> impl Strategy<Value = String> + Clone {
    let piece = prop_oneof![
        6 => "[a-z]{1,8}",
        2 => Just(" ".to_owned()),
        1 => Just("\n".to_owned()),
        1 => Just("\"".to_owned()),
        1 => Just("\\".to_owned()),
        1 => Just("<think>".to_owned()),
        1 => Just("</think>".to_owned()),
        1 => Just("é".to_owned()),
        1 => Just("中文".to_owned()),
        1 => Just("🎉".to_owned()),
        1 => Just("\u{1}".to_owned()),
        1 => Just("{\"".to_owned()),
        1 => "\\PC{1,4}",
    ];
    let short = prop::collection::vec(piece, 0..8).prop_map(|p| p.concat());
    prop_oneof![
        12 => short.clone(),
        1 => (short, 60..400usize).prop_map(|(s, n)| {
            let unit = if s.is_empty() { "ab \"c\"\n".to_owned() } else { s };
            unit.repeat(n.div_ceil(unit.len()).max(1) * 4)
        }),
    ]
}

/// A string literal, usually plain, sometimes with a bad piece.
pub fn text() -> impl Strategy<Value = Text> + Clone {
    let piece = prop_oneof![
        8 => plausible_text().prop_map(Piece::Plain),
        1 => prop::sample::select(ESCAPES).prop_map(Piece::Escape),
        1 => prop::sample::select(BAD_BYTES).prop_map(|b| Piece::Bytes(b.to_vec())),
    ];
    prop::collection::vec(piece, 0..4).prop_map(Text)
}

/// A key: usually a plausible field name.
pub fn key() -> impl Strategy<Value = Text> + Clone {
    prop_oneof![
        6 => prop::sample::select(FIELD_NAMES).prop_map(Text::plain),
        3 => "[a-z_]{1,10}".prop_map(Text::plain),
        1 => text(),
    ]
}

/// Names of fields the gateway's protocols use, so that a random key often means something.
pub const FIELD_NAMES: &[&str] = &[
    "type",
    "id",
    "role",
    "content",
    "text",
    "name",
    "arguments",
    "call_id",
    "input",
    "output",
    "model",
    "tools",
    "parameters",
    "index",
    "delta",
    "choices",
    "usage",
    "error",
    "message",
    "status",
    "response",
    "item",
    "output_index",
    "sequence_number",
    "candidates",
    "parts",
    "metadata",
    "stream",
    "store",
    "instructions",
    "stream_id",
    "code",
    "event",
];

/// Any JSON value, with odd leaves.
pub fn wild() -> impl Strategy<Value = Json> + Clone {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(|i| Json::Num(Num::Int(i))),
        any::<u64>().prop_map(|u| Json::Num(Num::Uint(u))),
        any::<f64>().prop_map(|f| Json::Num(Num::Float(f))),
        prop::sample::select(NUMBER_LITERALS).prop_map(|l| Json::Num(Num::Literal(l))),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::from(u32::MAX)),
            Just(u64::MAX)
        ]
        .prop_map(|u| Json::Num(Num::Uint(u))),
        text().prop_map(Json::Str),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Arr),
            prop::collection::vec((key(), inner), 0..4).prop_map(Json::Obj),
        ]
    })
}

/// Bytes shown as text where they are UTF-8 (escaped where not): a failing byte input reads.
#[derive(Clone, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("b'")?;
        shown(&self.0, f)?;
        f.write_str("'")
    }
}
