//! Final writes the store refused while it was down, kept and written again once it is back.
//!
//! A stored response whose final write fails is answered `store: false` (the durability rule,
//! `persist`), but its `in_progress` record may already be in the store: left there, `GET`
//! would answer `in_progress` for good and a chain could name it. Its final record goes to
//! [`LateFinals`] instead, a bounded queue one task drains: it writes the oldest record again
//! and again (backing off while the store is down) until the store takes it, then the next.
//! The response then reads as it ended (a client told `store: false` did not count on it).
//!
//! *Bounds:* at most [`MAX_RECORDS`] records and [`MAX_BYTES`] bytes wait; past either the
//! oldest is given up (logged and counted), and its record is then failed by this process's
//! sweep of its own orphans (`launch`), which skips the responses still in flight here and
//! those waiting in this queue. A record the store refuses for a reason that is not an outage
//! (a conflict, a body it cannot keep) is given up the same way. At shutdown the queue is not
//! drained: the next process to start fails what this one left `in_progress`.
//!
//! Not here: the first write and the answer's marking (`persist`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::counter;
use tokio::sync::Notify;
use toolbridge_store::{ResponseRecord, ResponseStore, Tenant};

use crate::platform::ops::metrics::names;

/// Records waiting, at most.
pub(crate) const MAX_RECORDS: usize = 1024;
/// Bytes of records waiting, at most.
pub(crate) const MAX_BYTES: usize = 64 << 20;
/// The first pause after a failed retry; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// One final record waiting for the store.
struct Late {
    tenant: Tenant,
    record: ResponseRecord,
    /// Written only over an unfinished record (a background run's: never over its cancel).
    guarded: bool,
    request_id: String,
    size: usize,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Late>,
    bytes: usize,
}

/// The final records waiting for the store, and the signal that one arrived.
#[derive(Default)]
pub(crate) struct LateFinals {
    queue: Mutex<Queue>,
    arrived: Notify,
}

impl LateFinals {
    /// Keeps `record` (of `tenant`) for a later write, giving up the oldest records past the
    /// bounds.
    pub(crate) fn keep(
        &self,
        tenant: Tenant,
        record: ResponseRecord,
        guarded: bool,
        request_id: &str,
    ) {
        let size = record.size();
        {
            let Ok(mut queue) = self.queue.lock() else {
                return;
            };
            queue.bytes += size;
            queue.waiting.push_back(Late {
                tenant,
                record,
                guarded,
                request_id: request_id.to_owned(),
                size,
            });
            while queue.waiting.len() > MAX_RECORDS || queue.bytes > MAX_BYTES {
                let Some(oldest) = queue.waiting.pop_front() else {
                    break;
                };
                queue.bytes -= oldest.size;
                given_up(&oldest, "too many final writes are waiting for the store");
            }
        }
        counter!(names::STORE_LATE_FINALS, "outcome" => "kept").increment(1);
        self.arrived.notify_one();
    }

    /// Whether response `id` waits here.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.queue
            .lock()
            .is_ok_and(|q| q.waiting.iter().any(|late| late.record.id() == id))
    }

    /// Records waiting.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.lock().map_or(0, |q| q.waiting.len())
    }

    /// Writes the waiting records, oldest first, until the process ends. Each write is bounded
    /// by the store's own deadline; while the store is down the pause between tries doubles up
    /// to [`MAX_PAUSE`].
    pub(crate) async fn drain(self: Arc<Self>, store: Arc<dyn ResponseStore>) {
        let mut pause = FIRST_PAUSE;
        loop {
            let Some(next) = self.oldest() else {
                self.arrived.notified().await;
                continue;
            };
            let written = if next.guarded {
                store
                    .put_record_unless_final(&next.tenant, next.record.clone())
                    .await
                    .map(|_| ())
            } else {
                store.put_record(&next.tenant, next.record.clone()).await
            };
            match written {
                Ok(()) => {
                    pause = FIRST_PAUSE;
                    tracing::info!(
                        request_id = next.request_id,
                        response_id = next.record.id(),
                        "a final write the store refused earlier landed"
                    );
                    counter!(names::STORE_LATE_FINALS, "outcome" => "written").increment(1);
                    self.forget(next.record.id());
                }
                Err(e) if e.is_outage() => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Err(e) => {
                    given_up(&next, &e.to_string());
                    self.forget(next.record.id());
                }
            }
        }
    }

    /// A copy of the oldest waiting record (it stays queued until written).
    fn oldest(&self) -> Option<Late> {
        let queue = self.queue.lock().ok()?;
        queue.waiting.front().map(|late| Late {
            tenant: late.tenant.clone(),
            record: late.record.clone(),
            guarded: late.guarded,
            request_id: late.request_id.clone(),
            size: late.size,
        })
    }

    /// Removes response `id`'s record (written or given up); one given up while it was being
    /// written is gone already.
    fn forget(&self, id: &str) {
        if let Ok(mut queue) = self.queue.lock()
            && let Some(at) = queue.waiting.iter().position(|l| l.record.id() == id)
            && let Some(late) = queue.waiting.remove(at)
        {
            queue.bytes -= late.size;
        }
    }
}

fn given_up(late: &Late, why: &str) {
    tracing::error!(
        request_id = late.request_id,
        response_id = late.record.id(),
        "a response's final write is given up ({why}); the sweep of this process's orphans will mark it failed"
    );
    counter!(names::STORE_LATE_FINALS, "outcome" => "given_up").increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, text_len: usize) -> ResponseRecord {
        let body = serde_json::json!({
            "id": id, "object": "response", "created_at": 1, "status": "completed",
            "model": "m", "output": [], "text": "x".repeat(text_len),
        });
        ResponseRecord::from_json(body.to_string(), &[], None).unwrap()
    }

    #[test]
    fn the_oldest_records_are_given_up_past_the_bounds() {
        let late = LateFinals::default();
        for n in 0..MAX_RECORDS + 3 {
            late.keep(Tenant::open(), record(&format!("resp_{n}"), 1), false, "r");
        }
        assert_eq!(late.len(), MAX_RECORDS);
        assert!(!late.holds("resp_2"));
        assert!(late.holds("resp_3"));
        let big = MAX_BYTES / 3;
        for n in 0..4 {
            late.keep(Tenant::open(), record(&format!("big_{n}"), big), false, "r");
        }
        assert!(late.queue.lock().unwrap().bytes <= MAX_BYTES);
        assert!(!late.holds("big_0"));
        assert!(late.holds("big_3"));
    }
}
