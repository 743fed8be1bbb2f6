//! The server's own limits on slow and greedy clients, so that no proxy in front is needed for
//! them: the `[server]` config section, the request body's read deadline, and the refusal of a
//! `Content-Length` over the body limit from the header alone.
//!
//! The connection-level limits (header and idle timeouts, the connection cap) are enforced by
//! the accept loop in `accept`; this module holds their settings and the two limits
//! that act on a request: [`DeadlineBody`] (the body must arrive within
//! `body_read_timeout_secs` of its head) and [`refuse_oversized`] (a declared length over
//! `body_limit_bytes` is a 413 before a byte of the body is read). Not here: the body limit
//! itself while a body streams in, which axum's `DefaultBodyLimit` applies (see
//! the router, `http`).

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::header;
use http_body::{Body, Frame, SizeHint};
use serde::Deserialize;

use crate::error::{BodyTimedOut, ConfigError, GatewayError};

/// `[server]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFile {
    /// Seconds a client has to send a request's whole head (request line and headers), from
    /// its first byte, or from the connection's opening for its first request. Default 10.
    pub header_read_timeout_secs: Option<u64>,
    /// Seconds a kept-alive connection may wait, with no request in flight and no byte of a
    /// new one, before it is closed. Default 75: longer than a proxy's usual upstream
    /// keep-alive (nginx's 60 s), so the proxy closes first and never sends on a connection
    /// the gateway is closing.
    pub idle_timeout_secs: Option<u64>,
    /// Seconds a request's body has to arrive in full, from the end of its head. Default 60.
    pub body_read_timeout_secs: Option<u64>,
    /// The most client connections open at once; past it, new connections wait in the
    /// listen backlog until one closes. Default 4096. An upgraded WebSocket gives its slot back:
    /// sockets are counted by the caps below instead.
    pub max_connections: Option<usize>,
    /// Seconds a WebSocket may stay open with no response in flight and no `response.create`
    /// frame (pings do not count), before the gateway closes it (1001). Default 900: longer
    /// than a person reads and types between Codex turns; Codex opens a new socket next turn.
    pub websocket_idle_timeout_secs: Option<u64>,
    /// Seconds a WebSocket may stay open at most. Default 3600 (the Responses API's limit).
    pub websocket_max_lifetime_secs: Option<u64>,
    /// WebSockets open at once, in all. Default 1024.
    pub max_websockets: Option<usize>,
    /// WebSockets open at once per gateway key (all keyless clients share one). Default 64.
    pub max_websockets_per_key: Option<usize>,
    /// WebSockets open at once per tenant. Default 256.
    pub max_websockets_per_tenant: Option<usize>,
    /// Responses in flight at once on one key's WebSockets, together. Default 32.
    pub max_websocket_responses_per_key: Option<usize>,
    /// Responses in flight at once on one tenant's WebSockets, together. Default 128.
    pub max_websocket_responses_per_tenant: Option<usize>,
}

/// The resolved `[server]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub body_read_timeout: Duration,
    pub max_connections: usize,
    pub websocket_idle_timeout: Duration,
    pub websocket_max_lifetime: Duration,
    pub max_websockets: usize,
    pub max_websockets_per_key: usize,
    pub max_websockets_per_tenant: usize,
    pub max_websocket_responses_per_key: usize,
    pub max_websocket_responses_per_tenant: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            body_read_timeout: Duration::from_secs(60),
            max_connections: 4096,
            websocket_idle_timeout: Duration::from_secs(900),
            websocket_max_lifetime: Duration::from_secs(3600),
            max_websockets: 1024,
            max_websockets_per_key: 64,
            max_websockets_per_tenant: 256,
            max_websocket_responses_per_key: 32,
            max_websocket_responses_per_tenant: 128,
        }
    }
}

