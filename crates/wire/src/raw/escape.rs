//! The fast escaper: a text as a JSON string literal, escaped exactly as serde_json escapes,
//! scanned eight bytes at a time (a long text is mostly bytes that need no escape).
//!
//! Not here: when a text is long enough to go this way, and the cache of recent literals
//! (the parent, `literals`).

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
