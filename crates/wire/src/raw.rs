//! [`RawJson`]: a JSON value that is mostly passed on, kept as the text it arrived in.
//!
//! A function tool's `parameters` schema is read from the client's request, planned, sent to the
//! provider and echoed in the response, and looked inside only where a check or a dialect needs
//! it (whose results are cached by the schema's text). As a `serde_json::Value` it was built
//! into a tree of maps on parsing, deep-cloned into the plan, the canonical request, the outgoing
//! body and the response, and escaped again on every serialisation. Kept as its text it is read
//! once (scanned, not built), shared by reference count, and written out as it came.
//!
//! Serialising writes the text through serde_json's raw-value protocol: byte for byte with
//! serde_json's writers and `serde_json::to_value`. Deserialising captures the text from
//! serde_json's reader (and from a `Value`); any other deserializer (serde's buffered content,
//! behind `#[serde(flatten)]` or an untagged enum) yields a `Value`, written out as text.
//!
//! [`LongStr`] writes a long text as one literal; the literal of a text of 1 KiB or more comes
//! from a bounded cache of recent ones (`literals`), since Codex sends the same long texts on
//! every turn.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod literals;

/// serde_json's marker of its raw-value protocol (`serde_json::value::RawValue` speaks it):
/// a struct or map of this name, with one field of this name holding the JSON text.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// A JSON value kept as its text, shared: cloning counts a reference, serialising copies the
/// text, [`RawJson::value`] parses it on first use and keeps the tree.
#[derive(Clone)]
pub struct RawJson(Arc<Inner>);

struct Inner {
    /// Valid JSON: from serde_json's reader or its writer.
    text: Box<str>,
    value: OnceLock<Value>,
}

impl RawJson {
    /// The value's JSON text, as it arrived (or as serde_json wrote it).
    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// The value as a tree, parsed on first use.
    pub fn value(&self) -> &Value {
        // The text is valid JSON by construction, but serde_json refuses some valid JSON (a
        // number past `f64`'s range, nesting past 128): then `Null`, and no panic.
        self.0
            .value
            .get_or_init(|| serde_json::from_str(&self.0.text).unwrap_or(Value::Null))
    }

    /// The value as a tree, owned.
    pub fn to_value(&self) -> Value {
        self.value().clone()
    }

    /// The value's JSON object, if it is one.
    pub fn as_object(&self) -> Option<&Map<String, Value>> {
        self.value().as_object()
    }

    /// `value` serialised by serde_json, kept as its text; `None` when it cannot be
    /// serialised (a map with non-string keys, say).
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Option<Self> {
        serde_json::to_string(value)
            .ok()
            .map(|text| Self::from_text(text.into_boxed_str()))
    }

    /// Kept from already valid JSON text.
    fn from_text(text: Box<str>) -> Self {
        Self(Arc::new(Inner {
            text,
            value: OnceLock::new(),
        }))
    }
}

impl From<Value> for RawJson {
    fn from(value: Value) -> Self {
        let text = value.to_string().into_boxed_str();
        let cell = OnceLock::new();
        let _ = cell.set(value);
        Self(Arc::new(Inner { text, value: cell }))
    }
}

impl PartialEq for RawJson {
    /// Equal as JSON values (key order and spacing aside).
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || self.text() == other.text()
            || self.value() == other.value()
    }
}

impl PartialEq<Value> for RawJson {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct(RAW_TOKEN, 1)?;
        s.serialize_field(RAW_TOKEN, self.text())?;
        s.end()
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_newtype_struct(RAW_TOKEN, RawVisitor)
    }
}

