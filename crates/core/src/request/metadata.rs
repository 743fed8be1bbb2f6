//! `metadata` within OpenAI's bounds: at most 16 keys, a key at most 64 characters, a value at
//! most 512. The gateway stores metadata with a response or a conversation and returns it on
//! every read, so an unbounded map (10 000 keys were once stored) is a cost every later reader
//! pays. OpenAI's values are strings; another JSON value is still taken, bounded by the length
//! of its JSON text.
//!
//! Not here: where metadata is read (the Responses body, `POST /v1/conversations`).

use serde_json::{Map, Value};

use crate::Error;

/// The most keys a `metadata` map may have.
pub const MAX_KEYS: usize = 16;
/// The most characters in a `metadata` key.
pub const MAX_KEY_CHARS: usize = 64;
/// The most characters in a `metadata` value (a string's, or another value's JSON text).
pub const MAX_VALUE_CHARS: usize = 512;

/// Refuses `metadata` past OpenAI's bounds, naming `metadata` (and the key at fault).
pub fn check_metadata(metadata: &Map<String, Value>) -> Result<(), Error> {
    if metadata.len() > MAX_KEYS {
        return Err(Error::invalid(
            "metadata",
            format!(
                "at most {MAX_KEYS} keys are allowed, {} were given",
                metadata.len()
            ),
        ));
    }
    for (key, value) in metadata {
        let chars = key.chars().count();
        if chars > MAX_KEY_CHARS {
            let shown: String = key.chars().take(MAX_KEY_CHARS).collect();
            return Err(Error::invalid(
                "metadata",
                format!(
                    "the key `{shown}…` has {chars} characters; at most {MAX_KEY_CHARS} are allowed"
                ),
            ));
        }
        let chars = match value {
            Value::String(text) => text.chars().count(),
            other => other.to_string().chars().count(),
        };
        if chars > MAX_VALUE_CHARS {
            return Err(Error::invalid(
                format!("metadata.{key}"),
                format!(
                    "the value of the key `{key}` has {chars} characters; at most {MAX_VALUE_CHARS} are allowed"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(value: Value) -> Result<(), Error> {
        check_metadata(value.as_object().unwrap())
    }

    #[test]
    fn metadata_within_the_bounds_passes_and_past_them_names_the_field() {
        let at_most: Map<String, Value> = (0..MAX_KEYS)
            .map(|i| (format!("{i:0>64}"), Value::String("v".repeat(512))))
            .collect();
        assert_eq!(check_metadata(&at_most), Ok(()));
        let mut over = at_most;
        over.insert("one more".to_owned(), json!("v"));
        let Err(Error::InvalidValue { param, message }) = check_metadata(&over) else {
            panic!("17 keys passed");
        };
        assert_eq!(param, "metadata");
        assert!(message.contains("at most 16 keys"), "{message}");

        let long_key = "k".repeat(65);
        let Err(Error::InvalidValue { param, message }) = check(json!({ long_key: "v" })) else {
            panic!("a 65-character key passed");
        };
        assert_eq!(param, "metadata");
        assert!(message.contains("65 characters"), "{message}");

        let Err(Error::InvalidValue { param, .. }) = check(json!({"k": "v".repeat(513)})) else {
            panic!("a 513-character value passed");
        };
        assert_eq!(param, "metadata.k");
        // Characters, not bytes.
        assert_eq!(check(json!({"k": "é".repeat(512)})), Ok(()));
        assert!(check(json!({"k": {"nested": "v".repeat(600)}})).is_err());
    }
}
