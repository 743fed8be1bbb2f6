//! Objects read field by field, straight from the JSON text, with their unknown keys kept in
//! `extra`: the request itself, a message item, a tool, and a Chat answer (whole or a stream
//! chunk). A derived `Deserialize` with
//! `#[serde(flatten)]` would first buffer the whole object (for the request: every input item
//! and tool) into serde's intermediate form and read it a second time; the caller's path tracking
//! would also stop at the object. Read here, every field is parsed once, in place, and an error
//! deep inside keeps its whole path (`input[3].content[1].text`).

use std::borrow::Cow;

use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::chat::{ChatAnswer, ChatUsage};
use crate::responses::{
    CreateResponse, CustomFormat, CustomTool, FunctionTool, MessageItem, NamespaceTool, Tool,
};

/// A key of a JSON object, borrowed from the text where it has no escapes.
pub(super) struct Key<'de>(pub(super) Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The body of a `visit_map` that reads the named fields of `$target` (each `Option<_>` or
/// defaulted, as the derive's `#[serde(default)]` reads them), refuses a named field given twice as
/// the derive does, and keeps every other key in `$target.extra`. `$first` is a key (and its
/// value still to read) a caller already took from `$map`. With `skip [..]` after the fields,
/// those keys are read and dropped instead of kept.
macro_rules! read_fields {
    ($map:ident, $target:ident, $first:expr, [$($field:ident),* $(,)?]) => {
        read_fields!($map, $target, $first, [$($field),*] skip [])
    };
    ($map:ident, $target:ident, $first:expr, [$($field:ident),* $(,)?] skip [$($skip:literal),*]) => {{
        let mut seen: u64 = 0;
        let mut next: Option<Key<'de>> = $first;
        if next.is_none() {
            next = $map.next_key::<Key<'de>>()?;
        }
        while let Some(Key(key)) = next.take() {
            let mut bit: u64 = 1;
            let mut known = false;
            $(
                if !known && key == stringify!($field) {
                    if seen & bit != 0 {
                        return Err(A::Error::duplicate_field(stringify!($field)));
                    }
                    seen |= bit;
                    $target.$field = $map.next_value()?;
                    known = true;
                }
                bit <<= 1;
            )*
            let _ = bit;
            let skipped: &[&str] = &[$($skip),*];
            if !known && skipped.contains(&key.as_ref()) {
                $map.next_value::<serde::de::IgnoredAny>()?;
                known = true;
            }
            if !known {
                let value: Value = $map.next_value()?;
                $target.extra.insert(key.into_owned(), value);
            }
            next = $map.next_key::<Key<'de>>()?;
        }
    }};
}

impl<'de> Deserialize<'de> for CreateResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RequestVisitor;
        impl<'de> Visitor<'de> for RequestVisitor {
            type Value = CreateResponse;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a request object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CreateResponse, A::Error> {
                let mut req = CreateResponse::default();
                read_fields!(
                    map,
                    req,
                    None,
                    [
                        model,
                        input,
                        instructions,
                        tools,
                        tool_choice,
                        parallel_tool_calls,
                        temperature,
                        top_p,
                        presence_penalty,
                        frequency_penalty,
                        top_logprobs,
                        max_output_tokens,
                        max_tool_calls,
                        stop,
                        user,
                        safety_identifier,
                        prompt_cache_key,
                        metadata,
                        store,
                        stream,
                        background,
                        text,
                        reasoning,
                        include,
                        truncation,
                        service_tier,
                        previous_response_id,
                    ]
                );
                Ok(req)
            }
        }
        deserializer.deserialize_map(RequestVisitor)
    }
}

