//! [`ResponseText`]: a response object serialised once, with what its record needs of it —
//! the columns and where each output item's text lies — noted while the text is written.
//!
//! [`crate::ResponseRecord::from_json`] finds the same things by reading the text back: one
//! scan of the whole body for its top-level fields, one of the `output` array for its items and
//! one of each item for its `id`. For a response the gateway serialises itself that reading
//! back was a fifth of a short stored request's instructions (about 28 K of 130 K, counted with
//! `scripts/bench-instructions`). Here a serde_json formatter (`notes`) watches the serialiser's
//! output go by: it knows the depth, reads each top-level key and each output item's keys as
//! they are written, keeps the string or integer values of the columns, and notes the byte
//! offsets where each `output` element starts and ends (the writer publishes its length when
//! the formatter flushes it).
//!
//! What is noted reads exactly as `from_json` reads it: a column that is not a string (an
//! integer for `created_at`) is absent; an `output` that is not an array has no items; an item
//! that is not an object, or whose `id` is not a string, has no id. Anything the formatter
//! does not follow — a key written twice, a top level that is not an object — leaves the
//! outline unnoted, and the record then reads the text back as `from_json` does: the outcome,
//! an error included, is the same either way.

use std::cell::Cell;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

mod notes;

use notes::Notes;

/// A response object's JSON text, and its record's outline when it was noted while writing.
#[derive(Debug, Clone)]
pub struct ResponseText {
    text: Arc<str>,
    outline: Option<Outline>,
}

/// What a record takes from a response's text.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Outline {
    pub(crate) id: Option<String>,
    pub(crate) created_at: Option<i64>,
    pub(crate) status: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) previous_response_id: Option<String>,
    /// Each output item's text, as a range of the text, and its `id`.
    pub(crate) output: Vec<(Range<usize>, Option<String>)>,
}

impl ResponseText {
    /// `value` serialised as compact JSON (the same bytes as `serde_json::to_string`); with
    /// `note`, its record's outline is noted on the way (a response that will not be stored
    /// does not pay for it). A value serde_json cannot serialise (a map with non-string keys)
    /// gives an empty text, as the gateway's `to_string(..).unwrap_or_default()` did.
    pub fn serialize<T: Serialize + ?Sized>(value: &T, note: bool) -> Self {
        if !note {
            let text = serde_json::to_string(value).unwrap_or_default();
            return Self::from(text);
        }
        let length = Cell::new(0);
        let mut out = Tracked {
            bytes: Vec::with_capacity(1024),
            length: &length,
        };
        let mut notes = Notes::new(&length);
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, &mut notes);
        if value.serialize(&mut serializer).is_err() {
            return Self::from(String::new());
        }
        let outline = notes.finish();
        // serde_json writes only valid UTF-8; the check cannot fail.
        let text = String::from_utf8(out.bytes).unwrap_or_default();
        Self {
            text: text.into(),
            outline,
        }
    }

    /// The JSON text.
    pub fn text(&self) -> &Arc<str> {
        &self.text
    }

    /// Whether the record's outline was noted while the text was written (a record made from
    /// it does not read the text again).
    pub fn noted(&self) -> bool {
        self.outline.is_some()
    }

    /// The text and the outline, when noted.
    pub(crate) fn into_parts(self) -> (Arc<str>, Option<Outline>) {
        (self.text, self.outline)
    }
}

impl From<Arc<str>> for ResponseText {
    /// Text serialised elsewhere (a native Responses upstream's): its record reads it back.
    fn from(text: Arc<str>) -> Self {
        Self {
            text,
            outline: None,
        }
    }
}

impl From<String> for ResponseText {
    fn from(text: String) -> Self {
        Self::from(Arc::<str>::from(text))
    }
}

/// The output buffer. The formatter sees the writer only as `io::Write`, so it learns the
/// length written so far by flushing: `flush` publishes the length (there is nothing else to
/// flush, and serde_json's serialiser never flushes by itself). Writes stay plain appends.
struct Tracked<'a> {
    bytes: Vec<u8>,
    length: &'a Cell<usize>,
}

impl io::Write for Tracked<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.bytes.extend_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.length.set(self.bytes.len());
        Ok(())
    }
}

#[cfg(test)]
mod tests;
