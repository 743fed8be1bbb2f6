//! The formatter that notes a response's outline while serde_json writes it: compact JSON out,
//! and on the way the columns' values and the byte range of each `output` item.
//!
//! Not here: the text and its outline as the record takes them ([`super::ResponseText`]).

use std::cell::Cell;
use std::io;

use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

use super::Outline;

/// A top-level field a column comes from, or `output`; an item's `id`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Key {
    Id,
    CreatedAt,
    Status,
    Model,
    PreviousResponseId,
    Output,
    ItemId,
}

impl Key {
    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The formatter: compact JSON, and the notes.
pub(super) struct Notes<'a> {
    length: &'a Cell<usize>,
    /// Containers open around the next token: 0 outside the response, 1 inside it, 2 inside
    /// a top-level field's array or object, 3 inside an output item.
    depth: usize,
    /// Set when something was not followed: the record reads the text back.
    lost: bool,
    /// The top-level object has been opened (a second top-level value is not followed).
    opened: bool,
    /// A key being read (at the top level, or in an output item), and its text so far.
    reading_key: bool,
    key: String,
    /// The field whose value comes next, when it is one the outline wants.
    wanted: Option<Key>,
    /// The string value being read for `wanted`.
    value: Option<String>,
    /// Keys seen at the top level, and in the current output item (bits of [`Key`]).
    seen: u8,
    seen_in_item: u8,
    /// The `output` array is open (depth 2 is its elements).
    in_output: bool,
    /// The current output item is an object (its keys are read).
    item_is_object: bool,
    item_start: usize,
    item_id: Option<String>,
    outline: Outline,
}

impl<'a> Notes<'a> {
    pub(super) fn new(length: &'a Cell<usize>) -> Self {
        Self {
            length,
            depth: 0,
            lost: false,
            opened: false,
            reading_key: false,
            key: String::new(),
            wanted: None,
            value: None,
            seen: 0,
            seen_in_item: 0,
            in_output: false,
            item_is_object: false,
            item_start: 0,
            item_id: None,
            outline: Outline::default(),
        }
    }

    pub(super) fn finish(self) -> Option<Outline> {
        (!self.lost && self.opened && self.depth == 0).then_some(self.outline)
    }

    /// Whether keys at the current depth are read: the response's own, or an output item's.
    #[inline]
    fn keys_here(&self) -> bool {
        self.depth == 1 || (self.depth == 3 && self.in_output && self.item_is_object)
    }

    /// A container opens: the value of a wanted key is then not a string or integer (absent).
    #[inline]
    fn open(&mut self, object: bool) {
        if self.depth == 0 {
            if self.opened || !object {
                self.lost = true;
            }
            self.opened = true;
        } else if self.depth == 1 && self.wanted == Some(Key::Output) && !object {
            self.in_output = true;
        } else if self.depth == 2 && self.in_output {
            self.item_is_object = object;
        }
        self.wanted = None;
        self.depth += 1;
    }

    #[inline]
    fn close(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 1 && self.in_output {
            self.in_output = false;
        }
    }

    /// A scalar that is not a string: the wanted field, if any, reads as absent unless it is
    /// `created_at` and the scalar an integer (`integer`).
    #[inline]
    fn scalar(&mut self, integer: Option<i64>) {
        if let Some(Key::CreatedAt) = self.wanted {
            self.outline.created_at = integer;
        }
        self.wanted = None;
    }

    /// A string fragment, for the key or the value being read.
    #[inline]
    fn text(&mut self, fragment: &str) {
        if self.reading_key {
            self.key.push_str(fragment);
        } else if let Some(value) = &mut self.value {
            value.push_str(fragment);
        }
    }

    fn key_done(&mut self) {
        self.reading_key = false;
        let key = match (self.depth, self.key.as_str()) {
            (1, "id") => Key::Id,
            (1, "created_at") => Key::CreatedAt,
            (1, "status") => Key::Status,
            (1, "model") => Key::Model,
            (1, "previous_response_id") => Key::PreviousResponseId,
            (1, "output") => Key::Output,
            (3, "id") => Key::ItemId,
            _ => {
                self.wanted = None;
                return;
            }
        };
        let seen = if key == Key::ItemId {
            &mut self.seen_in_item
        } else {
            &mut self.seen
        };
        if *seen & key.bit() != 0 {
            // A key written twice: `from_json` decides what that means.
            self.lost = true;
        }
        *seen |= key.bit();
        self.wanted = Some(key);
    }

    fn string_done(&mut self) {
        let Some(value) = self.value.take() else {
            return;
        };
        match self.wanted.take() {
            Some(Key::Id) => self.outline.id = Some(value),
            Some(Key::Status) => self.outline.status = Some(value),
            Some(Key::Model) => self.outline.model = Some(value),
            Some(Key::PreviousResponseId) => self.outline.previous_response_id = Some(value),
            Some(Key::ItemId) => self.item_id = Some(value),
            _ => {}
        }
    }
}