/// A message item whose first key (`first`, its value not yet read) was already taken from `map`
/// by the item's reader. `role` and `content` are required, as the derive would have them.
pub(super) fn message_item<'de, A: MapAccess<'de>>(
    mut map: A,
    first: Option<Key<'de>>,
) -> Result<MessageItem, A::Error> {
    struct Fields {
        id: Option<String>,
        role: Option<String>,
        content: Option<crate::responses::MessageContent>,
        status: Option<String>,
        extra: Map<String, Value>,
    }
    let mut item = Fields {
        id: None,
        role: None,
        content: None,
        status: None,
        extra: Map::new(),
    };
    read_fields!(map, item, first, [id, role, content, status]);
    Ok(MessageItem {
        id: item.id,
        role: item.role.ok_or_else(|| A::Error::missing_field("role"))?,
        content: item
            .content
            .ok_or_else(|| A::Error::missing_field("content"))?,
        status: item.status,
        extra: item.extra,
    })
}

/// The fields a tool object may have, every one optional while it is read.
#[derive(Default)]
struct ToolFields {
    name: Option<String>,
    description: Option<String>,
    parameters: Option<crate::RawJson>,
    strict: Option<bool>,
    format: Option<CustomFormat>,
    tools: Option<Vec<Tool>>,
    extra: Map<String, Value>,
}

impl ToolFields {
    fn name<E: serde::de::Error>(&mut self) -> Result<String, E> {
        self.name.take().ok_or_else(|| E::missing_field("name"))
    }
}

/// A `function` tool from the rest of `map` (its `type` taken).
pub(super) fn function_tool<'de, A: MapAccess<'de>>(mut map: A) -> Result<FunctionTool, A::Error> {
    let mut tool = ToolFields::default();
    read_fields!(map, tool, None, [name, description, parameters, strict]);
    Ok(FunctionTool {
        name: tool.name()?,
        description: tool.description,
        parameters: tool.parameters,
        strict: tool.strict,
        extra: tool.extra,
    })
}

/// A `custom` tool from the rest of `map` (its `type` taken).
pub(super) fn custom_tool<'de, A: MapAccess<'de>>(mut map: A) -> Result<CustomTool, A::Error> {
    let mut tool = ToolFields::default();
    read_fields!(map, tool, None, [name, description, format]);
    Ok(CustomTool {
        name: tool.name()?,
        description: tool.description,
        format: tool.format,
        extra: tool.extra,
    })
}

/// A `namespace` tool from the rest of `map` (its `type` taken).
pub(super) fn namespace_tool<'de, A: MapAccess<'de>>(
    mut map: A,
) -> Result<NamespaceTool, A::Error> {
    let mut tool = ToolFields::default();
    read_fields!(map, tool, None, [name, description, tools]);
    Ok(NamespaceTool {
        name: tool.name()?,
        description: tool.description,
        tools: tool.tools.unwrap_or_default(),
        extra: tool.extra,
    })
}

/// The fields of a Chat answer, whole or a stream chunk: `choices` of `C` (`null` reads as none:
/// MiniMax sends `"choices": null` beside an error), the rest in `extra`.
struct ChatFields<C> {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<C>>,
    usage: Option<ChatUsage>,
    extra: Map<String, Value>,
}

impl<'de, C: Deserialize<'de>> ChatFields<C> {
    fn read<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut fields = Self {
            id: None,
            model: None,
            choices: None,
            usage: None,
            extra: Map::new(),
        };
        // What every OpenAI-style answer carries and nothing downstream reads: not kept, so a
        // stream's chunks do not each build a map of it.
        read_fields!(map, fields, None, [id, model, choices, usage] skip ["object", "created", "system_fingerprint"]);
        Ok(fields)
    }
}

/// Reads a Chat answer object through [`ChatFields`].
struct ChatVisitor<C>(std::marker::PhantomData<C>);

impl<'de, C: Deserialize<'de>> Visitor<'de> for ChatVisitor<C> {
    type Value = ChatAnswer<C>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a chat completion object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let fields = ChatFields::read(map)?;
        Ok(ChatAnswer {
            id: fields.id,
            model: fields.model,
            choices: fields.choices.unwrap_or_default(),
            usage: fields.usage,
            extra: fields.extra,
        })
    }
}

/// A Chat answer, whole or a stream chunk, read through `ChatVisitor`.
impl<'de, C: Deserialize<'de>> Deserialize<'de> for ChatAnswer<C> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ChatVisitor(std::marker::PhantomData))
    }
}
