//! Fuzz target: the gateway's SSE reading of an upstream body (`events`: the UTF-8 guard, then
//! `sse-stream`), with the body cut into pieces at arbitrary points (inside a UTF-8 sequence,
//! between a CR and its LF, inside a field name; sometimes every byte its own piece, and empty
//! pieces).
//!
//! Inputs: well-formed streams built from known events (`event`, `id`, `retry` and several
//! `data` lines, comments, unknown fields, every line ending, the `data:` value with and
//! without its space), some events holding bytes that are not UTF-8, and a last event left
//! unterminated; and soups of SSE fragments and stray bytes.
//!
//! Properties: no panic and no stream error; the same events and the same number of skip
//! reports whatever the cutting; for a well-formed stream, exactly its events (the
//! non-UTF-8 ones skipped and reported, up to the report cap; the unterminated last one
//! discarded, as the spec says).
//!
//! Long run: `TOOLBRIDGE_FUZZ_SECS=600 cargo test --workspace --lib chunks::fuzz --
//! --nocapture` (the seconds are per property).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use toolbridge_testkit::fuzz::json::Bytes as Shown;
use toolbridge_testkit::fuzz::{Target, check};

use super::*;

const TARGET: Target = Target {
    name: "sse",
    regressions: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/fuzz_sse.txt"
    ),
    cases: 256,
};

/// What the reader made of a body: its events, the skips it reported, its error if any.
#[derive(Debug, PartialEq)]
struct Read {
    events: Vec<sse_stream::Sse>,
    skips: usize,
    error: Option<String>,
}

fn read(pieces: Vec<Vec<u8>>) -> Read {
    futures::executor::block_on(async {
        let parts = pieces
            .into_iter()
            .map(|p| Ok::<_, StreamError>(Bytes::from(p)));
        let mut stream = events(futures::stream::iter(parts));
        let mut read = Read {
            events: Vec::new(),
            skips: 0,
            error: None,
        };
        while let Some(item) = stream.next().await {
            match item {
                Ok(Chunk::Event(e)) => read.events.push(e),
                Ok(Chunk::Skipped) => read.skips += 1,
                Err(e) => read.error = Some(e.to_string()),
            }
        }
        read
    })
}

/// `bytes` cut where `cuts` say (or byte by byte).
fn cut(bytes: &[u8], cuts: &[Index], byte_by_byte: bool) -> Vec<Vec<u8>> {
    if byte_by_byte {
        return bytes.iter().map(|b| vec![*b]).collect();
    }
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut pieces = Vec::with_capacity(at.len() + 1);
    let mut start = 0;
    for end in at {
        pieces.push(bytes[start..end].to_vec());
        start = end;
    }
    pieces.push(bytes[start..].to_vec());
    pieces
}

fn cuts() -> impl Strategy<Value = (Vec<Index>, bool)> {
    (
        prop::collection::vec(any::<Index>(), 0..12),
        prop::bool::weighted(0.1),
    )
}

/// Reads `bytes` whole and cut, and checks they agree and nothing failed.
fn same_whatever_the_cutting(
    bytes: &[u8],
    cuts: &[Index],
    byte_by_byte: bool,
) -> Result<Read, TestCaseError> {
    let whole = read(vec![bytes.to_vec()]);
    prop_assert_eq!(&whole.error, &None, "the stream failed");
    let pieces = cut(bytes, cuts, byte_by_byte);
    let split = read(pieces);
    prop_assert_eq!(&split, &whole, "cut differently, read differently");
    Ok(whole)
}

// --- well-formed streams ---------------------------------------------------------------------

/// One event block as generated: its lines, and what it should read as (`None`: skipped).
#[derive(Clone, Debug)]
struct Block {
    bytes: Vec<u8>,
    expected: Option<sse_stream::Sse>,
}

/// Byte runs that are not UTF-8 whatever follows them (an ASCII byte or a line ending).
const INVALID: &[&[u8]] = &[
    b"\xff",
    b"\xfe",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf0\x9f\x98",
    b"\xc0\xaf",
    b"\x80",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9 :{}\",]{0,12}",
        Just("{\"choices\":[]}".to_owned()),
        Just(" leading".to_owned()),
        Just("é中🎉".to_owned()),
        Just(String::new()),
        "\\PC{0,6}".prop_map(|s| s.replace(['\r', '\n'], "")),
    ]
}

fn ending() -> impl Strategy<Value = &'static str> + Clone {
    prop::sample::select(&["\n", "\r\n", "\r"][..])
}

/// A line of a block, and what it sets.
#[derive(Clone, Debug)]
enum Line {
    Event(String),
    Id(String),
    Retry(u32),
    Data(String),
    Comment(String),
    Unknown(String),
}

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        1 => "[a-z_.]{1,12}".prop_map(Line::Event),
        1 => "[a-z0-9]{0,6}".prop_map(Line::Id),
        1 => any::<u32>().prop_map(Line::Retry),
        6 => value().prop_map(Line::Data),
        1 => value().prop_map(Line::Comment),
        // Never a field the parser knows (`data`, `id`, …): `x-` first.
        1 => "x-[a-z]{1,6}".prop_map(Line::Unknown),
    ]
}

