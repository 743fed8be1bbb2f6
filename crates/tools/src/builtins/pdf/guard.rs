//! The PDF decompression guard: lopdf's load filter measures what every stream decodes to
//! (Flate, LZW, ASCII85) against the per-stream and per-document caps and empties a stream past
//! them, so a decompression bomb costs at most the caps. Text extraction is the parent's job.

use std::borrow::Cow;
use std::cell::Cell;
use std::io::{self, Read, Write};

use pdf_extract::{Dictionary, Document, LoadOptions, Object, ObjectId, Stream};

use super::{MAX_DECODED_BYTES, MAX_STREAM_BYTES, malformed};
use crate::ToolError;

thread_local! {
    /// Bytes decoded so far by the load filter on this thread, and whether a cap was hit.
    static DECODE_BUDGET: Cell<(usize, bool)> = const { Cell::new((0, false)) };
}

/// Loads the document with the stream-measuring filter; fails when a stream was over a cap.
pub(super) fn load_guarded(bytes: &[u8]) -> Result<Document, ToolError> {
    DECODE_BUDGET.with(|b| b.set((0, false)));
    let loaded = Document::load_mem_with_options(bytes, LoadOptions::with_filter(measure_stream));
    let (_, exceeded) = DECODE_BUDGET.with(Cell::get);
    if exceeded {
        return Err(ToolError::LimitExceeded(format!(
            "a stream decompresses to more than {MAX_STREAM_BYTES} bytes, or all streams to more than {MAX_DECODED_BYTES}"
        )));
    }
    loaded.map_err(malformed)
}

/// The lopdf load filter: measures each stream's decoded size and empties those over the caps.
fn measure_stream(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    if let Object::Stream(stream) = object {
        let (used, exceeded) = DECODE_BUDGET.with(Cell::get);
        let cap = MAX_STREAM_BYTES.min(MAX_DECODED_BYTES.saturating_sub(used));
        match decoded_len(stream, cap) {
            Some(len) => DECODE_BUDGET.with(|b| b.set((used + len, exceeded))),
            None => {
                DECODE_BUDGET.with(|b| b.set((used, true)));
                stream.set_plain_content(Vec::new());
            }
        }
    }
    Some((id, object.clone()))
}

/// The size a stream decodes to through the filters lopdf applies, or `None` past `cap`.
fn decoded_len(stream: &Stream, cap: usize) -> Option<usize> {
    let Ok(filters) = stream.filters() else {
        return Some(stream.content.len());
    };
    let params = stream
        .dict
        .get(b"DecodeParms")
        .and_then(Object::as_dict)
        .ok();
    let mut data: Cow<'_, [u8]> = Cow::Borrowed(&stream.content);
    for filter in filters {
        data = Cow::Owned(match filter {
            b"FlateDecode" => inflate_capped(&data, cap)?,
            b"LZWDecode" => lzw_capped(&data, params, cap)?,
            b"ASCII85Decode" => {
                // At most four bytes per input character (`z`): bounded by its input.
                let mut dict = Dictionary::new();
                dict.set("Filter", Object::Name(b"ASCII85Decode".to_vec()));
                let decoded = Stream::new(dict, data.into_owned())
                    .decompressed_content()
                    .unwrap_or_default();
                if decoded.len() > cap {
                    return None;
                }
                decoded
            }
            // lopdf decodes nothing else; pdf-extract then uses the raw bytes.
            _ => break,
        });
    }
    Some(data.len())
}

/// A writer that keeps at most `cap` bytes and fails past them.
struct Capped {
    bytes: Vec<u8>,
    cap: usize,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes.len() + buf.len() > self.cap {
            return Err(io::Error::other("cap"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Inflates like lopdf (zlib, then raw deflate after the two header bytes when zlib fails),
/// keeping at most `cap` bytes.
fn inflate_capped(input: &[u8], cap: usize) -> Option<Vec<u8>> {
    fn read(reader: impl Read, cap: usize) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let ok = reader.take(cap as u64 + 1).read_to_end(&mut out).is_ok();
        (out, ok)
    }
    if input.is_empty() {
        return Some(Vec::new());
    }
    let (mut out, ok) = read(flate2::read::ZlibDecoder::new(input), cap);
    if !ok && input.len() > 2 {
        let (raw, _) = read(flate2::read::DeflateDecoder::new(&input[2..]), cap);
        if raw.len() > out.len() {
            out = raw;
        }
    }
    (out.len() <= cap).then_some(out)
}

/// Decodes LZW like lopdf (`EarlyChange` defaults to on), keeping at most `cap` bytes.
fn lzw_capped(input: &[u8], params: Option<&Dictionary>, cap: usize) -> Option<Vec<u8>> {
    use weezl::{BitOrder, decode::Decoder};
    let early_change = params
        .and_then(|p| p.get(b"EarlyChange").ok())
        .and_then(|p| p.as_i64().ok())
        .is_none_or(|v| v != 0);
    let mut decoder = if early_change {
        Decoder::with_tiff_size_switch(BitOrder::Msb, 8)
    } else {
        Decoder::new(BitOrder::Msb, 8)
    };
    let mut sink = Capped {
        bytes: Vec::new(),
        cap,
    };
    let result = decoder.into_stream(&mut sink).decode_all(input);
    match result.status {
        Err(e) if e.to_string() == "cap" => None,
        _ => Some(sink.bytes),
    }
}
