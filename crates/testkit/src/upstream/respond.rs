//! The HTTP answer each scripted [`Reply`] becomes: its status, headers and body, streamed piece
//! by piece where it is a stream, broken off where it is a reset.
//!
//! Not here: which reply a request gets, and the usage a cache rewrites in it (the parent).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::stream;
use serde_json::Value;

use super::Reply;

/// The answer `reply` becomes (a delayed reply is already unwrapped; none is a 500). A stream
/// dropped before its end adds to `abandoned`.
pub(super) fn respond(reply: Option<Reply>, abandoned: Arc<AtomicUsize>) -> Response {
    match reply {
        // Unwrapped by the caller.
        Some(Reply::Delayed { .. }) | None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "fake upstream: no reply scripted",
        )
            .into_response(),
        Some(Reply::Json {
            status,
            body,
            headers,
        }) => json(status, body, headers),
        Some(Reply::Raw {
            status,
            content_type,
            body,
        }) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            [("content-type", content_type)],
            body,
        )
            .into_response(),
        Some(Reply::StreamBytes { pieces }) => (
            StatusCode::OK,
            [("content-type", "text/event-stream")],
            Body::from_stream(stream::iter(
                pieces
                    .into_iter()
                    .map(|p| Ok::<Bytes, std::convert::Infallible>(Bytes::from(p))),
            )),
        )
            .into_response(),
        Some(Reply::JsonThenReset { body, sent }) => json_then_reset(body, sent),
        Some(Reply::StreamThenReset { pieces }) => stream_then_reset(pieces),
        Some(Reply::Stream { pieces, pause }) => sse(pieces, pause, abandoned),
    }
}

/// A JSON body with its status and the extra headers that are valid ones.
fn json(status: u16, body: Value, headers: Vec<(String, String)>) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response();
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (
            axum::http::HeaderName::from_bytes(k.as_bytes()),
            axum::http::HeaderValue::from_str(&v),
        ) {
            response.headers_mut().insert(k, v);
        }
    }
    response
}

/// An SSE body written piece by piece, `pause` before each; dropped before its last piece, it
/// adds to `abandoned`.
fn sse(pieces: Vec<String>, pause: Duration, abandoned: Arc<AtomicUsize>) -> Response {
    let finish = Finish {
        done: false,
        abandoned,
    };
    let state = (pieces.into_iter(), finish);
    let body = stream::unfold(state, move |(mut it, finish)| async move {
        let Some(piece) = it.next() else {
            finish.complete();
            return None;
        };
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        let chunk = Ok::<Bytes, std::convert::Infallible>(Bytes::from(piece));
        Some((chunk, (it, finish)))
    });
    (
        StatusCode::OK,
        [("content-type", "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

/// Counts a streamed reply as abandoned when it is dropped before it finished.
struct Finish {
    done: bool,
    abandoned: Arc<AtomicUsize>,
}

impl Finish {
    /// The reply was sent to its end.
    fn complete(mut self) {
        self.done = true;
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        if !self.done {
            self.abandoned
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// A 200 JSON answer whose connection drops after `sent` of its bytes (see
/// [`Reply::JsonThenReset`]).
fn json_then_reset(body: String, sent: usize) -> Response {
    let length = body.len();
    let head = Bytes::from(body.into_bytes()).slice(..sent.min(length));
    let parts = stream::unfold(Some(head), |state| async move {
        match state {
            Some(head) => Some((Ok(head), None)),
            None => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let reset = std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "fake upstream: connection dropped",
                );
                // The stream ends after this error (the body is aborted).
                Some((Err::<Bytes, std::io::Error>(reset), None))
            }
        }
    });
    let mut response = (
        StatusCode::OK,
        [("content-type", "application/json")],
        Body::from_stream(parts),
    )
        .into_response();
    if let Ok(v) = axum::http::HeaderValue::from_str(&length.to_string()) {
        response.headers_mut().insert("content-length", v);
    }
    response
}

/// An SSE body whose connection drops after `pieces` (see [`Reply::StreamThenReset`]).
fn stream_then_reset(pieces: Vec<String>) -> Response {
    let mut parts: Vec<Result<Bytes, std::io::Error>> =
        pieces.into_iter().map(|p| Ok(Bytes::from(p))).collect();
    parts.push(Err(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "fake upstream: connection dropped",
    )));
    (
        StatusCode::OK,
        [("content-type", "text/event-stream")],
        Body::from_stream(stream::iter(parts)),
    )
        .into_response()
}
