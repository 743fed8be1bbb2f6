//! [`ResponseRecord`]: a response as it is written, its JSON already text.
//!
//! The gateway serialises a final response once; that text is what the client is sent and
//! what the store keeps. The record reads the columns (`id`, `status`, …) from the text's
//! top-level fields and keeps its `output` items as slices of the same text, found in one
//! borrowed scan ([`RawValue`]): nothing is serialised again, nothing is copied, and the size
//! the gateway checks against its limit is a sum of lengths, not a serialisation to measure.
//!
//! Not here: the SQL that writes a record (`responses`) and the batching of writes (`writer`).

use std::ops::Range;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{ResponseText, StoreError, StoredResponse};

/// A response to write: its columns, the response object as JSON text, and its items as JSON
/// text. Build one with [`ResponseRecord::from_json`] (from the text the client is sent) or
/// [`ResponseRecord::from_stored`].
#[derive(Debug, Clone)]
#[cfg_attr(test, derive(PartialEq))]
pub struct ResponseRecord {
    pub(crate) id: String,
    pub(crate) created_at: i64,
    pub(crate) status: String,
    pub(crate) model: String,
    pub(crate) previous_response_id: Option<String>,
    pub(crate) expires_at: Option<i64>,
    /// The response object.
    pub(crate) body: Arc<str>,
    /// The body column's text when it differs from `body`: large output results are kept in
    /// their item rows only (`once`).
    pub(crate) stored_body: Option<Box<str>>,
    pub(crate) input_items: Vec<ItemText>,
    pub(crate) output_items: Vec<ItemText>,
}

/// One item's id and JSON text.
#[derive(Debug, Clone)]
#[cfg_attr(test, derive(PartialEq))]
pub(crate) struct ItemText {
    pub(crate) id: Option<String>,
    text: Text,
}

/// Where an item's text is: its own, or a slice of the response body.
#[derive(Debug, Clone)]
#[cfg_attr(test, derive(PartialEq))]
enum Text {
    Own(Box<str>),
    InBody(Range<usize>),
}

/// The top-level fields the columns come from, each kept as raw text and read leniently (a
/// field of another type reads as absent, as it did when it was a `Value`); every other field
/// is skipped unread.
#[derive(Deserialize)]
struct Outline<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    created_at: Option<&'a RawValue>,
    #[serde(borrow, default)]
    status: Option<&'a RawValue>,
    #[serde(borrow, default)]
    model: Option<&'a RawValue>,
    #[serde(borrow, default)]
    previous_response_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    output: Option<&'a RawValue>,
}

/// An item's `id`.
#[derive(Deserialize)]
struct ItemOutline<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
}

/// A raw field as a string, when it is one.
fn string(raw: Option<&RawValue>) -> Option<String> {
    raw.and_then(|raw| serde_json::from_str(raw.get()).ok())
}

