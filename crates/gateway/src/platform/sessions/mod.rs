//! The session side channel: tool and response progress for everyone watching a session, over
//! `GET /v1/sessions/{session_id}/events` (SSE).
//!
//! Requests carrying a session id (Codex's `session-id` header, or `x-session-id`) publish
//! [`SessionEvent`]s on the [`EventBus`]; subscribers of that session receive them in order. The
//! bus is in-process by default (a tokio broadcast channel per watched session) or Redis pub/sub
//! (`[sessions] redis_url`), so that a subscriber connected to any gateway process sees the
//! events of requests running on any other. Sessions belong to tenants: a subscriber sees only
//! the sessions of its own key's tenant (the bus name of a session includes the tenant, in
//! process and on Redis), so two teams using the same session id never see each other's events.
//!
//! This module owns the event vocabulary (`event`), session id validation and the bus (the
//! route is `http::sessions`). It does not decide *when* events are published: the
//! `/v1/responses` handler and the tool loop do.
//!
//! *Architecture invariant*: publishing never blocks and never fails a request. An event nobody
//! watches is dropped at once; a full queue drops the event with a log line; a subscriber that
//! falls behind receives one `stream.lagged` marker and is disconnected, never waited for.

mod event;
mod local;
mod redis_bus;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use http::HeaderMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use toolbridge_store::Tenant;

use crate::config::SessionsConfig;

pub use event::{MediaRef, ResponseInfo, SessionEvent, ToolInfo};

/// The longest session id accepted.
pub(crate) const MAX_SESSION_ID_LEN: usize = 128;
/// The longest id, tool name or server label carried in an event (longer ones are clipped).
pub(crate) const MAX_NAME_LEN: usize = 256;
/// The longest `detail` or `error` carried in an event (longer ones are clipped).
pub(crate) const MAX_DETAIL_LEN: usize = 1024;
/// The most base64 carried in an event's media (a larger image is left to its reference).
pub(crate) const MAX_MEDIA_B64: usize = 8 * 1024;

/// Checks a session id: 1 to 128 characters of `[A-Za-z0-9._:-]`.
pub(crate) fn validate_session_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("the session id must not be empty".to_owned());
    }
    if id.len() > MAX_SESSION_ID_LEN {
        return Err(format!(
            "the session id is {} characters long; at most {MAX_SESSION_ID_LEN} are allowed",
            id.len()
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(format!(
            "the session id contains {c:?}; only letters, digits and `._:-` are allowed"
        ));
    }
    Ok(())
}

/// The session a request belongs to: Codex's `session-id` header, else `x-session-id`. A value
/// that is not a valid session id is ignored (the request goes on without a side channel).
pub(crate) fn session_id_from_headers(headers: &HeaderMap) -> Option<String> {
    ["session-id", "x-session-id"].into_iter().find_map(|name| {
        let value = headers.get(name)?.to_str().ok()?.trim();
        match validate_session_id(value) {
            Ok(()) => Some(value.to_owned()),
            Err(e) => {
                tracing::debug!(header = name, "session header ignored: {e}");
                None
            }
        }
    })
}

/// Why a subscription could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscribeError {
    #[error("the session id is invalid: {0}")]
    InvalidSessionId(String),
    #[error("too many sessions are watched on this gateway (at most {0}); try again later")]
    TooManySessions(usize),
    #[error("too many session event subscribers on this gateway (at most {0}); try again later")]
    TooManySubscribers(usize),
    #[error("the session event backend is unavailable: {0}")]
    Unavailable(String),
}

enum Backend {
    Local(local::LocalBus),
    /// Boxed: the Redis client's connection info is large.
    Redis(Box<redis_bus::RedisBus>),
}

/// Where session events go. Cheap to clone; one per process, in the application state.
#[derive(Clone)]
pub struct EventBus {
    backend: Arc<Backend>,
    /// Bounds concurrent subscribers (each holds a connection, and on Redis a second one).
    subscribers: Arc<Semaphore>,
    max_subscribers: usize,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("backend", &self.backend_name())
            .field("max_subscribers", &self.max_subscribers)
            .finish_non_exhaustive()
    }
}

