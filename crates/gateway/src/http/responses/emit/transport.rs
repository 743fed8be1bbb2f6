//! The one transport loop every streamed answer waits in: the pump (`sse`) asks [`wake`] what
//! happens next —
//! an upstream event, the body's end, a silence long enough for a keep-alive, or a stop (the
//! stream's deadline, the gateway's shutdown, the response's cancel) — and end a stopped stream
//! with the terminal code and message [`Stop`] gives. A gateway step run between upstream rounds
//! (the tool loop) is stopped the same way ([`interruptible`]). An event already read from the
//! socket is taken at once ([`ready`]), so a pump can gather a burst of them into one batch.
//!
//! Not here: what an event means (the decoders, the assembler), what a round's end leads to
//! (`rounds`), and how events become the transport's messages (`framing`, beside the stages).

use std::task::Poll;

use futures::StreamExt;
use tokio::sync::watch;

use crate::http::responses::dispatch::chunks::{Chunk, UpstreamSse};
use crate::upstream::StreamError;

/// Time limits and the stop signals of one stream.
pub(in crate::http::responses) struct PumpLimits {
    /// Silence after which a keep-alive goes to the client.
    pub(in crate::http::responses) keepalive: Option<std::time::Duration>,
    /// When the stream must end, whatever the upstream does.
    pub(super) deadline: tokio::time::Instant,
    /// Turns true when the gateway must end open streams now.
    pub(super) shutdown: watch::Receiver<bool>,
    /// Turns true when the response is cancelled (`/cancel`, or its client left under
    /// `on_client_disconnect = "cancel"`).
    pub(super) cancel: watch::Receiver<bool>,
}

/// What woke a waiting stream.
pub(super) enum Wake {
    /// An upstream SSE event.
    Event(sse_stream::Sse),
    /// An upstream event that was not UTF-8, dropped (`upstream_chunk_skipped`).
    Skipped,
    /// The upstream body ended (with or without the dialect's end marker: the pump knows).
    Ended,
    /// The upstream body broke: the terminal code and message.
    Broken(&'static str, String),
    /// Nothing came within the keep-alive interval.
    Silence,
    /// The stream must end now.
    Stop(Stop),
}

/// Why a stream is stopped from outside the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::http::responses) enum Stop {
    /// The stream ran past `stream_timeout_secs`.
    Deadline,
    /// The gateway's shutdown grace period ran out.
    Shutdown,
    /// The response was cancelled.
    Cancelled,
}

impl Stop {
    /// The terminal code and message of a stream stopped this way; `None` for a cancel, which
    /// ends the response `cancelled`, not failed.
    pub(super) fn failure(self) -> Option<(&'static str, String)> {
        match self {
            Self::Deadline => Some((
                "server_error",
                "the upstream stream went on past its deadline (stream_timeout_secs)".to_owned(),
            )),
            Self::Shutdown => Some((
                "server_shutting_down",
                "the gateway is shutting down; retry the request".to_owned(),
            )),
            Self::Cancelled => None,
        }
    }
}

/// Waits for what happens next on `upstream`; a stop wins over an event ready at the same time.
/// An event already read from the socket goes without arming the select's timers.
pub(super) async fn wake(upstream: &mut UpstreamSse, limits: &mut PumpLimits) -> Wake {
    if let Some(wake) = ready(upstream, limits).await {
        return wake;
    }
    let keepalive = limits.keepalive;
    tokio::select! {
        biased;
        () = wait_for(&mut limits.shutdown) => Wake::Stop(Stop::Shutdown),
        () = wait_for(&mut limits.cancel) => Wake::Stop(Stop::Cancelled),
        () = tokio::time::sleep_until(limits.deadline) => Wake::Stop(Stop::Deadline),
        wake = next_or_silence(upstream, keepalive) => wake,
    }
}

/// At most this many upstream events go into one batch of a pump's frames: a burst of them is
/// written at once, its first delta held back by no more than their translation (tens of
/// microseconds).
pub(super) const MAX_BATCH_EVENTS: usize = 16;

/// What a pump's step handles next. Holding no frames yet (`holding` false) it waits
/// ([`wake`]); holding some, it takes only what the upstream has ready, while fewer than
/// [`MAX_BATCH_EVENTS`] were read in this step (`read` counts them). `None`: send what it holds.
pub(super) async fn batched(
    upstream: &mut UpstreamSse,
    limits: &mut PumpLimits,
    holding: bool,
    read: &mut usize,
) -> Option<Wake> {
    let wake = if !holding {
        Some(wake(upstream, limits).await)
    } else if *read < MAX_BATCH_EVENTS {
        ready(upstream, limits).await
    } else {
        None
    };
    *read += usize::from(wake.is_some());
    wake
}

/// What `upstream` has ready now, without waiting: `None` when it has nothing yet, or when a
/// stop is due (shutdown, cancel, deadline), which [`wake`] then reports first.
pub(super) async fn ready(upstream: &mut UpstreamSse, limits: &PumpLimits) -> Option<Wake> {
    if *limits.shutdown.borrow()
        || *limits.cancel.borrow()
        || tokio::time::Instant::now() >= limits.deadline
    {
        return None;
    }
    let polled = std::future::poll_fn(|cx| Poll::Ready(upstream.poll_next_unpin(cx))).await;
    match polled {
        Poll::Ready(item) => Some(woken(item)),
        Poll::Pending => None,
    }
}

/// Runs `step` (a gateway step between upstream rounds) unless the gateway shuts down or the
/// response is cancelled first.
pub(in crate::http::responses) async fn interruptible<F: Future>(
    limits: &mut PumpLimits,
    step: F,
) -> Result<F::Output, Stop> {
    tokio::select! {
        biased;
        () = wait_for(&mut limits.shutdown) => Err(Stop::Shutdown),
        () = wait_for(&mut limits.cancel) => Err(Stop::Cancelled),
        output = step => Ok(output),
    }
}