/// Takes the text from serde_json's raw-value protocol (a one-entry map keyed by
/// [`RAW_TOKEN`]); from any other deserializer, the value itself.
struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = RawJson;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawJson, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Ok(RawJson::from(Value::Object(Map::new())));
        };
        if first == RAW_TOKEN {
            let text: String = map.next_value()?;
            return Ok(RawJson::from_text(text.into_boxed_str()));
        }
        // An ordinary object from a deserializer that does not speak the protocol.
        let mut object = Map::new();
        object.insert(first, map.next_value()?);
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            object.insert(key, value);
        }
        Ok(RawJson::from(Value::Object(object)))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<RawJson, D::Error> {
        Value::deserialize(d).map(RawJson::from)
    }

    fn visit_unit<E: de::Error>(self) -> Result<RawJson, E> {
        Ok(RawJson::from(Value::Null))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawJson, E> {
        Ok(RawJson::from(Value::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawJson, E> {
        Ok(RawJson::from(Value::from(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawJson, E> {
        Ok(RawJson::from(Value::from(v)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawJson, E> {
        Ok(RawJson::from(Value::from(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawJson, E> {
        Ok(RawJson::from(Value::String(v.to_owned())))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<RawJson, A::Error> {
        Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(RawJson::from)
    }
}

/// A string serialised through a fast escaper: long texts (a Codex base prompt is 21 KB with
/// hundreds of line breaks) are scanned eight bytes at a time and written as one raw literal,
/// where serde_json's writer goes byte by byte and writes a fragment per escape. Short ones go
/// the ordinary way. The bytes written are the same as serde_json's.
pub struct LongStr<'a>(pub &'a str);

/// `serialize_with` for an optional long text (a tool's description, a grammar): [`LongStr`].
pub fn long_opt<S: Serializer>(text: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    match text {
        Some(text) => serializer.serialize_some(&LongStr(text)),
        None => serializer.serialize_none(),
    }
}

/// Below this many bytes a string is written by serde_json itself.
const LONG: usize = 256;

impl Serialize for LongStr<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.len() < LONG {
            return serializer.serialize_str(self.0);
        }
        let mut s = serializer.serialize_struct(RAW_TOKEN, 1)?;
        if self.0.len() >= literals::CACHED {
            // A long text is usually one sent before (a base prompt, the conversation so far).
            let literal = literals::literal(self.0, json_literal);
            s.serialize_field(RAW_TOKEN, &*literal)?;
        } else {
            s.serialize_field(RAW_TOKEN, json_literal(self.0).as_str())?;
        }
        s.end()
    }
}

/// `deserialize_with` for a text that may be long and sent again (a message part's `text`):
/// from serde_json's reader the string's literal is taken as it is (scanned, not decoded), and
/// one of 1 KiB or more is decoded at most once while its text stays cached (`literals`); from
/// any other deserializer, a plain `String`. The text and the errors are `String`'s: a value
/// that is not a string is `invalid type: …, expected a string`.
pub fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    deserializer.deserialize_newtype_struct(RAW_TOKEN, TextVisitor)
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        String::deserialize(d)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        // Only serde_json's raw-value protocol comes here: a one-entry map keyed by the token.
        if map.next_key::<RawKey>()?.is_none() {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        }
        let raw: RawText<'de> = map.next_value()?;
        let raw = raw.0.as_ref();
        if !raw.starts_with('"') {
            return Err(not_a_string(raw));
        }
        let decode = |raw: &str| serde_json::from_str::<String>(raw).map_err(de::Error::custom);
        if raw.len() >= literals::CACHED {
            return literals::decoded(raw, decode).map(|text| String::from(&*text));
        }
        decode(raw)
    }
}

/// The raw-value protocol's key (the token), read without allocating.
struct RawKey;

impl<'de> Deserialize<'de> for RawKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = RawKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the raw-value token")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawKey, E> {
                if v == RAW_TOKEN {
                    Ok(RawKey)
                } else {
                    Err(de::Error::invalid_type(de::Unexpected::Map, &"a string"))
                }
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// The raw JSON text, borrowed from the input when the reader can lend it.
struct RawText<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for RawText<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawTextVisitor;
        impl<'de> Visitor<'de> for RawTextVisitor {
            type Value = RawText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("raw JSON text")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<RawText<'de>, E> {
                Ok(RawText(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawText<'de>, E> {
                Ok(RawText(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<RawText<'de>, E> {
                Ok(RawText(std::borrow::Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(RawTextVisitor)
    }
}

/// The error `String` gives for the JSON value `raw` that is not a string.
fn not_a_string<E: de::Error>(raw: &str) -> E {
    let value: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let unexpected = match &value {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => de::Unexpected::Unsigned(u),
            (None, Some(i)) => de::Unexpected::Signed(i),
            (None, None) => de::Unexpected::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    };
    E::invalid_type(unexpected, &"a string")
}

/// `text` as a JSON string literal, quotes included, escaped exactly as serde_json escapes
/// (`\"`, `\\`, `\b \f \n \r \t`, other control characters as `\u00XX`; nothing else).
pub fn json_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 32 + 2);
    out.push('"');
    escape_pieces(text, |piece| out.push_str(piece));
    out.push('"');
    out
}

/// [`json_literal`] of `text` appended to `out`: for a writer that builds a frame's bytes.
pub fn write_json_literal(text: &str, out: &mut Vec<u8>) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    escape_pieces(text, |piece| out.extend_from_slice(piece.as_bytes()));
    out.push(b'"');
}

/// `text` escaped, handed to `push` piece by piece: runs of bytes as they are, and each escape.
fn escape_pieces(text: &str, mut push: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    loop {
        // Eight bytes a step; a step that holds bytes to escape goes straight to the first
        // (the lowest flagged byte of a mask is always a true one), the rest one by one.
        let at = match bytes.get(i..i + 8) {
            Some(run) => match escape_mask(word(run)) {
                0 => {
                    i += 8;
                    continue;
                }
                mask => i + (mask.trailing_zeros() / 8) as usize,
            },
            None => match bytes[i..].iter().position(|&b| escape_of(b).is_some()) {
                Some(offset) => i + offset,
                None => break,
            },
        };
        // `start..at` ends before an ASCII byte: a char boundary.
        push(&text[start..at]);
        let byte = bytes[at];
        match escape_of(byte) {
            Some(Escape::Short(escape)) => push(escape),
            Some(Escape::Unicode) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let code = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xF)],
                ];
                push(std::str::from_utf8(&code).unwrap_or_default());
            }
            // The mask flags exactly the bytes `escape_of` escapes.
            None => {}
        }
        start = at + 1;
        i = at + 1;
    }
    push(&text[start..]);
}

enum Escape {
    /// The escape as written, backslash included.
    Short(&'static str),
    Unicode,
}

fn escape_of(byte: u8) -> Option<Escape> {
    Some(match byte {
        b'"' => Escape::Short("\\\""),
        b'\\' => Escape::Short("\\\\"),
        b'\n' => Escape::Short("\\n"),
        b'\r' => Escape::Short("\\r"),
        b'\t' => Escape::Short("\\t"),
        0x08 => Escape::Short("\\b"),
        0x0C => Escape::Short("\\f"),
        0x00..=0x1F => Escape::Unicode,
        _ => return None,
    })
}

/// Eight bytes (`bytes` holds at least eight) as one word.
fn word(bytes: &[u8]) -> u64 {
    let mut eight = [0u8; 8];
    eight.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(eight)
}

/// Non-zero when any of the eight bytes in `w` is a control character, `"` or `\\`.
fn escape_mask(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    // A byte below 0x20: subtracting 0x20 borrows into its high bit (bytes of 0x80 and above
    // are masked out by `!w`).
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    control | zero_byte(w ^ (ONES * u64::from(b'"'))) | zero_byte(w ^ (ONES * u64::from(b'\\')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A text read through [`text`]: the string serde_json decodes, from the cache the second
    /// time; a value that is not a string fails as `String` fails, at the field's path.
    #[test]
    fn texts_are_decoded_once_and_fail_as_strings_do() {
        #[derive(Deserialize)]
        struct Part {
            #[serde(deserialize_with = "text")]
            text: String,
        }
        let long = "a \"quoted\" line\n\ttab \u{1} é \u{1F600} \\ ".repeat(200);
        for value in [long.clone(), "short \n".to_owned(), String::new()] {
            let body = serde_json::to_string(&json!({"text": value})).unwrap();
            for _ in 0..2 {
                let part: Part = serde_json::from_str(&body).unwrap();
                assert_eq!(part.text, value);
                let from_value: Part = serde_json::from_value(json!({"text": value})).unwrap();
                assert_eq!(from_value.text, value);
            }
        }
        let cases = [
            (
                r#"{"text": 7}"#,
                "invalid type: integer `7`, expected a string",
            ),
            (
                r#"{"text": -7}"#,
                "invalid type: integer `-7`, expected a string",
            ),
            (
                r#"{"text": 1.5}"#,
                "invalid type: floating point `1.5`, expected a string",
            ),
            (r#"{"text": null}"#, "invalid type: null, expected a string"),
            (
                r#"{"text": true}"#,
                "invalid type: boolean `true`, expected a string",
            ),
            (
                r#"{"text": ["b"]}"#,
                "invalid type: sequence, expected a string",
            ),
            (
                r#"{"text": {"b": 1}}"#,
                "invalid type: map, expected a string",
            ),
        ];
        for (body, message) in cases {
            let mut de = serde_json::Deserializer::from_str(body);
            let Err(e) = serde_path_to_error::deserialize::<_, Part>(&mut de) else {
                panic!("{body} was read");
            };
            assert_eq!(e.path().to_string(), "text", "{body}");
            assert!(
                e.inner().to_string().starts_with(message),
                "{body}: {}",
                e.inner()
            );
            let plain = serde_json::from_str::<Part>(body)
                .err()
                .map(|e| e.to_string());
            let string = serde_json::from_str::<StringPart>(body)
                .err()
                .map(|e| e.to_string());
            assert_eq!(
                plain.as_deref().map(|m| m.split(" at line").next()),
                string.as_deref().map(|m| m.split(" at line").next()),
                "{body}"
            );
        }
        #[derive(Deserialize)]
        struct StringPart {
            #[allow(dead_code)]
            text: String,
        }
    }

    /// A long text is written as serde_json writes it, from the cache the second time (the
    /// same literal), and the cache keeps within its budget however many texts pass.
    #[test]
    fn long_texts_are_escaped_once_and_the_cache_is_bounded() {
        let long = "line \"one\"\n\ttab \u{1} é ".repeat(400);
        assert!(long.len() >= literals::CACHED);
        let first = serde_json::to_string(&LongStr(&long)).unwrap();
        assert_eq!(first, serde_json::to_string(&long).unwrap());
        let again = literals::literal(&long, |_| unreachable!("cached"));
        assert_eq!(&*again, first.as_str());
        // Many distinct texts: the oldest go, the budget holds, the output stays right.
        for i in 0..600 {
            let text = format!("{i} {}", "x\n".repeat(2048));
            let written = serde_json::to_string(&LongStr(&text)).unwrap();
            assert_eq!(written, serde_json::to_string(&text).unwrap());
        }
        let (entries, bytes) = literals::size();
        assert!(bytes <= literals::BUDGET, "{bytes}");
        assert!(entries > 1 && entries < 600, "{entries}");
        // A text larger than the whole budget is escaped, not kept.
        let huge = "y".repeat(literals::BUDGET);
        let written = serde_json::to_string(&LongStr(&huge)).unwrap();
        assert_eq!(written.len(), huge.len() + 2);
        assert!(literals::size().1 <= literals::BUDGET);
    }

    #[test]
    fn text_passes_through_byte_for_byte() {
        let text = r#"{"type":"object","properties":{"q":{"type":"string","description":"a \"quoted\" é"}}}"#;
        let raw: RawJson = serde_json::from_str(text).unwrap();
        assert_eq!(raw.text(), text);
        assert_eq!(serde_json::to_string(&raw).unwrap(), text);
        assert_eq!(raw.value()["properties"]["q"]["type"], "string");
    }

    #[test]
    fn nested_in_a_struct_and_through_values() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct T {
            name: String,
            parameters: Option<RawJson>,
        }
        let v = json!({"name": "f", "parameters": {"type": "object", "required": ["a"]}});
        let from_value: T = serde_json::from_value(v.clone()).unwrap();
        let from_ref = T::deserialize(&v).unwrap();
        let from_text: T = serde_json::from_str(&v.to_string()).unwrap();
        assert_eq!(from_value, from_text);
        assert_eq!(from_ref, from_text);
        assert_eq!(serde_json::to_value(&from_text).unwrap(), v);
        assert_eq!(serde_json::to_string(&from_value).unwrap(), v.to_string());
    }

    #[test]
    fn behind_flatten_it_reads_the_buffered_value() {
        #[derive(Deserialize)]
        struct Outer {
            #[serde(flatten)]
            inner: Inner2,
        }
        #[derive(Deserialize)]
        struct Inner2 {
            parameters: RawJson,
            scalar: RawJson,
            list: RawJson,
        }
        let text = r#"{"parameters":{"type":"object"},"scalar":3,"list":[1,"x",null]}"#;
        let outer: Outer = serde_json::from_str(text).unwrap();
        assert_eq!(outer.inner.parameters, json!({"type": "object"}));
        assert_eq!(outer.inner.scalar.text(), "3");
        assert_eq!(outer.inner.list.text(), r#"[1,"x",null]"#);
    }

    #[test]
    fn the_fast_escaper_writes_what_serde_json_writes() {
        let mut samples: Vec<String> = vec![
            String::new(),
            "plain ascii text that runs past eight bytes".into(),
            "quote \" backslash \\ newline \n tab \t cr \r".into(),
            "é ü 中文 🙂 and \u{7f} \u{80} \u{ff}".into(),
        ];
        // Every byte below 0x80 at every offset of a run of sixteen.
        for b in 0u8..0x80 {
            for offset in 0..20 {
                let mut s = "x".repeat(offset);
                s.push(char::from(b));
                s.push_str("tail-of-the-string");
                samples.push(s);
            }
        }
        // Two bytes to escape in one step, among multi-byte characters.
        for first in 0..10 {
            for second in first + 1..12 {
                let mut chars: Vec<char> = "éabcdefghijkl🙂".chars().collect();
                chars[first] = '"';
                chars[second] = '\u{1}';
                samples.push(chars.into_iter().collect());
            }
        }
        samples.push("line\n".repeat(500));
        for s in samples {
            assert_eq!(
                json_literal(&s),
                serde_json::to_string(&s).unwrap(),
                "{s:?}"
            );
            assert_eq!(
                serde_json::to_string(&LongStr(&s)).unwrap(),
                serde_json::to_string(&s).unwrap()
            );
        }
        let long = "a \"quoted\" line\n".repeat(40);
        assert_eq!(serde_json::to_value(LongStr(&long)).unwrap(), json!(long));
    }

    #[test]
    fn equality_is_of_values() {
        let a: RawJson = serde_json::from_str(r#"{"a": 1, "b": 2}"#).unwrap();
        let b = RawJson::from(json!({"b": 2, "a": 1}));
        assert_eq!(a, b);
        assert_ne!(a, RawJson::from(json!({"a": 1})));
    }
}
