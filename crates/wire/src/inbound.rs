//! Reading the lenient inbound Responses shapes, with errors that name the leaf field and say what
//! was wrong in plain words.
//!
//! `input`, its items, a message's `content`, content parts and `tools` have hand-written
//! `Deserialize` impls ([`crate::responses`] holds the types): an item may omit `type` (a
//! message), an unknown `type` is kept whole in an `Other` variant, and a known one is parsed
//! from the buffered object by `typed`. Buffering loses the caller's path tracking
//! (`serde_path_to_error` stops at `input[3]`), so an error found inside carries the rest of its
//! path at the front of its message — ``at `content[1].type`: …`` — and each enclosing level
//! prepends its own part: the message of an error at `input[3].content[1].type` reaches the
//! caller as ``at `content[1].type`: …`` under the path `input[3]`. [`explain`] joins the two and
//! rewrites serde's wording (`expected u64`, `untagged enum Stop`, `a sequence`) into the words a
//! client knows, in one place.
//!
//! Not here: semantic checks (a known role, a valid schema), which are the core's; the outbound
//! shapes, which are plain derives.

use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::responses::{ContentPart, Input, InputItem, MessageContent, Tool};

mod duplicates;
mod fields;
mod wording;

pub use duplicates::duplicate_key;
use fields::Key;
use wording::{describe, join_path, missing_field, split_path};
pub use wording::{explain, plain};

impl<'de> Deserialize<'de> for Input {
    // Hand-written rather than untagged so that an error inside an item keeps its path
    // (`input[3]`) instead of becoming "did not match any variant".
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Input;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of input items")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Input, E> {
                Ok(Input::Text(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Input, E> {
                Ok(Input::Text(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Input, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(item) = seq.next_element::<InputItem>()? {
                    items.push(item);
                }
                Ok(Input::Items(items))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl<'de> Deserialize<'de> for InputItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TypedVisitor::<Self>(PhantomData))
    }
}

impl ByType for InputItem {
    const EXPECTING: &'static str = "an input item object";
    const UNTYPED: Option<&'static str> = Some("message");
    fn in_place<'de, A: MapAccess<'de>>(kind: &str, map: A) -> Result<Self, A::Error> {
        item_of_kind(kind, map)
    }
    fn buffered<E: serde::de::Error>(kind: String, map: Map<String, Value>) -> Result<Self, E> {
        buffered_item(kind, map)
    }
}

/// An object whose `type` decides its shape. The fast path: `type` first (as Codex and the
/// SDKs send it), the rest read in place. Otherwise the object is buffered and read again.
trait ByType: Sized {
    const EXPECTING: &'static str;
    /// The type of an object without `type`; `None`: `type` is required.
    const UNTYPED: Option<&'static str>;
    fn in_place<'de, A: MapAccess<'de>>(kind: &str, map: A) -> Result<Self, A::Error>;
    fn buffered<E: serde::de::Error>(kind: String, map: Map<String, Value>) -> Result<Self, E>;
}

struct TypedVisitor<T>(PhantomData<T>);

impl<'de, T: ByType> Visitor<'de> for TypedVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(T::EXPECTING)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        match map.next_key::<Key<'de>>()? {
            Some(Key(key)) if key == "type" => {
                let kind: Key<'de> = map.next_value()?;
                T::in_place(&kind.0, map)
            }
            first => {
                let mut object = rest_of(first, map)?;
                let kind = match (take_type(&mut object)?, T::UNTYPED) {
                    (Some(kind), _) => kind,
                    (None, Some(untyped)) => untyped.to_owned(),
                    (None, None) => return Err(A::Error::missing_field("type")),
                };
                T::buffered(kind, object)
            }
        }
    }
}

/// An item of type `kind` read from the rest of `map` (its `type` taken).
fn item_of_kind<'de, A: MapAccess<'de>>(kind: &str, map: A) -> Result<InputItem, A::Error> {
    use InputItem as I;
    Ok(match kind {
        "message" => return fields::message_item(map, None).map(I::Message),
        "function_call" => I::FunctionCall(typed_in_place(map)?),
        "function_call_output" => I::FunctionCallOutput(typed_in_place(map)?),
        "custom_tool_call" => I::CustomToolCall(typed_in_place(map)?),
        "custom_tool_call_output" => I::CustomToolCallOutput(typed_in_place(map)?),
        "local_shell_call" => I::LocalShellCall(typed_in_place(map)?),
        "local_shell_call_output" => I::LocalShellCallOutput(typed_in_place(map)?),
        "shell_call" => I::ShellCall(typed_in_place(map)?),
        "shell_call_output" => I::ShellCallOutput(typed_in_place(map)?),
        "apply_patch_call" => I::ApplyPatchCall(typed_in_place(map)?),
        "apply_patch_call_output" => I::ApplyPatchCallOutput(typed_in_place(map)?),
        "reasoning" => I::Reasoning(typed_in_place(map)?),
        "mcp_call" => I::McpCall(typed_in_place(map)?),
        "mcp_approval_request" => I::McpApprovalRequest(typed_in_place(map)?),
        "mcp_approval_response" => I::McpApprovalResponse(typed_in_place(map)?),
        // Items that keep their unknown keys (flattened): buffered.
        "tool_search_call" | "tool_search_output" | "additional_tools" => {
            buffered_item(kind.to_owned(), rest_of(None, map)?)?
        }
        _ => I::Other(with_type(kind, map)?),
    })
}

