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

mod escape;
mod literals;

pub use escape::{json_literal, write_json_literal};

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

#[cfg(test)]
mod tests;