/// The next upstream event, or [`Wake::Silence`] when none came within `keepalive`.
async fn next_or_silence(
    upstream: &mut UpstreamSse,
    keepalive: Option<std::time::Duration>,
) -> Wake {
    let item = match keepalive {
        None => upstream.next().await,
        Some(limit) => match tokio::time::timeout(limit, upstream.next()).await {
            Ok(item) => item,
            Err(_) => return Wake::Silence,
        },
    };
    woken(item)
}

/// What one item of `upstream` (or its end) means to the pump.
fn woken(item: Option<Result<Chunk, sse_stream::Error>>) -> Wake {
    match item {
        Some(Ok(Chunk::Event(event))) => Wake::Event(event),
        Some(Ok(Chunk::Skipped)) => Wake::Skipped,
        Some(Err(e)) => {
            let (code, message) = stream_failure(&e);
            Wake::Broken(code, message)
        }
        None => Wake::Ended,
    }
}

/// The terminal code and message of an upstream body that broke.
fn stream_failure(e: &sse_stream::Error) -> (&'static str, String) {
    if let sse_stream::Error::Body(inner) = e
        && let Some(inner) = inner.downcast_ref::<StreamError>()
    {
        return (
            "server_error",
            match inner {
                StreamError::Idle | StreamError::TooLong => inner.to_string(),
                StreamError::Http(_) => format!("the upstream stream broke: {inner}"),
            },
        );
    }
    (
        "server_error",
        format!("the upstream stream could not be read: {e}"),
    )
}

/// Resolves once `signal` is true; never, when its sender is gone (no stop will ever come).
pub(in crate::http::responses) async fn wait_for(signal: &mut watch::Receiver<bool>) {
    loop {
        if *signal.borrow_and_update() {
            return;
        }
        if signal.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;

    /// An upstream that has `n` events (`data: 0` …) ready at once, then nothing more.
    fn burst(n: usize) -> UpstreamSse {
        let text: String = (0..n).map(|i| format!("data: {i}\n\n")).collect();
        let bytes = futures::stream::iter([Ok::<_, StreamError>(Bytes::from(text))])
            .chain(futures::stream::pending());
        crate::http::responses::dispatch::chunks::events(bytes)
    }

    fn limits() -> (PumpLimits, watch::Sender<bool>) {
        let (_, shutdown) = watch::channel(false);
        let (cancel_tx, cancel) = watch::channel(false);
        let limits = PumpLimits {
            keepalive: None,
            deadline: tokio::time::Instant::now() + std::time::Duration::from_secs(60),
            shutdown,
            cancel,
        };
        (limits, cancel_tx)
    }

    fn data(wake: Option<Wake>) -> Option<String> {
        match wake {
            Some(Wake::Event(event)) => event.data,
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_batch_takes_what_is_ready_up_to_its_bound_and_never_passes_a_stop() {
        let (mut limits, cancel) = limits();
        let mut upstream = burst(MAX_BATCH_EVENTS + 4);
        let mut read = 0;
        // Holding nothing, a step waits for its first event.
        let first = batched(&mut upstream, &mut limits, false, &mut read).await;
        assert_eq!(data(first).as_deref(), Some("0"));
        // Holding frames, it takes what is ready, in order, up to the bound.
        for i in 1..MAX_BATCH_EVENTS {
            let next = batched(&mut upstream, &mut limits, true, &mut read).await;
            assert_eq!(data(next), Some(i.to_string()));
        }
        assert!(
            batched(&mut upstream, &mut limits, true, &mut read)
                .await
                .is_none(),
            "the bound ends the batch"
        );
        // The next step goes on where this one stopped.
        let mut read = 0;
        let next = batched(&mut upstream, &mut limits, false, &mut read).await;
        assert_eq!(data(next), Some(MAX_BATCH_EVENTS.to_string()));
        // A cancel is not passed over by a ready event: the batch ends, the wait reports it.
        cancel.send_replace(true);
        assert!(
            batched(&mut upstream, &mut limits, true, &mut read)
                .await
                .is_none()
        );
        let stop = batched(&mut upstream, &mut limits, false, &mut read).await;
        assert!(matches!(stop, Some(Wake::Stop(Stop::Cancelled))));
    }

    #[tokio::test]
    async fn a_batch_ends_when_the_upstream_has_nothing_ready() {
        let (mut limits, _cancel) = limits();
        let mut upstream = burst(1);
        let mut read = 0;
        let first = batched(&mut upstream, &mut limits, false, &mut read).await;
        assert_eq!(data(first).as_deref(), Some("0"));
        assert!(
            batched(&mut upstream, &mut limits, true, &mut read)
                .await
                .is_none()
        );
        assert_eq!(read, 1);
    }

    #[tokio::test]
    async fn a_stop_interrupts_a_gateway_step_and_names_its_terminal_failure() {
        let (stop_tx, shutdown) = watch::channel(false);
        let (_cancel_tx, cancel) = watch::channel(false);
        let mut limits = PumpLimits {
            keepalive: None,
            deadline: tokio::time::Instant::now() + std::time::Duration::from_secs(60),
            shutdown,
            cancel,
        };
        let _ = stop_tx.send(true);
        let stopped = interruptible(&mut limits, std::future::pending::<()>()).await;
        assert_eq!(stopped, Err(Stop::Shutdown));
        assert_eq!(
            Stop::Shutdown.failure().map(|f| f.0),
            Some("server_shutting_down")
        );
        assert_eq!(Stop::Deadline.failure().map(|f| f.0), Some("server_error"));
        assert_eq!(Stop::Cancelled.failure(), None);
    }
}