fn block() -> impl Strategy<Value = Block> {
    (
        prop::collection::vec((line(), ending(), any::<bool>()), 0..5),
        (value(), ending(), any::<bool>()),
        ending(),
        prop::option::weighted(0.15, (prop::sample::select(INVALID), any::<Index>())),
    )
        .prop_map(|(lines, (data, data_ending, spaced), blank, invalid)| {
            // Every block has a data line, so every block is an event.
            let mut all = lines;
            all.push((Line::Data(data), data_ending, spaced));
            let mut bytes = Vec::new();
            let mut sse = sse_stream::Sse::default();
            let mut data: Option<String> = None;
            for (line, end, spaced) in &all {
                let sep = if *spaced { ": " } else { ":" };
                let text = match line {
                    Line::Event(v) => {
                        sse.event = Some(v.clone());
                        format!("event{sep}{v}")
                    }
                    Line::Id(v) => {
                        sse.id = Some(v.clone());
                        format!("id{sep}{v}")
                    }
                    Line::Retry(v) => {
                        sse.retry = Some(u64::from(*v));
                        format!("retry{sep}{v}")
                    }
                    Line::Data(v) => {
                        // One space after the colon is the separator; the rest is the value.
                        let value = if !*spaced {
                            v.strip_prefix(' ').unwrap_or(v)
                        } else {
                            v
                        };
                        match &mut data {
                            Some(d) => {
                                d.push('\n');
                                d.push_str(value);
                            }
                            None => data = Some(value.to_owned()),
                        }
                        format!("data{sep}{v}")
                    }
                    Line::Comment(v) => format!(":{v}"),
                    Line::Unknown(v) => format!("{v}{sep}x"),
                };
                bytes.extend_from_slice(text.as_bytes());
                bytes.extend_from_slice(end.as_bytes());
            }
            sse.data = data;
            // The blank line: after a CR, an LF would only finish that line ending.
            let last_cr = bytes.last() == Some(&b'\r');
            let blank = if last_cr && blank.starts_with('\n') {
                "\r"
            } else {
                blank
            };
            bytes.extend_from_slice(blank.as_bytes());
            let expected = match invalid {
                Some((run, at)) => {
                    // Inside the first line's text (never between a CR and an LF).
                    let first_end = bytes
                        .iter()
                        .position(|b| *b == b'\r' || *b == b'\n')
                        .unwrap_or(0);
                    let at = at.index(first_end + 1);
                    bytes.splice(at..at, run.iter().copied());
                    None
                }
                None => Some(sse),
            };
            Block { bytes, expected }
        })
}

#[derive(Clone, Debug)]
struct Stream {
    blocks: Vec<Block>,
    /// Bytes of a last event with no blank line after it.
    unterminated: Shown,
    cuts: Vec<Index>,
    byte_by_byte: bool,
}

fn well_formed() -> impl Strategy<Value = Stream> {
    (
        prop::collection::vec(block(), 0..8),
        prop_oneof![
            2 => Just(Vec::new()),
            1 => "data: [a-z]{0,5}(\r|\n|\r\n)?".prop_map(String::into_bytes),
            1 => Just(b"data: \xff".to_vec()),
        ],
        cuts(),
    )
        .prop_map(|(blocks, unterminated, (cuts, byte_by_byte))| Stream {
            blocks,
            unterminated: Shown(unterminated),
            cuts,
            byte_by_byte,
        })
}

#[test]
fn a_well_formed_stream_reads_as_its_events_however_it_is_cut() {
    check(&TARGET, well_formed(), |stream| {
        let mut bytes: Vec<u8> = stream.blocks.iter().flat_map(|b| b.bytes.clone()).collect();
        // It starts with `data`: it cannot join the last block's line ending.
        bytes.extend_from_slice(&stream.unterminated.0);
        let read = same_whatever_the_cutting(&bytes, &stream.cuts, stream.byte_by_byte)?;
        let expected: Vec<sse_stream::Sse> = stream
            .blocks
            .iter()
            .filter_map(|b| b.expected.clone())
            .collect();
        prop_assert_eq!(&read.events, &expected, "the events");
        let invalid = stream
            .blocks
            .iter()
            .filter(|b| b.expected.is_none())
            .count()
            + usize::from(std::str::from_utf8(&stream.unterminated.0).is_err());
        prop_assert_eq!(
            read.skips,
            invalid.min(MAX_SKIP_REPORTS),
            "the skips reported"
        );
        Ok(())
    });
}

// --- anything ---------------------------------------------------------------------------------

/// Fragments of SSE and stray bytes.
const FRAGMENTS: &[&[u8]] = &[
    b"data:",
    b"data: ",
    b"event:",
    b"id:",
    b"retry:",
    b":",
    b" ",
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"\r\r",
    b"{\"a\":1}",
    b"[DONE]",
    b"x",
    b"\xff",
    b"\xc3",
    b"\xa9",
    b"\xe2\x82\xac",
    b"\xef\xbb\xbf",
    b"\0",
];

#[test]
fn any_bytes_read_the_same_however_they_are_cut() {
    let bytes = prop_oneof![
        prop::collection::vec(prop::sample::select(FRAGMENTS), 0..40).prop_map(|f| f.concat()),
        prop::collection::vec(any::<u8>(), 0..200),
    ];
    check(
        &TARGET,
        (bytes.prop_map(Shown), cuts()),
        |(Shown(bytes), (cuts, byte_by_byte))| {
            same_whatever_the_cutting(&bytes, &cuts, byte_by_byte)?;
            Ok(())
        },
    );
}
