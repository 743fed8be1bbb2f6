//! An upstream SSE body as a stream of events, with an event that is not valid UTF-8 skipped
//! and reported instead of ending the stream.
//!
//! The SSE parser (`sse-stream`) validates UTF-8 strictly and ends the stream at the first
//! invalid byte, so one bad chunk would fail a whole answer. The guard here sits between the
//! bounded byte stream and the parser: it cuts the bytes into events at their blank lines (a
//! line ends with LF, CR or CRLF; no byte of a multi-byte UTF-8 character is either, so a cut
//! never splits one), passes valid events on unchanged and drops an invalid one, which the
//! pumps then report as an `upstream_chunk_skipped` diagnostic like any other bad chunk.
//!
//! Not here: what an event means (the dialect decoders) and the body's size bound
//! ([`crate::upstream::bounded_bytes`], which also bounds what the guard holds: at most one
//! unfinished event).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::Bytes;
use futures::{Stream, StreamExt};
use sse_stream::SseByteStream;

use crate::upstream::{StreamError, bounded_bytes};

/// One item of an upstream stream.
pub(crate) enum Chunk {
    /// An SSE event.
    Event(sse_stream::Sse),
    /// An event was skipped: its bytes are not valid UTF-8.
    Skipped,
}

/// An upstream stream, read lazily.
pub(crate) type UpstreamSse = Pin<Box<dyn Stream<Item = Result<Chunk, sse_stream::Error>> + Send>>;

/// At most this many skipped events of one stream are reported (each one is still skipped).
const MAX_SKIP_REPORTS: usize = 3;

/// The diagnostic of a skipped event.
pub(crate) fn skipped_diagnostic() -> toolbridge_wire::responses::Diagnostic {
    toolbridge_core::diagnostics::diag(
        toolbridge_core::diagnostics::CHUNK_SKIPPED,
        None,
        "an upstream event was not valid UTF-8 and was skipped",
    )
}

/// The events of an upstream SSE body.
pub(crate) fn upstream_sse(response: reqwest::Response) -> UpstreamSse {
    events(bounded_bytes(response))
}

/// The events of a byte stream (`bytes`), invalid UTF-8 events skipped.
pub(crate) fn events(
    bytes: impl Stream<Item = Result<Bytes, StreamError>> + Send + 'static,
) -> UpstreamSse {
    let skipped = Arc::new(AtomicUsize::new(0));
    let guard = Utf8Guard::new(Box::pin(bytes), skipped.clone());
    let mut parser = SseByteStream::new(guard);
    let mut reported = 0;
    Box::pin(futures::stream::poll_fn(move |cx| {
        let unreported =
            |reported: usize| reported < skipped.load(Ordering::Relaxed).min(MAX_SKIP_REPORTS);
        // A skip is reported at the next poll after the guard made it (the parser reads ahead:
        // the event after it may come first).
        if unreported(reported) {
            reported += 1;
            return Poll::Ready(Some(Ok(Chunk::Skipped)));
        }
        match parser.poll_next_unpin(cx) {
            // The parser is finished: polled again, it still answers `None`.
            Poll::Ready(None) if unreported(reported) => {
                reported += 1;
                Poll::Ready(Some(Ok(Chunk::Skipped)))
            }
            polled => polled.map(|item| item.map(|r| r.map(Chunk::Event))),
        }
    }))
}

/// Where the guard is in the pending bytes: how far it looked, and where the current line
/// starts.
#[derive(Default)]
struct Scan {
    at: usize,
    line_start: usize,
}

/// Cuts bytes into SSE events and drops those that are not valid UTF-8.
struct Utf8Guard {
    inner: Pin<Box<dyn Stream<Item = Result<Bytes, StreamError>> + Send>>,
    /// Bytes of the event not yet ended (bounded with the body by `bounded_bytes`).
    pending: Vec<u8>,
    scan: Scan,
    skipped: Arc<AtomicUsize>,
    ended: bool,
}