/// A typed struct read in place from the rest of `map`.
fn typed_in_place<'de, T: Deserialize<'de>, A: MapAccess<'de>>(map: A) -> Result<T, A::Error> {
    T::deserialize(MapAccessDeserializer::new(map))
}

/// An item read from its buffered object (`type` taken).
fn buffered_item<E: serde::de::Error>(
    kind: String,
    mut map: Map<String, Value>,
) -> Result<InputItem, E> {
    Ok(match kind.as_str() {
        "message" => InputItem::Message(typed(map)?),
        "function_call" => InputItem::FunctionCall(typed(map)?),
        "function_call_output" => InputItem::FunctionCallOutput(typed(map)?),
        "custom_tool_call" => InputItem::CustomToolCall(typed(map)?),
        "custom_tool_call_output" => InputItem::CustomToolCallOutput(typed(map)?),
        "local_shell_call" => InputItem::LocalShellCall(typed(map)?),
        "local_shell_call_output" => InputItem::LocalShellCallOutput(typed(map)?),
        "shell_call" => InputItem::ShellCall(typed(map)?),
        "shell_call_output" => InputItem::ShellCallOutput(typed(map)?),
        "apply_patch_call" => InputItem::ApplyPatchCall(typed(map)?),
        "apply_patch_call_output" => InputItem::ApplyPatchCallOutput(typed(map)?),
        "reasoning" => InputItem::Reasoning(typed(map)?),
        "mcp_call" => InputItem::McpCall(typed(map)?),
        "mcp_approval_request" => InputItem::McpApprovalRequest(typed(map)?),
        "mcp_approval_response" => InputItem::McpApprovalResponse(typed(map)?),
        "tool_search_call" => InputItem::ToolSearchCall(typed(map)?),
        "tool_search_output" => InputItem::ToolSearchOutput(typed(map)?),
        "additional_tools" => InputItem::AdditionalTools(typed(map)?),
        _ => {
            map.insert("type".to_owned(), Value::String(kind));
            InputItem::Other(map)
        }
    })
}

/// The rest of `map` as an object, starting with `first` (a key taken, its value not yet read).
fn rest_of<'de, A: MapAccess<'de>>(
    first: Option<Key<'de>>,
    mut map: A,
) -> Result<Map<String, Value>, A::Error> {
    let mut object = Map::new();
    if let Some(Key(key)) = first {
        object.insert(key.into_owned(), map.next_value()?);
    }
    while let Some((key, value)) = map.next_entry::<String, Value>()? {
        object.insert(key, value);
    }
    Ok(object)
}