fn corrupt(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

impl ResponseRecord {
    /// The record of a response object given as JSON text (the gateway's own serialisation, or
    /// a native Responses upstream's): the columns are its top-level `id`, `created_at`,
    /// `status`, `model` and `previous_response_id` (absent ones empty), its output items the
    /// elements of its `output` array, kept as slices of `body`. `input_items` are this turn's
    /// input items. Text that is not a JSON object is [`StoreError::Corrupt`].
    pub fn from_json(
        body: impl Into<Arc<str>>,
        input_items: &[Value],
        expires_at: Option<i64>,
    ) -> Result<Self, StoreError> {
        let body: Arc<str> = body.into();
        // A derived struct would also take an array, field by field.
        if !body.trim_start().starts_with("{") {
            return Err(StoreError::Corrupt(
                "the response is not a JSON object".to_owned(),
            ));
        }
        let outline: Outline<'_> = serde_json::from_str(&body).map_err(corrupt)?;
        let output_items = slices(&body, outline.output);
        let record = Self {
            id: string(outline.id).unwrap_or_default(),
            created_at: outline
                .created_at
                .and_then(|raw| serde_json::from_str(raw.get()).ok())
                .unwrap_or_default(),
            status: string(outline.status).unwrap_or_default(),
            model: string(outline.model).unwrap_or_default(),
            previous_response_id: string(outline.previous_response_id),
            expires_at,
            input_items: input_items.iter().map(own_item).collect::<Result<_, _>>()?,
            output_items,
            stored_body: crate::once::lift(&body)?.map(Into::into),
            body: Arc::clone(&body),
        };
        Ok(record)
    }

    /// The record of a response serialised by [`ResponseText::serialize`]: when its outline
    /// was noted while it was written, the columns and output slices are taken from it and the
    /// text is not read again; otherwise as [`Self::from_json`]. The record is the same either
    /// way.
    pub fn from_text(
        text: ResponseText,
        input_items: &[Value],
        expires_at: Option<i64>,
    ) -> Result<Self, StoreError> {
        let (body, outline) = text.into_parts();
        let Some(outline) = outline else {
            return Self::from_json(body, input_items, expires_at);
        };
        Ok(Self {
            id: outline.id.unwrap_or_default(),
            created_at: outline.created_at.unwrap_or_default(),
            status: outline.status.unwrap_or_default(),
            model: outline.model.unwrap_or_default(),
            previous_response_id: outline.previous_response_id,
            expires_at,
            input_items: input_items.iter().map(own_item).collect::<Result<_, _>>()?,
            output_items: outline
                .output
                .into_iter()
                .map(|(range, id)| ItemText {
                    id,
                    text: Text::InBody(range),
                })
                .collect(),
            stored_body: crate::once::lift(&body)?.map(Into::into),
            body,
        })
    }

    /// The record of a [`StoredResponse`]: its body and each item serialised here.
    pub fn from_stored(response: &StoredResponse) -> Result<Self, StoreError> {
        let body = serde_json::to_string(&response.response).map_err(corrupt)?;
        let stored_body = crate::once::lift(&body)?.map(Into::into);
        Ok(Self {
            stored_body,
            id: response.id.clone(),
            created_at: response.created_at,
            status: response.status.clone(),
            model: response.model.clone(),
            previous_response_id: response.previous_response_id.clone(),
            expires_at: response.expires_at,
            body: body.into(),
            input_items: response
                .input_items
                .iter()
                .map(own_item)
                .collect::<Result<_, _>>()?,
            output_items: response
                .output_items
                .iter()
                .map(own_item)
                .collect::<Result<_, _>>()?,
        })
    }

    /// The response's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The response object's JSON text, as it is stored (and as the gateway sends it).
    pub fn body(&self) -> &Arc<str> {
        &self.body
    }

    /// The body column's text: the body, less the results its item rows keep.
    pub(crate) fn stored_body(&self) -> &str {
        self.stored_body.as_deref().unwrap_or(&self.body)
    }

    /// The bytes of JSON text this record stores: the body column and every item's text.
    pub fn size(&self) -> usize {
        self.stored_body().len()
            + self
                .input_items
                .iter()
                .chain(&self.output_items)
                .map(|item| self.text(item).len())
                .sum::<usize>()
    }

    /// Every item's JSON text, input items then output items, in order: what a chain read
    /// back gives for this response.
    pub fn item_texts(&self) -> impl Iterator<Item = &str> {
        self.input_items
            .iter()
            .chain(&self.output_items)
            .map(|item| self.text(item))
    }

    /// An item's JSON text.
    pub(crate) fn text<'a>(&'a self, item: &'a ItemText) -> &'a str {
        match &item.text {
            Text::Own(text) => text,
            Text::InBody(range) => self.body.get(range.clone()).unwrap_or("null"),
        }
    }

    /// Every item as (`input` or `output`, position, item id, JSON text), in order.
    pub(crate) fn items(&self) -> impl Iterator<Item = (&'static str, i64, Option<&str>, &str)> {
        [("input", &self.input_items), ("output", &self.output_items)]
            .into_iter()
            .flat_map(move |(kind, items)| {
                items.iter().enumerate().map(move |(position, item)| {
                    (
                        kind,
                        i64::try_from(position).unwrap_or(i64::MAX),
                        item.id.as_deref(),
                        self.text(item),
                    )
                })
            })
    }
}

/// The items of an `output` array read from `body`, as slices of it.
fn slices(body: &str, output: Option<&RawValue>) -> Vec<ItemText> {
    let base = body.as_ptr() as usize;
    let output: Vec<&RawValue> = output
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or_default();
    output
        .into_iter()
        .map(|raw| {
            let text = raw.get();
            // The raw value borrows from `body`: its offset is where its text starts.
            let start = (text.as_ptr() as usize).saturating_sub(base);
            ItemText {
                id: item_id(text),
                text: Text::InBody(start..start + text.len()),
            }
        })
        .collect()
}

fn own_item(item: &Value) -> Result<ItemText, StoreError> {
    Ok(ItemText {
        id: item.get("id").and_then(Value::as_str).map(str::to_owned),
        text: Text::Own(serde_json::to_string(item).map_err(corrupt)?.into()),
    })
}

/// The `id` of an item given as JSON text (valid JSON: it was scanned with the body); an item
/// that is not an object, or whose `id` is not a string, has none.
fn item_id(text: &str) -> Option<String> {
    if !text.starts_with('{') {
        return None;
    }
    let outline: ItemOutline<'_> = serde_json::from_str(text).ok()?;
    string(outline.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn output_items_are_slices_of_the_body_and_columns_its_fields() {
        let response = json!({
            "id": "resp_1", "created_at": 7, "status": "completed", "model": "m\"x",
            "previous_response_id": null, "unknown": {"output": "not this one"},
            "output": [{"id": "msg_1", "type": "message", "text": "a\nb"}, 3, {"id": 4}],
        });
        let text = serde_json::to_string(&response).unwrap();
        let record =
            ResponseRecord::from_json(text.clone(), &[json!({"id": "in_1"})], Some(9)).unwrap();
        assert_eq!(
            (record.id(), record.created_at, record.status.as_str()),
            ("resp_1", 7, "completed")
        );
        assert_eq!(record.model, "m\"x");
        assert_eq!(record.previous_response_id, None);
        let items: Vec<_> = record.items().collect();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0], ("input", 0, Some("in_1"), r#"{"id":"in_1"}"#));
        assert_eq!(items[1].2, Some("msg_1"));
        assert_eq!(
            serde_json::from_str::<Value>(items[1].3).unwrap(),
            response["output"][0]
        );
        assert_eq!(items[2], ("output", 1, None, "3"));
        assert_eq!(items[3].2, None);
        assert_eq!(
            record.size(),
            text.len() + items.iter().map(|i| i.3.len()).sum::<usize>()
        );
    }

    #[test]
    fn text_that_is_not_an_object_is_corrupt_and_odd_fields_read_as_absent() {
        let odd =
            ResponseRecord::from_json(r#"{"id": 3, "created_at": "x", "output": {}}"#, &[], None)
                .unwrap();
        assert_eq!((odd.id(), odd.created_at, odd.items().count()), ("", 0, 0));
        for text in ["[1]", "{", "", "{\"id\": \"a\"} x"] {
            let e = ResponseRecord::from_json(text, &[], None).unwrap_err();
            assert_eq!(e.code(), "store_corrupt", "{text}");
        }
    }
}