impl EventBus {
    /// The bus `config` describes; connects to Redis when it names one.
    pub async fn from_config(config: &SessionsConfig) -> Result<Self, String> {
        let backend = match &config.redis_url {
            None => Backend::Local(local::LocalBus::new(config.max_sessions, config.buffer)),
            Some(url) => Backend::Redis(Box::new(
                redis_bus::RedisBus::connect(url, &config.channel_prefix, config.buffer).await?,
            )),
        };
        Ok(Self::with_backend(backend, config.max_subscribers))
    }

    /// An in-process bus.
    pub fn in_process(max_sessions: usize, buffer: usize, max_subscribers: usize) -> Self {
        Self::with_backend(
            Backend::Local(local::LocalBus::new(max_sessions, buffer)),
            max_subscribers,
        )
    }

    fn with_backend(backend: Backend, max_subscribers: usize) -> Self {
        Self {
            backend: Arc::new(backend),
            subscribers: Arc::new(Semaphore::new(max_subscribers)),
            max_subscribers,
        }
    }

    /// `in-process` or `redis`.
    pub fn backend_name(&self) -> &'static str {
        match &*self.backend {
            Backend::Local(_) => "in-process",
            Backend::Redis(_) => "redis",
        }
    }

    /// Sends `event` to `tenant`'s subscribers of `session_id`, stamped with that session and
    /// clipped to its bounds. Never blocks and never fails: problems are logged and the event
    /// dropped.
    pub fn publish(&self, tenant: &Tenant, session_id: &str, mut event: SessionEvent) {
        if let Err(e) = validate_session_id(session_id) {
            tracing::debug!("session event not published: {e}");
            return;
        }
        if matches!(event, SessionEvent::StreamLagged { .. }) {
            return;
        }
        event.prepare(session_id);
        let channel = channel_key(tenant, session_id);
        match &*self.backend {
            Backend::Local(bus) => bus.publish(&channel, event),
            Backend::Redis(bus) => bus.publish(&channel, &event),
        }
    }

    /// Starts receiving the events of `tenant`'s `session_id` published from now on.
    pub async fn subscribe(
        &self,
        tenant: &Tenant,
        session_id: &str,
    ) -> Result<Subscription, SubscribeError> {
        validate_session_id(session_id).map_err(SubscribeError::InvalidSessionId)?;
        let permit = Arc::clone(&self.subscribers)
            .try_acquire_owned()
            .map_err(|_| SubscribeError::TooManySubscribers(self.max_subscribers))?;
        let channel = channel_key(tenant, session_id);
        let events: EventStream = match &*self.backend {
            Backend::Local(bus) => Box::pin(bus.subscribe(&channel)?),
            Backend::Redis(bus) => Box::pin(bus.subscribe(&channel).await?),
        };
        Ok(Subscription {
            events,
            _permit: permit,
        })
    }
}

type EventStream = Pin<Box<dyn Stream<Item = SessionEvent> + Send>>;

/// The backends' name for `tenant`'s session `session_id` (the in-process map key, the Redis
/// channel after its prefix): the tenant's length, the tenant and the session id, so no two
/// (tenant, session) pairs share a name whatever the tenant's characters. An admin key
/// watches its own tenant's sessions only: the side channel is live traffic, not support
/// reading stored data.
fn channel_key(tenant: &Tenant, session_id: &str) -> String {
    format!("{}:{}:{session_id}", tenant.name().len(), tenant.name())
}

/// The events of one session, in publication order. Ends after a `stream.lagged` marker when
/// the subscriber fell behind, or when the backend's connection is lost.
pub struct Subscription {
    events: EventStream,
    _permit: OwnedSemaphorePermit,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl Stream for Subscription {
    type Item = SessionEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<SessionEvent>> {
        self.events.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests;
