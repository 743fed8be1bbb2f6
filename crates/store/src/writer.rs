//! Group commit for SQLite: one writer task, response writes batched into one transaction,
//! each caller waiting only for the commit of the batch its write is in.
//!
//! SQLite has one writer at a time. When each request wrote in its own transaction on its own
//! pooled connection, concurrent writers met SQLite's busy handler, which *sleeps* (1, 2, 5 …
//! 100 ms) between retries of the lock: under load most of a stored request's time was spent
//! asleep, and its p99 was tens of milliseconds. Here a request hands its [`ResponseRecord`]
//! to a bounded queue and waits; the writer takes whatever is queued (at most [`MAX_BATCH`]),
//! writes each record under a savepoint of one `BEGIN IMMEDIATE` transaction (so one record's
//! failure, a conflict say, is rolled back alone), commits once, then answers every caller of
//! the batch. A caller is answered only after the commit its write is in: the durability rule
//! (`store: true` only once durable) holds exactly as before.
//!
//! Bounds: the queue holds [`QUEUE`] records; a caller finding it full waits for room, and that
//! wait, like the wait for its commit, is inside the caller's store deadline
//! ([`crate::guard`]), so overload is back-pressure that ends in `store_unavailable`, never
//! unbounded growth. A batch is bounded by the same deadline on the writer's side. A record
//! whose caller stopped waiting (deadline, client gone) before its batch began is skipped.
//!
//! The writer writes on the store's one write connection (`SqlStore::writes`), which the
//! store's other writes (cancel, delete, conversations, sweeps, keys) share: every write of
//! this process queues in order instead of racing for SQLite's lock.
//!
//! Not here: PostgreSQL, whose concurrent transactions write in parallel and whose server
//! already groups concurrent commits into one WAL flush (`put_direct`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::{Acquire, AnyPool};
use tokio::sync::{mpsc, oneshot};

use crate::responses::write_record;
use crate::{ResponseRecord, StoreError, Tenant};

/// Records waiting for the writer, at most.
pub(crate) const QUEUE: usize = 256;
/// Records in one transaction, at most.
pub(crate) const MAX_BATCH: usize = 64;

/// One record to write, and where its outcome goes.
struct Job {
    tenant: Tenant,
    record: ResponseRecord,
    unless_final: bool,
    done: oneshot::Sender<Result<bool, StoreError>>,
}

/// The handle of the writer task; the task ends when the last handle is dropped.
#[derive(Debug)]
pub(crate) struct Writer {
    queue: mpsc::Sender<Job>,
    /// Batches committed so far.
    #[cfg_attr(not(test), allow(dead_code))]
    batches: Arc<AtomicU64>,
}

impl Writer {
    /// Starts the writer task on the current runtime, writing through `pool` (the store's
    /// write pool) on behalf of process `instance`; `timeout` bounds each batch.
    pub(crate) fn start(pool: AnyPool, instance: String, timeout: Duration) -> Self {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let batches = Arc::new(AtomicU64::new(0));
        tokio::spawn(run(jobs, pool, instance, timeout, Arc::clone(&batches)));
        Self { queue, batches }
    }

    /// Batches committed so far.
    #[cfg(test)]
    pub(crate) fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Queues one record and waits for the commit of its batch: [`write_record`]'s outcome.
    /// The caller bounds the wait (the store's deadline).
    pub(crate) async fn write(
        &self,
        tenant: &Tenant,
        record: ResponseRecord,
        unless_final: bool,
    ) -> Result<bool, StoreError> {
        let (done, outcome) = oneshot::channel();
        let job = Job {
            tenant: tenant.clone(),
            record,
            unless_final,
            done,
        };
        self.queue
            .send(job)
            .await
            .map_err(|_| StoreError::Unavailable("the store's writer has stopped".to_owned()))?;
        outcome.await.map_err(|_| {
            StoreError::Unavailable("the store's writer stopped before the commit".to_owned())
        })?
    }
}

/// The writer task: a batch per turn, until every handle is gone.
async fn run(
    mut jobs: mpsc::Receiver<Job>,
    pool: AnyPool,
    instance: String,
    timeout: Duration,
    batches: Arc<AtomicU64>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while jobs.recv_many(&mut batch, MAX_BATCH).await > 0 {
        // Callers that stopped waiting are not written: they were told it was not stored.
        batch.retain(|job: &Job| !job.done.is_closed());
        if batch.is_empty() {
            continue;
        }
        let outcome = tokio::time::timeout(timeout, commit(&pool, &instance, &batch)).await;
        match outcome {
            Ok(Ok(results)) => {
                batches.fetch_add(1, Ordering::Relaxed);
                for (job, result) in batch.drain(..).zip(results) {
                    // A caller gone since has nothing to hear.
                    let _ = job.done.send(result);
                }
            }
            Ok(Err(e)) => answer_all(&mut batch, &format!("the batched commit failed: {e}")),
            Err(_) => answer_all(
                &mut batch,
                &format!(
                    "the batched commit did not finish within {} ms",
                    timeout.as_millis()
                ),
            ),
        }
        batch.clear();
    }
}

/// Tells every caller of a batch that failed as a whole (nothing of it was committed).
fn answer_all(batch: &mut Vec<Job>, message: &str) {
    for job in batch.drain(..) {
        let _ = job
            .done
            .send(Err(StoreError::Unavailable(message.to_owned())));
    }
}

