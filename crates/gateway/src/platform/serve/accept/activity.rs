//! What a connection is doing, for its watchdog: requests in flight (from the head until the
//! response body is dropped), when it went idle, when the next head's first byte came, and the
//! watch that says when the connection must close.
//!
//! Not here: the socket that reports the bytes (`watched`) and the loop that acts on the watch
//! (the parent).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::platform::serve::limits::ServerLimits;

/// What a connection is doing, shared by its socket, its requests and its watchdog. Times are
/// nanoseconds since `born`.
pub(super) struct Activity {
    born: Instant,
    in_flight: AtomicUsize,
    /// When the connection last had no request in flight.
    idle_since: AtomicU64,
    /// When the first byte of the next request arrived; [`NONE`] before it has.
    first_byte: AtomicU64,
    /// Woken when a request begins or ends.
    changed: Notify,
}

const NONE: u64 = u64::MAX;

impl Activity {
    pub(super) fn new() -> Self {
        Self {
            born: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            // The first request's head is timed from the connection's opening.
            first_byte: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_nanos()).unwrap_or(NONE - 1)
    }

    fn at(&self, nanos: u64) -> Instant {
        self.born + Duration::from_nanos(nanos)
    }

    /// Bytes came in: when no request is in flight, they start the next one's head (true when
    /// these are its first bytes).
    pub(super) fn read(&self) -> bool {
        self.idle()
            && self
                .first_byte
                .compare_exchange(NONE, self.now(), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// No request is in flight.
    pub(super) fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Resolves when the connection must close, saying why. Never while a request is in
    /// flight.
    pub(super) async fn watch(&self, limits: ServerLimits) -> &'static str {
        loop {
            let changed = self.changed.notified();
            let deadline = if self.in_flight.load(Ordering::Acquire) > 0 {
                None
            } else {
                match self.first_byte.load(Ordering::Acquire) {
                    NONE => Some((
                        self.at(self.idle_since.load(Ordering::Acquire)) + limits.idle_timeout,
                        "idle timeout",
                    )),
                    first => Some((
                        self.at(first) + limits.header_read_timeout,
                        "request head not received within the header read timeout",
                    )),
                }
            };
            match deadline {
                None => changed.await,
                Some((at, why)) => {
                    let now = Instant::now();
                    if at <= now {
                        return why;
                    }
                    // Bytes arriving from now on move the deadline to at least a header
                    // timeout away, so looking again by then is never late.
                    let look = at.min(now + limits.header_read_timeout);
                    tokio::select! {
                        () = tokio::time::sleep_until(look) => {}
                        () = changed => {}
                    }
                }
            }
        }
    }
}

/// A request in flight on a connection, from its head until its response body is dropped.
pub(super) struct InFlight(Arc<Activity>);

impl InFlight {
    pub(super) fn begin(activity: Arc<Activity>) -> Self {
        if activity.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            activity.first_byte.store(NONE, Ordering::Release);
            activity.changed.notify_one();
        }
        Self(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.idle_since.store(activity.now(), Ordering::Release);
            activity.first_byte.store(NONE, Ordering::Release);
            activity.changed.notify_one();
        }
    }
}

/// A response body that keeps its request in flight until hyper drops it (sent or aborted).
pub(super) struct Tracked {
    inner: Body,
    _guard: InFlight,
}

impl Tracked {
    /// `inner`, keeping `guard`'s request in flight until it is dropped.
    pub(super) fn new(inner: Body, guard: InFlight) -> Self {
        Self {
            inner,
            _guard: guard,
        }
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