impl Utf8Guard {
    /// A guard over `inner`, counting the events it skips in `skipped`.
    fn new(
        inner: Pin<Box<dyn Stream<Item = Result<Bytes, StreamError>> + Send>>,
        skipped: Arc<AtomicUsize>,
    ) -> Self {
        Self {
            inner,
            pending: Vec::new(),
            scan: Scan::default(),
            skipped,
            ended: false,
        }
    }

    /// The whole events ready in `pending`, the invalid ones left out. The events are copied
    /// out in one pass and the bytes before the last one's end dropped once.
    fn take_events(&mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.pending.len());
        let mut start = 0;
        while let Some(end) = event_end(&self.pending, &mut self.scan, self.ended) {
            keep(&self.pending[start..end], &mut out, &self.skipped);
            start = end;
        }
        self.pending.drain(..start);
        self.scan.at -= start;
        self.scan.line_start -= start;
        if self.ended && !self.pending.is_empty() {
            keep(&self.pending, &mut out, &self.skipped);
            self.pending.clear();
            self.scan = Scan::default();
        }
        out
    }

    /// The whole events at the start of `bytes`, which arrived with nothing pending: when they
    /// are all valid (the usual case) a slice of `bytes`, not a copy; else the valid ones
    /// copied out. The unfinished rest is kept pending.
    fn take_events_of(&mut self, bytes: &Bytes) -> Bytes {
        self.scan = Scan::default();
        let mut start = 0;
        let mut copied: Option<Vec<u8>> = None;
        while let Some(end) = event_end(bytes, &mut self.scan, false) {
            let event = &bytes[start..end];
            match &mut copied {
                Some(out) => keep(event, out, &self.skipped),
                None if std::str::from_utf8(event).is_err() => {
                    self.skipped.fetch_add(1, Ordering::Relaxed);
                    copied = Some(bytes[..start].to_vec());
                }
                None => {}
            }
            start = end;
        }
        self.pending.extend_from_slice(&bytes[start..]);
        self.scan.at -= start;
        self.scan.line_start -= start;
        match copied {
            Some(out) => Bytes::from(out),
            None => bytes.slice(..start),
        }
    }
}

/// The end (exclusive) of the first whole event in `buf` at or after where `scan` stopped, when
/// one is there; `ended` says no byte follows `buf`.
fn event_end(buf: &[u8], scan: &mut Scan, ended: bool) -> Option<usize> {
    let mut i = scan.at;
    loop {
        let Some(offset) = memchr::memchr2(b'\n', b'\r', &buf[i..]) else {
            i = buf.len();
            break;
        };
        i += offset;
        let len = if buf[i] == b'\r' {
            match buf.get(i + 1) {
                Some(b'\n') => 2,
                Some(_) => 1,
                // A CR at the end may be the first half of a CRLF: wait for the next byte.
                None if !ended => break,
                None => 1,
            }
        } else {
            1
        };
        let empty = i == scan.line_start;
        i += len;
        scan.line_start = i;
        if empty {
            scan.at = i;
            return Some(i);
        }
    }
    scan.at = i;
    None
}

/// Appends `event` to `out` when it is UTF-8, else counts it skipped.
fn keep(event: &[u8], out: &mut Vec<u8>, skipped: &AtomicUsize) {
    if std::str::from_utf8(event).is_ok() {
        out.extend_from_slice(event);
    } else {
        skipped.fetch_add(1, Ordering::Relaxed);
    }
}

