//! A stored stream whose client went away: its pump is handed to a tracked task that ends it.
//!
//! A pump runs lazily inside the response body, so when the client goes away the body is
//! dropped, pump and all. For a stored response that would leave the record `in_progress` while
//! the upstream's answer (already paid for) is thrown away. [`Detachable`] is the body's stream:
//! while the client reads, it only drives the pump; dropped before the pump's end, it hands the
//! pump (and the step in flight, so nothing is cut in the middle) to a task that, by the
//! gateway's `on_client_disconnect`,
//! - `finish` (the default): reads the upstream to the end, frames thrown away, and stores the
//!   whole answer, under the stream's own deadline, idle timeout and forced stop;
//! - `cancel`: stops the upstream at once (the pump's cancel signal) and stores `cancelled`.
//!
//! *Architecture invariant:* this is the one task spawned per request, and only after its client
//! left; the tasks are bounded ([`crate::platform::inflight::MAX_DRAINS`]: past it a left stream is
//! cancelled, not finished) and counted, so shutdown waits for them. No frame is buffered.
//!
//! Not here: how a pump ends a response (`sse`, `sse_end`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Bytes;
use futures::Stream;

use crate::config::ClientDisconnect;
use crate::platform::inflight::{CancelSignal, Drains};

/// A pump a [`Detachable`] drives.
pub(super) trait Pumped: Send + 'static {
    /// The next batch of frames; `None` after the terminal event.
    fn next_frames(&mut self) -> impl Future<Output = Option<Vec<Bytes>>> + Send;
    /// Whether the response still has to be ended and stored when its client leaves.
    fn needs_ending(&self) -> bool;
    fn request_id(&self) -> &str;
}

type Stepping<P> = Pin<Box<dyn Future<Output = (Box<P>, Option<Vec<Bytes>>)> + Send>>;

/// The pump is boxed once: a pump is large (kilobytes), and it changes hands at every batch.
enum State<P> {
    Idle(Box<P>),
    Stepping(Stepping<P>),
    Done,
}

/// What ending a left stream needs.
pub(super) struct Detach {
    pub(super) mode: ClientDisconnect,
    pub(super) drains: Arc<Drains>,
    /// The pump's cancel signal (the same a `/cancel` sends).
    pub(super) cancel: CancelSignal,
}

/// The body stream of a pump, which ends the response when dropped before its end.
pub(super) struct Detachable<P: Pumped> {
    state: State<P>,
    detach: Option<Detach>,
}

impl<P: Pumped> Detachable<P> {
    /// `detach`: `None` when nothing needs ending after the client left (not stored).
    pub(in crate::http::responses) fn new(pump: P, detach: Option<Detach>) -> Self {
        Self {
            state: State::Idle(Box::new(pump)),
            detach,
        }
    }
}

fn step<P: Pumped>(mut pump: Box<P>) -> Stepping<P> {
    Box::pin(async move {
        let frames = pump.next_frames().await;
        (pump, frames)
    })
}

// The pump is never pinned: its box is moved in and out while idle, and the step in flight that
// holds it is boxed.
impl<P: Pumped> Unpin for Detachable<P> {}

impl<P: Pumped> Stream for Detachable<P> {
    type Item = Vec<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match std::mem::replace(&mut this.state, State::Done) {
                State::Done => return Poll::Ready(None),
                State::Idle(pump) => this.state = State::Stepping(step(pump)),
                State::Stepping(mut stepping) => match stepping.as_mut().poll(cx) {
                    Poll::Pending => {
                        this.state = State::Stepping(stepping);
                        return Poll::Pending;
                    }
                    Poll::Ready((pump, Some(frames))) => {
                        this.state = State::Idle(pump);
                        return Poll::Ready(Some(frames));
                    }
                    // The pump ended: dropped here, nothing left to end.
                    Poll::Ready((_, None)) => return Poll::Ready(None),
                },
            }
        }
    }
}

impl<P: Pumped> Drop for Detachable<P> {
    fn drop(&mut self) {
        let (Some(detach), Ok(runtime)) =
            (self.detach.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let stepping = match std::mem::replace(&mut self.state, State::Done) {
            State::Done => return,
            State::Idle(pump) if !pump.needs_ending() => return,
            State::Idle(pump) => Box::pin(async move { (pump, Some(Vec::new())) }),
            State::Stepping(stepping) => stepping,
        };
        let ticket = detach.drains.enter();
        let mode = match (&ticket, detach.mode) {
            (Some(_), mode) => mode,
            // Too many streams are being finished: this one is cancelled.
            (None, _) => ClientDisconnect::Cancel,
        };
        if mode == ClientDisconnect::Cancel {
            // Heard by the step in flight too: the upstream stops at once.
            detach.cancel.send_replace(true);
        }
        runtime.spawn(async move {
            let _ticket = ticket;
            let (mut pump, frames) = stepping.await;
            if frames.is_none() {
                return;
            }
            tracing::info!(
                request_id = pump.request_id(),
                mode = ?mode,
                "the client left a stored stream; ending it"
            );
            while pump.next_frames().await.is_some() {}
        });
    }
}

/// A response's cancel signal and its place among those in flight.
pub(super) struct Flight {
    pub(super) registration: Option<crate::platform::inflight::Registration>,
    pub(super) cancel: CancelSignal,
}

impl Flight {
    /// A stored response (`stored`) is registered, so `/cancel` reaches it here; any other gets
    /// a signal nobody else holds. `started` makes the response as it starts, for the
    /// registration (only a stored one needs it).
    pub(super) fn start(
        state: &crate::state::AppState,
        stored: bool,
        started: impl FnOnce() -> toolbridge_wire::responses::Response,
        owner: String,
    ) -> Self {
        if !stored {
            let (tx, _) = tokio::sync::watch::channel(false);
            return Self {
                registration: None,
                cancel: Arc::new(tx),
            };
        }
        let (registration, cancel) = state.in_flight.register(owner, Box::new(started()));
        Self {
            registration,
            cancel,
        }
    }

    /// The stream's limits: the provider's deadline, the gateway's keep-alive and forced stop,
    /// and this response's cancel signal.
    pub(super) fn limits(
        &self,
        state: &crate::state::AppState,
        provider: &crate::config::Provider,
    ) -> super::transport::PumpLimits {
        super::transport::PumpLimits {
            keepalive: state.config.keepalive,
            deadline: tokio::time::Instant::now() + provider.stream_timeout,
            shutdown: state.shutdown.clone(),
            cancel: self.cancel.subscribe(),
        }
    }

    /// How the stream ends if its client leaves; `None` when nothing is persisted.
    pub(super) fn detach(&self, state: &crate::state::AppState, persisted: bool) -> Option<Detach> {
        persisted.then(|| Detach {
            mode: state.config.on_client_disconnect,
            drains: state.drains.clone(),
            cancel: self.cancel.clone(),
        })
    }
}
