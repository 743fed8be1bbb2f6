//! The accept loop: every client connection is counted against `max_connections`, served by
//! hyper (HTTP/1.1, or HTTP/2 with prior knowledge, as `axum::serve` did), and watched so that
//! a slow or idle client cannot hold it past the configured time.
//!
//! Per connection, a watchdog closes it when no request is in flight and either
//! - its next request's head is not complete within `header_read_timeout` of its first byte
//!   (of the connection's opening, for the first request), or
//! - no byte of a next request came within `idle_timeout` of the previous response's end.
//!
//! A request in flight is never cut by the watchdog: its body has its own deadline
//! ([`super::limits::DeadlineBody`]), and a response, however long it streams, ends by its own
//! means (the shutdown grace period included). hyper's own header timer stays set as a
//! backstop at the sum of both timeouts, which the watchdog always reaches first.
//!
//! Over the cap the loop stops accepting until a connection closes: new connections wait in
//! the kernel's listen backlog (bounded by the kernel) rather than being accepted and dropped,
//! so a burst is served late instead of refused. The timeouts above bound how long any
//! connection can keep its slot without sending requests.
//!
//! On shutdown the listener closes and every connection is asked to finish (hyper's graceful
//! shutdown: idle ones close at once, busy ones after their response); the loop returns when
//! all are closed, or at most `drain` later.
//!
//! A head hyper refuses by itself (a malformed `Content-Length`, a bad request line) is answered
//! by hyper before any route runs, with no body; the connection's socket puts OpenAI's JSON
//! error in its place (`Watched`), so that every error answer is JSON.
//!
//! A connection upgraded to a WebSocket leaves hyper, and so this loop's watch, once its `101`
//! is sent. Every request therefore carries a [`ConnectionHold`] in its extensions: the
//! upgraded socket keeps it for its whole life, so the drain waits for it and it hears when
//! shutdown begins (to close itself, since hyper no longer can). It gives its slot under the cap
//! back ([`ConnectionHold::give_back_slot`]): sockets have caps of their own (per key, per
//! tenant, in all, and an idle limit), so idle sockets cannot keep `/healthz` or another
//! client's request waiting for a slot.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use super::limits::{DeadlineBody, ServerLimits};

mod activity;
mod watched;

use activity::{Activity, InFlight, Tracked};
use watched::Watched;

/// Serves `service` on `listener` until `signal` resolves, then drains the connections for at
/// most `drain`.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    service: Router,
    limits: ServerLimits,
    drain: Duration,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Each connection holds a receiver of `open`; `closed()` resolves when the last one ends.
    let (open_tx, open_rx) = watch::channel(());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut signal = pin!(signal);
    loop {
        let slot = tokio::select! {
            () = &mut signal => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let tcp = tokio::select! {
            () = &mut signal => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        // Without TCP_NODELAY, every SSE event after the first few waits for the client's
        // delayed ACK (about 40 ms each on Linux): streams would crawl.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY: {e}");
        }
        tokio::spawn(connection(
            tcp,
            service.clone(),
            limits,
            ConnectionHold {
                held: Arc::new(Held {
                    slot: std::sync::Mutex::new(Some(slot)),
                    _open: open_rx.clone(),
                }),
                stopping: stop_rx.clone(),
            },
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_rx);
    if tokio::time::timeout(drain, open_tx.closed()).await.is_err() {
        tracing::warn!("connections still open after the drain period are dropped");
    }
    Ok(())
}

/// After an accept error: a client's own failure is skipped; anything else (out of file
/// descriptors, most often) is logged and waited out, as `axum::serve` does.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!("accepting a connection failed: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// What a connection holds until it ends: its slot under the cap (until it is upgraded to a
/// WebSocket) and its mark for the drain.
struct Held {
    slot: std::sync::Mutex<Option<OwnedSemaphorePermit>>,
    _open: watch::Receiver<()>,
}

/// A connection's hold on its slot and drain mark, and the shutdown signal; in every request's
/// extensions, for a connection that outlives hyper (an upgrade) to keep.
#[derive(Clone)]
pub(crate) struct ConnectionHold {
    held: Arc<Held>,
    /// Turns true when shutdown begins (the grace period starts).
    pub(crate) stopping: watch::Receiver<bool>,
}

impl ConnectionHold {
    /// Gives the connection's slot under `max_connections` back (an upgraded WebSocket, counted
    /// by the WebSocket caps instead); the drain mark stays. Over HTTP/2 the other streams of
    /// the same connection then run uncounted, bounded by hyper's stream limit.
    pub(crate) fn give_back_slot(&self) {
        if let Ok(mut slot) = self.held.slot.lock() {
            slot.take();
        }
    }
}

async fn connection(tcp: TcpStream, router: Router, limits: ServerLimits, hold: ConnectionHold) {
    let mut stop = hold.stopping.clone();
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched::new(tcp, activity.clone()));
    let body_timeout = limits.body_read_timeout;
    let requests = activity.clone();
    let request_hold = hold.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let guard = InFlight::begin(requests.clone());
        // A request without a body (most GETs) needs no deadline, nor its timer.
        let mut request: Request = request.map(|body| {
            if http_body::Body::is_end_stream(&body) {
                Body::new(body)
            } else {
                Body::new(DeadlineBody::new(body, body_timeout))
            }
        });
        request.extensions_mut().insert(request_hold.clone());
        let answer = router.clone().oneshot(request);
        async move {
            let response: Response = match answer.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| Body::new(Tracked::new(body, guard))))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(
            limits.header_read_timeout + limits.idle_timeout + Duration::from_secs(1),
        );
    // CONNECT protocol, as `axum::serve` enables it (HTTP/2 websockets).
    builder.http2().enable_connect_protocol();
    let mut conn = pin!(builder.serve_connection_with_upgrades(io, service));
    let mut watchdog = pin!(activity.watch(limits));
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::trace!("connection ended: {e}");
                }
                break;
            }
            expired = &mut watchdog => {
                tracing::debug!("closing a connection: {expired}");
                break;
            }
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
    drop(hold);
}