impl<'de> Deserialize<'de> for MessageContent {
    // Hand-written rather than untagged so that an error inside a part keeps its index
    // (`content[2]`) and its own path.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = MessageContent;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of content parts")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<MessageContent, E> {
                Ok(MessageContent::Text(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<MessageContent, E> {
                Ok(MessageContent::Text(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<MessageContent, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
                while let Some(part) = seq.next_element::<ContentPart>()? {
                    parts.push(part);
                }
                Ok(MessageContent::Parts(parts))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TypedVisitor::<Self>(PhantomData))
    }
}

impl ByType for ContentPart {
    const EXPECTING: &'static str = "a content part object";
    const UNTYPED: Option<&'static str> = None;
    fn in_place<'de, A: MapAccess<'de>>(kind: &str, map: A) -> Result<Self, A::Error> {
        part_of_kind(kind, map)
    }
    fn buffered<E: serde::de::Error>(kind: String, map: Map<String, Value>) -> Result<Self, E> {
        buffered_part(kind, map)
    }
}

#[derive(Deserialize)]
struct TextPart {
    #[serde(deserialize_with = "crate::raw::text")]
    text: String,
    #[serde(default)]
    prompt_cache_breakpoint: Option<Value>,
}

#[derive(Deserialize)]
struct OutputTextPart {
    #[serde(deserialize_with = "crate::raw::text")]
    text: String,
    #[serde(default)]
    annotations: Vec<Value>,
}

#[derive(Deserialize)]
struct RefusalPart {
    refusal: String,
}

/// A part of type `kind` read from the rest of `map` (its `type` taken).
fn part_of_kind<'de, A: MapAccess<'de>>(kind: &str, map: A) -> Result<ContentPart, A::Error> {
    Ok(match kind {
        "input_text" => {
            let part = typed_in_place::<TextPart, A>(map)?;
            ContentPart::InputText {
                text: part.text,
                prompt_cache_breakpoint: part.prompt_cache_breakpoint,
            }
        }
        "output_text" => {
            let part: OutputTextPart = typed_in_place(map)?;
            ContentPart::OutputText {
                text: part.text,
                annotations: part.annotations,
            }
        }
        "refusal" => ContentPart::Refusal {
            refusal: typed_in_place::<RefusalPart, A>(map)?.refusal,
        },
        _ => ContentPart::Other(with_type(kind, map)?),
    })
}

/// A part read from its buffered object (`type` taken).
fn buffered_part<E: serde::de::Error>(
    kind: String,
    mut map: Map<String, Value>,
) -> Result<ContentPart, E> {
    Ok(match kind.as_str() {
        "input_text" => {
            let part = typed::<TextPart, E>(map)?;
            ContentPart::InputText {
                text: part.text,
                prompt_cache_breakpoint: part.prompt_cache_breakpoint,
            }
        }
        "output_text" => {
            let part: OutputTextPart = typed(map)?;
            ContentPart::OutputText {
                text: part.text,
                annotations: part.annotations,
            }
        }
        "refusal" => ContentPart::Refusal {
            refusal: typed::<RefusalPart, E>(map)?.refusal,
        },
        _ => {
            map.insert("type".to_owned(), Value::String(kind));
            ContentPart::Other(map)
        }
    })
}

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TypedVisitor::<Self>(PhantomData))
    }
}

impl ByType for Tool {
    const EXPECTING: &'static str = "a tool object";
    const UNTYPED: Option<&'static str> = None;
    fn in_place<'de, A: MapAccess<'de>>(kind: &str, map: A) -> Result<Self, A::Error> {
        Ok(match kind {
            "function" => Tool::Function(fields::function_tool(map)?),
            "custom" => Tool::Custom(fields::custom_tool(map)?),
            "namespace" => Tool::Namespace(fields::namespace_tool(map)?),
            other => Tool::Other(with_type(other, map)?),
        })
    }
    fn buffered<E: serde::de::Error>(kind: String, map: Map<String, Value>) -> Result<Self, E> {
        buffered_tool(kind, map)
    }
}

/// A tool read from its buffered object (`type` taken).
fn buffered_tool<E: serde::de::Error>(
    kind: String,
    mut map: Map<String, Value>,
) -> Result<Tool, E> {
    Ok(match kind.as_str() {
        "function" => Tool::Function(typed(map)?),
        "custom" => Tool::Custom(typed(map)?),
        "namespace" => Tool::Namespace(typed(map)?),
        _ => {
            map.insert("type".to_owned(), Value::String(kind));
            Tool::Other(map)
        }
    })
}

/// An object of an unknown `kind`, whole: `type` first, then the rest of `map` in order.
fn with_type<'de, A: MapAccess<'de>>(kind: &str, map: A) -> Result<Map<String, Value>, A::Error> {
    let mut object = Map::new();
    object.insert("type".to_owned(), Value::String(kind.to_owned()));
    let rest = rest_of(None, map)?;
    object.extend(rest);
    Ok(object)
}

/// Removes and returns the `type` key of an object, which must be a string when present.
fn take_type<E: serde::de::Error>(map: &mut Map<String, Value>) -> Result<Option<String>, E> {
    match map.remove("type") {
        None => Ok(None),
        Some(Value::String(kind)) => Ok(Some(kind)),
        Some(other) => Err(E::custom(format_args!(
            "at `type`: invalid type: {}, expected a string",
            describe(&other)
        ))),
    }
}

/// Deserialises a typed struct from an object whose `type` key was already taken. The error
/// carries the path inside the object (see the module docs), which the caller's path tracking
/// cannot see.
fn typed<T: DeserializeOwned, E: serde::de::Error>(map: Map<String, Value>) -> Result<T, E> {
    let value = Value::Object(map);
    // A plain parse first; the path-tracking one only to explain a failure.
    if let Ok(parsed) = T::deserialize(&value) {
        return Ok(parsed);
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let (deeper, message) = split_path(&inner);
        let deeper = deeper.map(str::to_owned).or_else(|| missing_field(message));
        match join_path(&path, deeper.as_deref()) {
            Some(path) => E::custom(format_args!("at `{path}`: {message}")),
            None => E::custom(message),
        }
    })
}

#[cfg(test)]
mod tests;