impl ServerLimits {
    /// Resolves `[server]`: absent keys take the defaults; zero is refused (a limit of zero
    /// would close every connection, and "no limit" is what this section exists to prevent).
    pub fn from_file(file: &ServerFile) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let secs = |value: Option<u64>, default: Duration, field: &str| match value {
            None => Ok(default),
            Some(0) => Err(ConfigError::invalid(
                format!("server.{field}"),
                "must be at least 1",
            )),
            Some(secs) => Ok(Duration::from_secs(secs)),
        };
        let count = |value: Option<usize>, default: usize, field: &str| match value {
            None => Ok(default),
            Some(0) => Err(ConfigError::invalid(
                format!("server.{field}"),
                "must be at least 1",
            )),
            Some(n) => Ok(n),
        };
        Ok(Self {
            max_connections: count(
                file.max_connections,
                defaults.max_connections,
                "max_connections",
            )?,
            websocket_idle_timeout: secs(
                file.websocket_idle_timeout_secs,
                defaults.websocket_idle_timeout,
                "websocket_idle_timeout_secs",
            )?,
            websocket_max_lifetime: secs(
                file.websocket_max_lifetime_secs,
                defaults.websocket_max_lifetime,
                "websocket_max_lifetime_secs",
            )?,
            max_websockets: count(
                file.max_websockets,
                defaults.max_websockets,
                "max_websockets",
            )?,
            max_websockets_per_key: count(
                file.max_websockets_per_key,
                defaults.max_websockets_per_key,
                "max_websockets_per_key",
            )?,
            max_websockets_per_tenant: count(
                file.max_websockets_per_tenant,
                defaults.max_websockets_per_tenant,
                "max_websockets_per_tenant",
            )?,
            max_websocket_responses_per_key: count(
                file.max_websocket_responses_per_key,
                defaults.max_websocket_responses_per_key,
                "max_websocket_responses_per_key",
            )?,
            max_websocket_responses_per_tenant: count(
                file.max_websocket_responses_per_tenant,
                defaults.max_websocket_responses_per_tenant,
                "max_websocket_responses_per_tenant",
            )?,
            header_read_timeout: secs(
                file.header_read_timeout_secs,
                defaults.header_read_timeout,
                "header_read_timeout_secs",
            )?,
            idle_timeout: secs(
                file.idle_timeout_secs,
                defaults.idle_timeout,
                "idle_timeout_secs",
            )?,
            body_read_timeout: secs(
                file.body_read_timeout_secs,
                defaults.body_read_timeout,
                "body_read_timeout_secs",
            )?,
        })
    }

    /// What `toolbridge check` prints.
    pub fn describe(&self) -> String {
        format!(
            "server: header read timeout {} s, idle timeout {} s, body read timeout {} s, at most {} connections\n\
             websockets: at most {} open ({} per key, {} per tenant), {} responses in flight per key ({} per tenant), idle timeout {} s, lifetime {} s\n",
            self.header_read_timeout.as_secs(),
            self.idle_timeout.as_secs(),
            self.body_read_timeout.as_secs(),
            self.max_connections,
            self.max_websockets,
            self.max_websockets_per_key,
            self.max_websockets_per_tenant,
            self.max_websocket_responses_per_key,
            self.max_websocket_responses_per_tenant,
            self.websocket_idle_timeout.as_secs(),
            self.websocket_max_lifetime.as_secs(),
        )
    }
}

/// The refusal of a request whose `Content-Length` is over the body limit (a 413), decided
/// before any of its body is read: a client announcing 10 GB gets its answer at once, and
/// hyper closes the connection instead of draining it. A body without a length is limited
/// while it streams.
pub(crate) fn refuse_oversized(
    headers: &axum::http::HeaderMap,
    limit: usize,
) -> Option<GatewayError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())?;
    (declared > limit as u64).then_some(GatewayError::BodyTooLarge { limit })
}

/// A request body that fails with [`BodyTimedOut`] when it is not complete by its deadline.
/// The deadline runs from the end of the head, whether or not anyone is reading yet, so a
/// handler that reads late does not extend it.
pub(crate) struct DeadlineBody<B> {
    inner: B,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    done: bool,
}

impl<B> DeadlineBody<B> {
    pub(crate) fn new(inner: B, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            done: false,
        }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(frame)) => Poll::Ready(Some(frame.map_err(Into::into))),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.done = true;
                    Poll::Ready(Some(Err(Box::new(BodyTimedOut(this.timeout)))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
