//! The Redis backend: pub/sub on `{channel_prefix}{session_id}` (by default
//! `toolbridge:session:{id}`), so any gateway process can serve a subscriber of a session whose
//! requests run on another process.
//!
//! Publishing goes through one bounded queue to one task per process, which sends what it finds
//! queued as one pipeline on a `ConnectionManager` (multiplexed, reconnecting): `publish` never
//! waits for Redis, and a full queue drops the event with a log line. Each subscriber gets its
//! own pub/sub connection, read by a small task into a bounded buffer: the Redis client buffers
//! without bound, so the task keeps reading and, when the subscriber's buffer is full, marks it
//! lagged and closes the connection instead of letting messages pile up. When a subscriber's
//! connection drops, the task subscribes again with back-off (from 100 ms, doubling to 5 s, for
//! at most 5 minutes) and then sends the subscriber `stream.reconnected`: events published
//! while it was away were missed. Past that window the subscriber's stream ends with the lag
//! marker, and it can reconnect itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::mpsc;

use super::{SessionEvent, SubscribeError};

/// Events waiting to be published, all sessions together.
const PUBLISH_QUEUE: usize = 8192;
/// The most events sent to Redis in one pipeline.
const PUBLISH_BATCH: usize = 256;
/// How long connecting to Redis and subscribing may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest message read from a session channel; a larger one is not ours and is skipped.
const MAX_PAYLOAD: usize = 16 * 1024;
/// The first wait before subscribing again after a lost connection; it doubles up to the cap.
const RESUBSCRIBE_FIRST: Duration = Duration::from_millis(100);
const RESUBSCRIBE_CAP: Duration = Duration::from_secs(5);
/// How long a subscriber's connection is tried again before its stream ends.
const RESUBSCRIBE_WINDOW: Duration = Duration::from_secs(300);

pub(super) struct RedisBus {
    client: redis::Client,
    queue: mpsc::Sender<(String, String)>,
    prefix: String,
    buffer: usize,
    dropped: AtomicU64,
}

impl RedisBus {
    /// Connects the publishing connection and starts its task; fails when Redis cannot be
    /// reached, so a misconfigured URL stops the gateway at start rather than losing events.
    pub(super) async fn connect(url: &str, prefix: &str, buffer: usize) -> Result<Self, String> {
        let client =
            redis::Client::open(url).map_err(|e| format!("invalid sessions.redis_url: {e}"))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(CONNECT_TIMEOUT));
        let manager = tokio::time::timeout(
            CONNECT_TIMEOUT * 2,
            client.get_connection_manager_with_config(config),
        )
        .await
        .map_err(|_| "cannot connect to the sessions Redis: timed out".to_owned())?
        .map_err(|e| format!("cannot connect to the sessions Redis: {e}"))?;
        let (queue, pending) = mpsc::channel(PUBLISH_QUEUE);
        // One task per process, ending when the bus (the queue's only sender) is dropped.
        tokio::spawn(publish_loop(manager, pending));
        Ok(Self {
            client,
            queue,
            prefix: prefix.to_owned(),
            buffer: buffer.max(1),
            dropped: AtomicU64::new(0),
        })
    }

    fn channel(&self, session_id: &str) -> String {
        format!("{}{session_id}", self.prefix)
    }

    pub(super) fn publish(&self, session_id: &str, event: &SessionEvent) {
        let payload = match serde_json::to_string(event) {
            Ok(payload) => payload,
            Err(e) => {
                tracing::warn!("session event not serialised: {e}");
                return;
            }
        };
        if let Err(e) = self.queue.try_send((self.channel(session_id), payload)) {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed);
            // One line per thousand drops: a stuck Redis must not flood the log either.
            if dropped.is_multiple_of(1000) {
                tracing::warn!(
                    dropped = dropped + 1,
                    "session event dropped, the Redis publish queue is {}",
                    match e {
                        mpsc::error::TrySendError::Full(_) => "full",
                        mpsc::error::TrySendError::Closed(_) => "closed",
                    }
                );
            }
        }
    }

    pub(super) async fn subscribe(
        &self,
        session_id: &str,
    ) -> Result<impl Stream<Item = SessionEvent> + Send + use<>, SubscribeError> {
        let unavailable = |e: String| {
            tracing::warn!("session subscription failed: {e}");
            SubscribeError::Unavailable(e)
        };
        let mut pubsub = tokio::time::timeout(CONNECT_TIMEOUT, self.client.get_async_pubsub())
            .await
            .map_err(|_| unavailable("connecting to Redis timed out".to_owned()))?
            .map_err(|e| unavailable(e.to_string()))?;
        tokio::time::timeout(CONNECT_TIMEOUT, pubsub.subscribe(self.channel(session_id)))
            .await
            .map_err(|_| unavailable("subscribing timed out".to_owned()))?
            .map_err(|e| unavailable(e.to_string()))?;
        let (sender, receiver) = mpsc::channel(self.buffer);
        let lagged = Arc::new(AtomicU64::new(0));
        // One task per subscriber, ending with it (or with the connection).
        tokio::spawn(forward(
            Resubscribe {
                client: self.client.clone(),
                channel: self.channel(session_id),
            },
            pubsub.into_on_message(),
            sender,
            Arc::clone(&lagged),
        ));
        Ok(futures::stream::unfold(
            Some((receiver, lagged)),
            |state| async move {
                let (mut receiver, lagged) = state?;
                match receiver.recv().await {
                    Some(event) => Some((event, Some((receiver, lagged)))),
                    None => match lagged.load(Ordering::Acquire) {
                        0 => None,
                        dropped => Some((SessionEvent::StreamLagged { dropped }, None)),
                    },
                }
            },
        ))
    }
}

