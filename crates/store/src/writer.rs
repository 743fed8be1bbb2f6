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
}

impl Writer {
    /// Starts the writer task on the current runtime, writing through `pool` (the store's
    /// write pool) on behalf of process `instance`; `timeout` bounds each batch.
    pub(crate) fn start(pool: AnyPool, instance: String, timeout: Duration) -> Self {
        let (queue, jobs) = mpsc::channel(QUEUE);
        tokio::spawn(run(jobs, pool, instance, timeout));
        Self { queue }
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
async fn run(mut jobs: mpsc::Receiver<Job>, pool: AnyPool, instance: String, timeout: Duration) {
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
