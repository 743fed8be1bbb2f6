//! Stored responses in flight in this process, and the streams their clients left.
//!
//! [`InFlight`] maps a response id to the handle that cancels it, so `POST
//! /v1/responses/{id}/cancel` stops a foreground response (streamed or whole) running here at
//! once, as it stops a background run; the store's guarded write keeps a cancel landing on
//! another process from being undone. `GET /v1/responses/{id}` of a response registered here
//! but not in the store yet answers its start. An entry lives as long as its [`Registration`],
//! which the response's pump holds: it goes when the response ends, however it ends.
//!
//! [`Drains`] counts the tasks that finish a stream after its client went away (see
//! `responses::emit::detach`), so shutdown waits for them: a drained run ends stored (completed,
//! cancelled, or failed at the forced stop), never left `in_progress`.
//!
//! Not here: what a cancel does to a response (the pumps end it `cancelled`), or to the stored
//! record (the store's `cancel`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, watch};

/// At most this many responses are registered; past it a response runs unregistered (a cancel
/// still lands in the store, and the response's final write does not undo it).
const MAX_IN_FLIGHT: usize = 65_536;

/// At most this many streams are finished after their clients left; past it a left stream is
/// cancelled instead.
pub(crate) const MAX_DRAINS: usize = 1024;

/// The cancel signal of one response: turns true once.
pub(crate) type CancelSignal = Arc<watch::Sender<bool>>;

/// One response in flight.
struct Entry {
    /// Who may cancel it: the name of the tenant that made it (`""` without keys).
    owner: String,
    cancel: CancelSignal,
    /// The response as it started (`in_progress`), for a cancel of one not yet in the store;
    /// serialised only then.
    started: Box<toolbridge_wire::responses::Response>,
}

/// Responses in flight in this process, by id.
#[derive(Default)]
pub(crate) struct InFlight {
    entries: Mutex<HashMap<String, Entry>>,
}

/// A response's place in [`InFlight`], removed when dropped.
pub(crate) struct Registration {
    registry: Arc<InFlight>,
    id: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut entries) = self.registry.entries.lock() {
            entries.remove(&self.id);
        }
    }
}

/// What a cancel found in flight.
pub(crate) struct Cancelled {
    /// The response as it started, status set to `cancelled`.
    pub response: serde_json::Value,
}

impl InFlight {
    /// Registers response `started` (its `in_progress` object), owned by tenant `owner`; the
    /// signal a cancel sends. `None` for the registration past `MAX_IN_FLIGHT` (65 536).
    pub(crate) fn register(
        self: &Arc<Self>,
        owner: String,
        started: Box<toolbridge_wire::responses::Response>,
    ) -> (Option<Registration>, CancelSignal) {
        let (tx, _) = watch::channel(false);
        let cancel = Arc::new(tx);
        let Ok(mut entries) = self.entries.lock() else {
            return (None, cancel);
        };
        if entries.len() >= MAX_IN_FLIGHT {
            tracing::warn!(
                limit = MAX_IN_FLIGHT,
                "too many responses in flight to register another; it cannot be cancelled here"
            );
            return (None, cancel);
        }
        let id = started.id.clone();
        entries.insert(
            id.clone(),
            Entry {
                owner,
                cancel: cancel.clone(),
                started,
            },
        );
        let registration = Registration {
            registry: self.clone(),
            id,
        };
        (Some(registration), cancel)
    }

    /// Response `id` as it started (`in_progress`) when it runs here and belongs to tenant
    /// `owner`: what `GET` answers for a response not in the store yet (a whole answer is
    /// stored at its end).
    pub(crate) fn started(&self, id: &str, owner: &str) -> Option<serde_json::Value> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.get(id).filter(|e| e.owner == owner)?;
        serde_json::to_value(&*entry.started).ok()
    }

    /// Whether response `id` runs here (whoever's it is): the sweep of this process's orphans
    /// leaves it alone.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.entries.lock().is_ok_and(|e| e.contains_key(id))
    }

    /// Cancels response `id` when it runs here and belongs to tenant `owner` (an admin cancels
    /// only its own too); `None` otherwise, exactly as for an id that is not here.
    pub(crate) fn cancel(&self, id: &str, owner: &str) -> Option<Cancelled> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.get(id).filter(|e| e.owner == owner)?;
        entry.cancel.send_replace(true);
        let mut response = serde_json::to_value(&*entry.started).unwrap_or_default();
        if let Some(map) = response.as_object_mut() {
            map.insert("status".to_owned(), serde_json::json!("cancelled"));
        }
        Some(Cancelled { response })
    }
}

/// The tasks finishing streams whose clients left.
#[derive(Default)]
pub(crate) struct Drains {
    running: AtomicUsize,
    ended: Notify,
}

/// One draining task's place in [`Drains`], given back when dropped.
pub(crate) struct DrainTicket {
    drains: Arc<Drains>,
}

impl Drop for DrainTicket {
    fn drop(&mut self) {
        self.drains.running.fetch_sub(1, Ordering::AcqRel);
        self.drains.ended.notify_waiters();
    }
}

impl Drains {
    /// A place for one more task; `None` past [`MAX_DRAINS`].
    pub(crate) fn enter(self: &Arc<Self>) -> Option<DrainTicket> {
        let taken = self
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_DRAINS).then_some(n + 1)
            });
        taken.ok().map(|_| DrainTicket {
            drains: self.clone(),
        })
    }

    /// How many tasks run.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Waits until no task runs, for at most `limit`; false when some still ran then.
    pub(crate) async fn idle(&self, limit: std::time::Duration) -> bool {
        let wait = async {
            loop {
                let ended = self.ended.notified();
                if self.running() == 0 {
                    return;
                }
                ended.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }
}
