//! The connection's socket: it tells the connection's [`Activity`] when bytes come in, and
//! answers in OpenAI's JSON where hyper answers a head it cannot parse by itself.
//!
//! Not here: the watchdog that acts on the activity (the parent, `activity`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::activity::Activity;

/// How much of a request head is kept to explain hyper's refusal of it.
const HEAD_KEPT: usize = 4096;

/// The connection's socket, telling its [`Activity`] when bytes come in, and answering in
/// OpenAI's JSON where hyper answers a head it cannot parse by itself.
///
/// hyper refuses a malformed head (a `Content-Length` that is not a number, a bad request
/// line, headers too large) before any service sees it, with a bodiless 400 (414, 431) that no
/// route can rewrite. The socket knows that answer: it is written while no request is in
/// flight, and every answer of ours has a JSON body. It is replaced, on its way out, by the
/// same status with the [`GatewayError`] body, whose cause comes from the start of the head
/// (kept while it arrives, at most [`HEAD_KEPT`] bytes, dropped once a request is in flight).
pub(super) struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
    /// The start of the request head being read, while no request is in flight.
    head: Vec<u8>,
    /// The answer being written in place of hyper's: its bytes, how many went out, and the
    /// length of hyper's answer (reported written once ours is).
    refusal: Option<(Vec<u8>, usize, usize)>,
}

impl Watched {
    /// `inner`, reporting to `activity`.
    pub(super) fn new(inner: TcpStream, activity: Arc<Activity>) -> Self {
        Self {
            inner,
            activity,
            head: Vec::new(),
            refusal: None,
        }
    }

    /// Keeps the start of a request head; frees it once a request is in flight.
    fn keep_head(&mut self, read: &[u8]) {
        if !self.activity.idle() {
            self.head = Vec::new();
            return;
        }
        if self.activity.read() {
            self.head.clear();
        }
        let room = HEAD_KEPT.saturating_sub(self.head.len());
        self.head
            .extend_from_slice(read.get(..room.min(read.len())).unwrap_or_default());
    }

    /// When `buf` is hyper's own answer to a head it could not parse, ours in its place.
    fn refusal_for(&self, buf: &[u8]) -> Option<Vec<u8>> {
        if !buf.starts_with(b"HTTP/1.1 4") || !buf.ends_with(b"\r\n\r\n") || !self.activity.idle() {
            return None;
        }
        let head = std::str::from_utf8(buf).ok()?;
        let status_line = head.split("\r\n").next()?;
        let status: u16 = status_line
            .strip_prefix("HTTP/1.1 ")?
            .get(..3)?
            .parse()
            .ok()?;
        let bodiless = head
            .split("\r\n")
            .any(|line| line.eq_ignore_ascii_case("content-length: 0"));
        if !(400..500).contains(&status) || !bodiless {
            return None;
        }
        let error = match invalid_content_length(&self.head) {
            Some(value) if status == 400 => crate::error::GatewayError::InvalidContentLength(value),
            _ => crate::error::GatewayError::MalformedHead(status),
        };
        let body = serde_json::to_vec(&error.body()).ok()?;
        let mut answer = format!(
            "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        answer.extend_from_slice(&body);
        Some(answer)
    }

    /// Writes the pending refusal; `Ready(Ok(n))` with hyper's length once all of it went.
    fn poll_refusal(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        while let Some((bytes, sent, _)) = &mut self.refusal
            && *sent < bytes.len()
        {
            let rest = bytes.get(*sent..).unwrap_or_default();
            match std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, rest)) {
                Ok(0) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                Ok(n) => *sent += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(self.refusal.take().map_or(0, |(_, _, theirs)| theirs)))
    }
}

/// The first `Content-Length` value in `head` that is not one non-negative integer (hyper
/// takes a list of equal ones, `5, 5`), as sent; `None` when every one is valid or none is
/// kept.
fn invalid_content_length(head: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(head);
    let mut values = head.split("\r\n").skip(1).filter_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim())
    });
    let mut first: Option<u64> = None;
    let invalid = values.find(|value| {
        value.split(',').any(|one| {
            let one = one.trim();
            let parsed = (!one.is_empty() && one.bytes().all(|b| b.is_ascii_digit()))
                .then(|| one.parse::<u64>().ok())
                .flatten();
            match (parsed, first) {
                (None, _) => true,
                (Some(n), Some(seen)) => n != seen,
                (Some(n), None) => {
                    first = Some(n);
                    false
                }
            }
        })
    })?;
    Some(invalid.chars().take(64).collect())
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let read = buf.filled().get(before..).unwrap_or_default();
            self.keep_head(read);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.refusal.is_none()
            && let Some(answer) = self.refusal_for(buf)
        {
            self.refusal = Some((answer, 0, buf.len()));
        }
        if self.refusal.is_some() {
            return self.poll_refusal(cx);
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        // hyper's own answer is its head alone, one buffer: looked at as a plain write.
        if self.activity.idle()
            && let [only] = bufs
        {
            return self.poll_write(cx, only);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
