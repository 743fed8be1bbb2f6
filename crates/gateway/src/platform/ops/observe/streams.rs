//! The bodies the observer watches: an HTTP stream's body ([`Observed`]: first byte and first
//! output delta timed, polled inside the request's span and context, the open-streams gauge
//! and the capture of a stream its client closed kept by [`OpenStream`] however it ends), and a
//! WebSocket response's events ([`Scoped`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum::body::{BodyDataStream, Bytes};
use futures::{Stream, StreamExt};

use super::{CLIENT_CLOSED, CTX, RequestCtx, metrics};

/// A stream polled inside a [`RequestCtx`] (its span and task-local), as the middleware polls
/// an HTTP stream's body; dropped before its capture is written (the client went away), it
/// writes it with status 499, as an HTTP stream does.
pub(crate) struct Scoped<S> {
    inner: S,
    ctx: Arc<RequestCtx>,
}

impl<S> Scoped<S> {
    pub(crate) fn new(ctx: Arc<RequestCtx>, inner: S) -> Self {
        Self { inner, ctx }
    }
}

impl<S: Stream + Unpin> Stream for Scoped<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let span = this.ctx.span.clone();
        let _entered = span.enter();
        CTX.sync_scope(this.ctx.clone(), || this.inner.poll_next_unpin(cx))
    }
}

impl<S> Drop for Scoped<S> {
    fn drop(&mut self) {
        if self.ctx.capture_pending()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let ctx = self.ctx.clone();
            runtime.spawn(async move { ctx.write_capture(None, CLIENT_CLOSED).await });
        }
    }
}

/// A stream's body, observed.
pub(super) struct Observed {
    pub(super) inner: BodyDataStream,
    pub(super) guard: OpenStream,
    pub(super) first: bool,
    pub(super) first_token: bool,
}

/// Whether a piece of an SSE body carries output: one of its events is an `event:
/// response.….delta` (text, reasoning, call arguments, a custom tool's input, a refusal). The
/// gateway writes whole events, each with its `event:` line first, a batch of them per piece.
pub(super) fn is_delta_frame(piece: &[u8]) -> bool {
    const EVENT: &[u8] = b"event: response.";
    memchr::memmem::find_iter(piece, EVENT)
        .filter(|&at| at == 0 || piece[at - 1] == b'\n')
        .any(|at| {
            let rest = &piece[at + EVENT.len()..];
            let name = rest.split(|b| *b == b'\n').next().unwrap_or_default();
            name.ends_with(b".delta")
        })
}

/// Counts a stream open until dropped, whichever way it ends.
pub(super) struct OpenStream {
    pub(super) ctx: Arc<RequestCtx>,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let (provider, model) = self.ctx.labels();
        metrics::open_streams(&self.ctx.route, -1.0);
        metrics::stream_ended(&self.ctx.route, provider, model, self.ctx.started.elapsed());
        // A stream that ended without its final response (the client went away) still leaves
        // its capture: the request and the upstream bodies so far, status 499, no response.
        if self.ctx.capture_pending()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let ctx = self.ctx.clone();
            runtime.spawn(async move { ctx.write_capture(None, CLIENT_CLOSED).await });
        }
    }
}

impl Stream for Observed {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let ctx = this.guard.ctx.clone();
        let span = ctx.span.clone();
        let _entered = span.enter();
        let polled = CTX.sync_scope(ctx, || this.inner.poll_next_unpin(cx));
        if let Poll::Ready(Some(Ok(chunk))) = &polled {
            let ctx = &this.guard.ctx;
            if !this.first {
                this.first = true;
                let (provider, model) = ctx.labels();
                metrics::first_byte(&ctx.route, provider, model, ctx.started.elapsed());
            }
            if !this.first_token && is_delta_frame(chunk) {
                this.first_token = true;
                let (provider, model) = ctx.labels();
                let elapsed = ctx.started.elapsed();
                metrics::first_token(&ctx.route, provider, model, elapsed);
                let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX).max(1);
                ctx.first_token_nanos.store(nanos, Ordering::Relaxed);
            }
        }
        polled
    }
}
