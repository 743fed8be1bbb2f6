//! Large results kept once. An output item's `result` string of [`ONCE_BYTES`] or more (an
//! `image_generation_call`'s base64 image) is stored in the item's row only: the response
//! body column holds the item without it, marked with [`MARKER`], and every read that returns
//! the body ([`restore`]: a `GET`, a chain, a cancel) puts it back from the item row, which the
//! same tenant-filtered query read. The item rows themselves (input items, item references,
//! history) always hold the whole item.
//!
//! Not here: writing the rows (`responses`), the record's own text (`record`).

use serde_json::Value;

use crate::{StoreError, StoredResponse};

/// A `result` this long or longer is kept in its item row only.
pub(crate) const ONCE_BYTES: usize = 4096;

/// Set on a body's item whose `result` is in its row.
pub(crate) const MARKER: &str = "toolbridge_result_in_item";

/// The body to store for `body` (a response object as JSON text) when some output item's
/// `result` is kept in its row only; `None` when the body is stored as it is.
pub(crate) fn lift(body: &str) -> Result<Option<String>, StoreError> {
    // Most bodies cannot hold such a result: no parse for them.
    if body.len() < ONCE_BYTES || !body.contains("\"result\"") {
        return Ok(None);
    }
    let mut value: Value =
        serde_json::from_str(body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    if !lift_value(&mut value) {
        return Ok(None);
    }
    serde_json::to_string(&value)
        .map(Some)
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// [`lift`] on a response object: true when an item changed.
pub(crate) fn lift_value(response: &mut Value) -> bool {
    let Some(output) = response.get_mut("output").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut lifted = false;
    for item in output.iter_mut().filter_map(Value::as_object_mut) {
        let large = item
            .get("result")
            .and_then(Value::as_str)
            .is_some_and(|r| r.len() >= ONCE_BYTES);
        if large {
            item.remove("result");
            item.insert(MARKER.to_owned(), Value::Bool(true));
            lifted = true;
        }
    }
    lifted
}

/// Puts each lifted `result` back into the response body, from the output item of the same id
/// (else of the same position); a result whose row is gone is `null`.
pub(crate) fn restore(response: &mut StoredResponse) {
    let rows = &response.output_items;
    let Some(output) = response
        .response
        .get_mut("output")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for (position, item) in output.iter_mut().enumerate() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        if item.remove(MARKER).is_none() {
            continue;
        }
        let id = item.get("id").and_then(Value::as_str);
        let row = rows
            .iter()
            .find(|row| id.is_some() && row.get("id").and_then(Value::as_str) == id)
            .or_else(|| rows.get(position));
        let result = row
            .and_then(|row| row.get("result"))
            .cloned()
            .unwrap_or(Value::Null);
        item.insert("result".to_owned(), result);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_large_result_leaves_the_body_and_comes_back_from_its_row() {
        let image = "A".repeat(ONCE_BYTES);
        let response = json!({"id": "resp_1", "output": [
            {"id": "ig_1", "type": "image_generation_call", "result": image},
            {"id": "ig_2", "type": "image_generation_call", "result": "small"},
        ]});
        let text = response.to_string();
        let stored = lift(&text).unwrap().unwrap();
        assert!(
            !stored.contains(&image) && stored.contains(MARKER),
            "{stored}"
        );
        let mut back = StoredResponse {
            id: "resp_1".into(),
            created_at: 0,
            status: "completed".into(),
            model: "m".into(),
            previous_response_id: None,
            expires_at: None,
            response: serde_json::from_str(&stored).unwrap(),
            input_items: Vec::new(),
            output_items: response["output"].as_array().unwrap().clone(),
        };
        restore(&mut back);
        assert_eq!(back.response, response);
        assert_eq!(lift(&json!({"output": []}).to_string()).unwrap(), None);
    }
}