/// Writes a batch in one transaction, each record under its own savepoint; the outcome of each
/// record, valid once this returns `Ok` (the commit succeeded).
async fn commit(
    pool: &AnyPool,
    instance: &str,
    batch: &[Job],
) -> Result<Vec<Result<bool, StoreError>>, StoreError> {
    // IMMEDIATE: the write lock is taken now (waiting out another process's, under the busy
    // timeout) rather than at the first write.
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    if let [job] = batch {
        // Alone in its batch: the transaction is its savepoint.
        let result = write_record(
            &mut tx,
            instance,
            &job.tenant,
            &job.record,
            job.unless_final,
        )
        .await;
        if matches!(result, Ok(true)) {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        return Ok(vec![result]);
    }
    let mut results = Vec::with_capacity(batch.len());
    for job in batch {
        let mut savepoint = (&mut *tx).begin().await?;
        let result = write_record(
            &mut savepoint,
            instance,
            &job.tenant,
            &job.record,
            job.unless_final,
        )
        .await;
        if matches!(result, Ok(true)) {
            savepoint.commit().await?;
        } else {
            savepoint.rollback().await?;
        }
        results.push(result);
    }
    tx.commit().await?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ResponseStore, SqlStore, StoreOptions, StoredResponse};
    use serde_json::json;

    fn response(id: &str, status: &str) -> StoredResponse {
        StoredResponse {
            id: id.to_owned(),
            created_at: 1,
            status: status.to_owned(),
            model: "m".to_owned(),
            previous_response_id: None,
            expires_at: None,
            response: json!({"id": id, "status": status}),
            input_items: vec![json!({"id": format!("in_{id}"), "type": "message"})],
            output_items: vec![json!({"id": format!("out_{id}"), "type": "message"})],
        }
    }

    async fn open(name: &str, options: StoreOptions) -> (SqlStore, std::path::PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("toolbridge-writer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("store.db").display());
        (SqlStore::open_with(&url, options).await.unwrap(), dir)
    }

    /// On one thread every write below is queued before the writer first runs: they share one
    /// transaction, and the conflict and the refused guarded write inside it fail alone.
    #[tokio::test]
    async fn writes_queued_together_commit_as_one_batch_and_a_failure_stays_alone() {
        let (store, dir) = open("batch", StoreOptions::default()).await;
        let (a, b) = (Tenant::named("team-a"), Tenant::named("team-b"));
        store
            .put(&b, &response("resp_b", "completed"))
            .await
            .unwrap();
        store
            .put(&a, &response("resp_final", "completed"))
            .await
            .unwrap();
        let writer = store.writer.clone().unwrap();
        let before = writer.batches();
        let ids: Vec<String> = (0..40).map(|i| format!("resp_{i}")).collect();
        let records: Vec<StoredResponse> = ids.iter().map(|id| response(id, "completed")).collect();
        let conflict = response("resp_b", "failed");
        let late = response("resp_final", "in_progress");
        let (puts, conflicted, guarded) = tokio::join!(
            futures::future::join_all(records.iter().map(|r| store.put(&a, r))),
            store.put(&a, &conflict),
            store.put_unless_final(&a, &late),
        );
        assert_eq!(writer.batches() - before, 1, "one transaction for all");
        assert!(puts.iter().all(Result::is_ok), "{puts:?}");
        assert_eq!(conflicted.unwrap_err().code(), "store_conflict");
        assert!(!guarded.unwrap(), "a final response is not overwritten");
        for id in &ids {
            let got = store.get(&a, id).await.unwrap().unwrap();
            assert_eq!(got.output_items.len(), 1);
        }
        let kept = store.get(&b, "resp_b").await.unwrap().unwrap();
        assert_eq!(
            kept.status, "completed",
            "another tenant's response is untouched"
        );
        let final_ = store.get(&a, "resp_final").await.unwrap().unwrap();
        assert_eq!(final_.status, "completed");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Items go in multi-row inserts of at most 16 rows: 40 items take three, in order.
    #[tokio::test]
    async fn more_items_than_one_insert_holds_keep_their_order() {
        let (store, dir) = open("items", StoreOptions::default()).await;
        let t = Tenant::named("team-a");
        let mut long = response("resp_long", "completed");
        long.input_items = (0..40)
            .map(|i| json!({"id": format!("in_{i}"), "n": i}))
            .collect();
        store.put(&t, &long).await.unwrap();
        assert_eq!(store.get(&t, "resp_long").await.unwrap().unwrap(), long);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// With the one write connection held elsewhere, the writer cannot begin: every caller,
    /// more than the queue holds, is answered `store_unavailable` within its deadline; once the
    /// connection is free the next write goes through.
    #[tokio::test]
    async fn a_stuck_writer_fails_every_caller_within_the_deadline() {
        let options = StoreOptions {
            acquire_timeout: Duration::from_millis(150),
            timeout: Duration::from_millis(300),
            circuit_failures: 0,
            circuit_cooldown: Duration::from_millis(10),
        };
        let (store, dir) = open("stuck", options).await;
        let t = Tenant::named("team-a");
        let held = store.writes().acquire().await.unwrap();
        let records: Vec<StoredResponse> = (0..QUEUE + MAX_BATCH + 8)
            .map(|i| response(&format!("resp_{i}"), "completed"))
            .collect();
        let started = std::time::Instant::now();
        let outcomes = futures::future::join_all(records.iter().map(|r| store.put(&t, r))).await;
        assert!(started.elapsed() < Duration::from_secs(5), "bounded waits");
        for outcome in &outcomes {
            assert_eq!(outcome.as_ref().unwrap_err().code(), "store_unavailable");
        }
        drop(held);
        store
            .put(&t, &response("resp_after", "completed"))
            .await
            .unwrap();
        assert!(store.get(&t, "resp_after").await.unwrap().is_some());
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