impl Stream for Utf8Guard {
    type Item = Result<Bytes, StreamError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                let out = this.take_events();
                return Poll::Ready((!out.is_empty()).then(|| Ok(Bytes::from(out))));
            }
            match this.inner.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(bytes))) if this.pending.is_empty() => {
                    let out = this.take_events_of(&bytes);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(out)));
                    }
                }
                Poll::Ready(Some(Ok(bytes))) => {
                    this.pending.extend_from_slice(&bytes);
                    let out = this.take_events();
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Bytes::from(out))));
                    }
                }
                Poll::Ready(None) => this.ended = true,
            }
        }
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    /// The data of each event and the number of skips reported, from these body pieces.
    async fn read(pieces: &[&[u8]]) -> (Vec<String>, usize) {
        let parts: Vec<Result<Bytes, StreamError>> = pieces
            .iter()
            .map(|p| Ok(Bytes::copy_from_slice(p)))
            .collect();
        let mut stream = events(futures::stream::iter(parts));
        let (mut data, mut skips) = (Vec::new(), 0);
        while let Some(item) = stream.next().await {
            match item {
                Ok(Chunk::Event(e)) => data.extend(e.data),
                Ok(Chunk::Skipped) => skips += 1,
                Err(e) => panic!("the stream failed: {e}"),
            }
        }
        (data, skips)
    }

    #[tokio::test]
    async fn an_event_that_is_not_utf8_is_skipped_and_the_stream_goes_on() {
        let (data, skips) = read(&[b"data: a\n\ndata: \xff\xfe\n\ndata: b\n\n"]).await;
        assert_eq!(data, ["a", "b"]);
        assert_eq!(skips, 1);
    }

    #[tokio::test]
    async fn events_cut_anywhere_and_every_line_ending_pass_unchanged() {
        // A multi-byte character and a CRLF split across pieces, CR-only endings.
        let (data, skips) = read(&[
            b"data: caf\xc3",
            b"\xa9\r",
            b"\n\r\ndata: x\r\rdata: y\n\n: comment\n\ndata: last\n",
            b"\n",
        ])
        .await;
        assert_eq!(data, ["café", "x", "y", "last"]);
        assert_eq!(skips, 0);
    }

    #[tokio::test]
    async fn a_bad_last_event_is_still_reported() {
        let (data, skips) = read(&[b"data: a\n\n", b"data: \xc3("]).await;
        assert_eq!(data, ["a"]);
        assert_eq!(skips, 1);
    }

    /// The guard's own output for these body pieces (whole events, as bytes).
    async fn guarded(pieces: Vec<Bytes>) -> (Vec<Bytes>, usize) {
        let skipped = Arc::new(AtomicUsize::new(0));
        let inner = futures::stream::iter(pieces.into_iter().map(Ok::<_, StreamError>));
        let mut guard = Utf8Guard::new(Box::pin(inner), skipped.clone());
        let mut out = Vec::new();
        while let Some(piece) = guard.next().await {
            out.push(piece.unwrap());
        }
        (out, skipped.load(Ordering::Relaxed))
    }

    #[tokio::test]
    async fn whole_valid_events_pass_as_slices_of_the_piece_not_copies() {
        let piece = Bytes::from_static(b"data: a\n\ndata: b\n\ndata: unfin");
        let (out, skips) = guarded(vec![piece.clone(), Bytes::from_static(b"ished\n\n")]).await;
        assert_eq!(skips, 0);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(&out[0][..], b"data: a\n\ndata: b\n\n");
        assert_eq!(
            out[0].as_ptr(),
            piece.as_ptr(),
            "the first events are not copied"
        );
        assert_eq!(&out[1][..], b"data: unfinished\n\n");
    }

    #[tokio::test]
    async fn an_invalid_event_in_a_fresh_piece_is_cut_out_and_the_rest_kept() {
        let piece = Bytes::from_static(b"data: a\n\ndata: \xff\n\ndata: b\n\ndata: c");
        let (out, skips) = guarded(vec![piece, Bytes::from_static(b"\r\n\r\n")]).await;
        assert_eq!(skips, 1);
        let all: Vec<u8> = out.iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(all, b"data: a\n\ndata: b\n\ndata: c\r\n\r\n");
    }
}