impl Formatter for &mut Notes<'_> {
    #[inline]
    fn write_null<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.scalar(None);
        CompactFormatter.write_null(w)
    }

    #[inline]
    fn write_bool<W: ?Sized + io::Write>(&mut self, w: &mut W, value: bool) -> io::Result<()> {
        self.scalar(None);
        CompactFormatter.write_bool(w, value)
    }

    #[inline]
    fn write_i8<W: ?Sized + io::Write>(&mut self, w: &mut W, value: i8) -> io::Result<()> {
        self.scalar(Some(i64::from(value)));
        CompactFormatter.write_i8(w, value)
    }

    #[inline]
    fn write_i16<W: ?Sized + io::Write>(&mut self, w: &mut W, value: i16) -> io::Result<()> {
        self.scalar(Some(i64::from(value)));
        CompactFormatter.write_i16(w, value)
    }

    #[inline]
    fn write_i32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: i32) -> io::Result<()> {
        self.scalar(Some(i64::from(value)));
        CompactFormatter.write_i32(w, value)
    }

    #[inline]
    fn write_i64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: i64) -> io::Result<()> {
        self.scalar(Some(value));
        CompactFormatter.write_i64(w, value)
    }

    #[inline]
    fn write_i128<W: ?Sized + io::Write>(&mut self, w: &mut W, value: i128) -> io::Result<()> {
        self.scalar(i64::try_from(value).ok());
        CompactFormatter.write_i128(w, value)
    }

    #[inline]
    fn write_u8<W: ?Sized + io::Write>(&mut self, w: &mut W, value: u8) -> io::Result<()> {
        self.scalar(Some(i64::from(value)));
        CompactFormatter.write_u8(w, value)
    }

    #[inline]
    fn write_u16<W: ?Sized + io::Write>(&mut self, w: &mut W, value: u16) -> io::Result<()> {
        self.scalar(Some(i64::from(value)));
        CompactFormatter.write_u16(w, value)
    }

    #[inline]
    fn write_u32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: u32) -> io::Result<()> {
        self.scalar(Some(i64::from(value)));
        CompactFormatter.write_u32(w, value)
    }

    #[inline]
    fn write_u64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: u64) -> io::Result<()> {
        self.scalar(i64::try_from(value).ok());
        CompactFormatter.write_u64(w, value)
    }

    #[inline]
    fn write_u128<W: ?Sized + io::Write>(&mut self, w: &mut W, value: u128) -> io::Result<()> {
        self.scalar(i64::try_from(value).ok());
        CompactFormatter.write_u128(w, value)
    }

    #[inline]
    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        self.scalar(None);
        CompactFormatter.write_f32(w, value)
    }

    #[inline]
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        self.scalar(None);
        CompactFormatter.write_f64(w, value)
    }

    #[inline]
    fn write_number_str<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        value: &str,
    ) -> io::Result<()> {
        // An arbitrary-precision number: an integer column reads it as `from_json` would.
        self.scalar(value.parse().ok());
        CompactFormatter.write_number_str(w, value)
    }

    #[inline]
    fn begin_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if !self.reading_key {
            self.value = match self.wanted {
                Some(Key::CreatedAt | Key::Output) | None => {
                    self.wanted = None;
                    None
                }
                Some(_) => Some(String::new()),
            };
        }
        CompactFormatter.begin_string(w)
    }

    #[inline]
    fn end_string<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if !self.reading_key {
            self.string_done();
        }
        CompactFormatter.end_string(w)
    }

    #[inline]
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        self.text(fragment);
        CompactFormatter.write_string_fragment(w, fragment)
    }

    #[inline]
    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        let ch = match escape {
            CharEscape::Quote => '"',
            CharEscape::ReverseSolidus => '\\',
            CharEscape::Solidus => '/',
            CharEscape::Backspace => '\u{8}',
            CharEscape::FormFeed => '\u{c}',
            CharEscape::LineFeed => '\n',
            CharEscape::CarriageReturn => '\r',
            CharEscape::Tab => '\t',
            CharEscape::AsciiControl(byte) => char::from(byte),
        };
        self.text(ch.encode_utf8(&mut [0; 4]));
        CompactFormatter.write_char_escape(w, escape)
    }

    #[inline]
    fn write_byte_array<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        value: &[u8],
    ) -> io::Result<()> {
        // Written as an array of numbers: not a column's value.
        self.open(false);
        self.close();
        CompactFormatter.write_byte_array(w, value)
    }

    #[inline]
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(false);
        CompactFormatter.begin_array(w)
    }

    #[inline]
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close();
        CompactFormatter.end_array(w)
    }

    #[inline]
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        CompactFormatter.begin_array_value(w, first)?;
        if self.depth == 2 && self.in_output {
            w.flush()?;
            self.item_start = self.length.get();
            self.item_is_object = false;
            self.item_id = None;
            self.seen_in_item = 0;
        }
        Ok(())
    }

    #[inline]
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        CompactFormatter.end_array_value(w)?;
        if self.depth == 2 && self.in_output {
            w.flush()?;
            let range = self.item_start..self.length.get();
            self.outline.output.push((range, self.item_id.take()));
        }
        Ok(())
    }

    #[inline]
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(true);
        CompactFormatter.begin_object(w)
    }

    #[inline]
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close();
        CompactFormatter.end_object(w)
    }

    #[inline]
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if self.keys_here() {
            self.reading_key = true;
            self.key.clear();
        }
        CompactFormatter.begin_object_key(w, first)
    }

    #[inline]
    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.reading_key {
            self.key_done();
        }
        CompactFormatter.end_object_key(w)
    }

    #[inline]
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        CompactFormatter.begin_object_value(w)
    }

    #[inline]
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.keys_here() {
            self.wanted = None;
        }
        CompactFormatter.end_object_value(w)
    }

    #[inline]
    fn write_raw_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // Raw JSON (a `RawValue`, a tool's schema say) is not followed inside: deep in a
        // field it changes nothing noted, but as the response, a wanted field's value or a
        // whole output item it is read back.
        if self.depth == 0 || self.wanted.is_some() || (self.depth == 2 && self.in_output) {
            self.lost = true;
        }
        self.wanted = None;
        CompactFormatter.write_raw_fragment(w, fragment)
    }
}
