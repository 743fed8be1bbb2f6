//! The in-process backend: one tokio broadcast channel per watched session.
//!
//! A channel exists only while the session has subscribers: it is created by the first
//! subscriber and removed when the last one leaves, so publishing to an unwatched session costs a
//! map lookup and nothing is kept. Both the number of channels (`max_sessions`) and each channel's
//! capacity (`buffer`) are bounded; broadcast overwrites the oldest event rather than waiting, so
//! a slow subscriber never slows the publisher — it sees `Lagged` and is disconnected.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::Stream;
use tokio::sync::broadcast;

use super::{SessionEvent, SubscribeError};

type Channels = HashMap<String, broadcast::Sender<SessionEvent>>;

pub(super) struct LocalBus {
    channels: Arc<Mutex<Channels>>,
    max_sessions: usize,
    buffer: usize,
}

/// The map is only ever held for a lookup, an insert or a removal; a panic while holding it
/// cannot leave it inconsistent, so a poisoned lock is still used.
fn lock(channels: &Mutex<Channels>) -> MutexGuard<'_, Channels> {
    channels.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LocalBus {
    pub(super) fn new(max_sessions: usize, buffer: usize) -> Self {
        Self {
            channels: Arc::default(),
            max_sessions: max_sessions.max(1),
            buffer: buffer.max(1),
        }
    }

    pub(super) fn publish(&self, session_id: &str, event: SessionEvent) {
        let channels = lock(&self.channels);
        if let Some(sender) = channels.get(session_id) {
            // An error only means every subscriber left in the meantime.
            let _ = sender.send(event);
        }
    }

    pub(super) fn subscribe(
        &self,
        session_id: &str,
    ) -> Result<impl Stream<Item = SessionEvent> + Send + use<>, SubscribeError> {
        let receiver = {
            let mut channels = lock(&self.channels);
            if !channels.contains_key(session_id) && channels.len() >= self.max_sessions {
                return Err(SubscribeError::TooManySessions(self.max_sessions));
            }
            channels
                .entry(session_id.to_owned())
                .or_insert_with(|| broadcast::channel(self.buffer).0)
                .subscribe()
        };
        let receiver = Receiver {
            receiver: Some(receiver),
            channels: Arc::clone(&self.channels),
            session_id: session_id.to_owned(),
        };
        Ok(futures::stream::unfold(
            Some(receiver),
            |state| async move {
                let mut receiver = state?;
                let inner = receiver.receiver.as_mut()?;
                match inner.recv().await {
                    Ok(event) => Some((event, Some(receiver))),
                    // The receiver is dropped with the state: the subscriber is disconnected.
                    Err(broadcast::error::RecvError::Lagged(dropped)) => {
                        Some((SessionEvent::StreamLagged { dropped }, None))
                    }
                    Err(broadcast::error::RecvError::Closed) => None,
                }
            },
        ))
    }
}

/// A broadcast receiver that removes its session's channel when it is the last one to leave.
struct Receiver {
    receiver: Option<broadcast::Receiver<SessionEvent>>,
    channels: Arc<Mutex<Channels>>,
    session_id: String,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // Dropped first, so the count below no longer includes it. A subscriber arriving
        // meanwhile subscribes under the lock, so it is counted and the channel stays.
        drop(self.receiver.take());
        let mut channels = lock(&self.channels);
        if channels
            .get(&self.session_id)
            .is_some_and(|sender| sender.receiver_count() == 0)
        {
            channels.remove(&self.session_id);
        }
    }
}

impl LocalBus {
    /// How many sessions have a channel now (tests and diagnostics).
    #[cfg(test)]
    pub(super) fn sessions(&self) -> usize {
        lock(&self.channels).len()
    }
}