/// Publishes what is queued, a pipeline at a time, until the bus is dropped.
async fn publish_loop(
    mut manager: ConnectionManager,
    mut pending: mpsc::Receiver<(String, String)>,
) {
    let mut batch = Vec::with_capacity(PUBLISH_BATCH);
    while pending.recv_many(&mut batch, PUBLISH_BATCH).await > 0 {
        let mut pipe = redis::pipe();
        for (channel, payload) in batch.drain(..) {
            pipe.cmd("PUBLISH").arg(channel).arg(payload).ignore();
        }
        if let Err(e) = pipe.query_async::<()>(&mut manager).await {
            tracing::warn!("publishing session events to Redis failed: {e}");
        }
    }
}

/// Moves one subscriber's messages into its bounded buffer. When the buffer is full the
/// subscriber is lagging: the count is recorded, the connection dropped, and the subscriber gets
/// the marker once it has read what was buffered.
async fn forward(
    again: Resubscribe,
    mut messages: redis::aio::PubSubStream,
    sender: mpsc::Sender<SessionEvent>,
    lagged: Arc<AtomicU64>,
) {
    loop {
        let message = tokio::select! {
            () = sender.closed() => return,
            message = messages.next() => message,
        };
        let Some(message) = message else {
            // The connection was lost: subscribe again, and tell the subscriber what it missed.
            match again.connect(&sender).await {
                Some(fresh) => {
                    messages = fresh;
                    match sender.try_send(SessionEvent::StreamReconnected {}) {
                        Ok(()) => continue,
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            lagged.store(1, Ordering::Release)
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => {}
                    }
                }
                None => lagged.store(1, Ordering::Release),
            }
            return;
        };
        let payload = message.get_payload_bytes();
        if payload.len() > MAX_PAYLOAD {
            tracing::debug!(bytes = payload.len(), "oversized session message skipped");
            continue;
        }
        let event = match serde_json::from_slice::<SessionEvent>(payload) {
            Ok(SessionEvent::StreamLagged { .. } | SessionEvent::StreamReconnected {}) => continue,
            Ok(event) => event,
            Err(e) => {
                // A newer gateway's event type, or something that is not ours.
                tracing::debug!("session message skipped: {e}");
                continue;
            }
        };
        match sender.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                lagged.store(1, Ordering::Release);
                return;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    }
}

/// What a subscriber's task needs to subscribe again.
struct Resubscribe {
    client: redis::Client,
    channel: String,
}

impl Resubscribe {
    /// A fresh subscription, tried with back-off; `None` when the subscriber went away or the
    /// window passed.
    async fn connect(
        &self,
        sender: &mpsc::Sender<SessionEvent>,
    ) -> Option<redis::aio::PubSubStream> {
        let give_up = tokio::time::Instant::now() + RESUBSCRIBE_WINDOW;
        let mut wait = RESUBSCRIBE_FIRST;
        loop {
            tokio::select! {
                () = sender.closed() => return None,
                () = tokio::time::sleep(wait) => {}
            }
            let attempt = tokio::time::timeout(CONNECT_TIMEOUT, async {
                let mut pubsub = self.client.get_async_pubsub().await?;
                pubsub.subscribe(&self.channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            });
            match attempt.await {
                Ok(Ok(pubsub)) => {
                    tracing::info!("session subscription restored after a lost Redis connection");
                    return Some(pubsub.into_on_message());
                }
                Ok(Err(e)) => tracing::debug!("subscribing again failed: {e}"),
                Err(_) => tracing::debug!("subscribing again timed out"),
            }
            if tokio::time::Instant::now() >= give_up {
                tracing::warn!("a session subscriber's Redis connection could not be restored");
                return None;
            }
            wait = (wait * 2).min(RESUBSCRIBE_CAP);
        }
    }
}
