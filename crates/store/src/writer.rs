//! Group commit for SQLite: one writer thread owning the write connection, response writes
//! batched into one transaction, each caller waiting only for the commit of the batch its
//! write is in.
//!
//! SQLite has one writer at a time. When each request wrote in its own transaction on its own
//! pooled connection, concurrent writers met SQLite's busy handler, which *sleeps* (1, 2, 5 …
//! 100 ms) between retries of the lock: under load most of a stored request's time was spent
//! asleep, and its p99 was tens of milliseconds. Here a request hands its [`ResponseRecord`]
//! to a bounded queue and waits; the writer takes whatever is queued (at most [`MAX_BATCH`]),
//! writes the records in one `BEGIN IMMEDIATE` transaction, commits once, then answers every
//! caller of the batch. One record's failure stays its own: a conflict or a refused guarded
//! write is refused before anything of it is written, and a record failing part-way (an error
//! from SQLite) has the batch written again with each record under a savepoint
//! (`Statements::write_batch`). A caller is answered only after the commit its write is in:
//! the durability rule (`store: true` only once durable) holds exactly as before. The
//! checkpoints are the `checkpoint` thread's.
//!
//! Why a thread of its own, with rusqlite, rather than a task over sqlx's connection: sqlx runs
//! each SQLite connection on a worker thread and every statement, savepoint and commit is a
//! round trip to it (a channel send, a wake-up, a context switch each way). A batch of *n*
//! records was 5*n*+2 such round trips, and on a busy core the switches cost more than SQLite's
//! own work. Here the whole batch is plain calls on the thread that owns the connection: one
//! wake-up per batch, statements prepared once and cached. rusqlite 0.39 links the same
//! libsqlite3-sys (0.37, bundled) as sqlx 0.9, so there is one SQLite library in the process.
//!
//! Bounds: the queue holds [`QUEUE`] records; a caller finding it full waits for room, and that
//! wait, like the wait for its commit, is inside the caller's store deadline
//! ([`crate::guard`]), so overload is back-pressure that ends in `store_unavailable`, never
//! unbounded growth. A record whose caller stopped waiting (deadline, client gone) before its
//! batch began is skipped.
//!
//! The store's other writes (cancel, delete, conversations, sweeps, keys, captures) go through
//! sqlx's one write connection. The two connections never race for SQLite's lock: each batch
//! here, and each of those writes, first takes this process's turn at writing (a fair async
//! mutex, `SqlStore::write_turn`). Racing, they met SQLite's busy handler, whose growing sleeps
//! (1, 2, 5 … 100 ms) stalled a batch behind a heartbeat for 100 ms and more; taking turns, a
//! write waits for at most the batch in progress. SQLite's lock is then contended only by
//! another process on the same file, a wait bounded by the busy timeout (the store deadline).
//!
//! Not here: PostgreSQL, whose concurrent transactions write in parallel and whose server
//! already groups concurrent commits into one WAL flush (`put_direct`); an in-memory SQLite
//! database, which exists only inside sqlx's connections (its writes go through `put_direct`
//! on the one write connection).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc, oneshot};

use crate::checkpoint;
use crate::sql::unfinished;
use crate::{ResponseRecord, StoreError, Tenant};

mod statements;

use statements::Statements;

/// Records waiting for the writer, at most.
pub(crate) const QUEUE: usize = 256;
/// Records in one transaction, at most.
pub(crate) const MAX_BATCH: usize = 64;

/// Batches of outcomes the relay holds, at most (past it the writer answers by itself).
const RELAYED_BATCHES: usize = 4;

/// A caller's outcome and where it goes.
type Outcome = (
    oneshot::Sender<Result<bool, StoreError>>,
    Result<bool, StoreError>,
);

/// One record to write, and where its outcome goes.
struct Job {
    tenant: Tenant,
    record: ResponseRecord,
    unless_final: bool,
    done: oneshot::Sender<Result<bool, StoreError>>,
}

/// The handle of the writer thread; the thread ends when the last handle is dropped.
#[derive(Debug)]
pub(crate) struct Writer {
    queue: mpsc::Sender<Job>,
    /// This process's turn at writing: the thread holds it for each batch, the store's other
    /// writes for each of theirs (`SqlStore::write_turn`).
    gate: Arc<tokio::sync::Mutex<()>>,
    /// Batches committed so far.
    #[cfg_attr(not(test), allow(dead_code))]
    batches: Arc<AtomicU64>,
}

impl Writer {
    /// Opens the write connection on the SQLite file at `path` (created and migrated already)
    /// and starts the writer thread, writing on behalf of process `instance`; `timeout` bounds
    /// each wait for SQLite's lock.
    pub(crate) fn start(
        path: &Path,
        instance: String,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(timeout)?;
        // Per connection: see ARCHITECTURE.md, durability (WAL itself is the file's, set at open).
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Checkpoints are the checkpointer thread's; a commit checkpoints by itself only past
        // the backstop (a checkpointer fallen far behind).
        conn.pragma_update(None, "wal_autocheckpoint", checkpoint::BACKSTOP_PAGES)?;
        // Appends touch few pages (the tables' and indexes' last leaves and their parents): a
        // 1 MiB page cache rather than SQLite's 2 MiB default.
        conn.pragma_update(None, "cache_size", -1024)?;
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        let kick = checkpoint::start(path, timeout, Arc::clone(&gate))?;
        let (queue, jobs) = mpsc::channel(QUEUE);
        let batches = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&batches);
        let turn = Arc::clone(&gate);
        let relay = start_relay();
        std::thread::Builder::new()
            .name("toolbridge-store-writer".to_owned())
            .spawn(move || {
                let ends = Ends {
                    gate: &turn,
                    batches: &counter,
                    kick: &kick,
                    relay: relay.as_ref(),
                };
                run(jobs, conn, &instance, &ends);
            })
            .map_err(|e| {
                StoreError::Unavailable(format!("cannot start the store's writer: {e}"))
            })?;
        Ok(Self {
            queue,
            gate,
            batches,
        })
    }

    /// This process's turn at writing (see the field).
    pub(crate) fn gate(&self) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(&self.gate)
    }

    /// Batches committed so far.
    #[cfg(test)]
    pub(crate) fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Queues one record and waits for the commit of its batch: the outcome of
    /// [`crate::responses::write_record`]'s rules. The caller bounds the wait (the store's
    /// deadline).
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

/// What the writer thread works with besides its connection.
struct Ends<'a> {
    /// This process's turn at writing.
    gate: &'a tokio::sync::Mutex<()>,
    /// Batches committed so far.
    batches: &'a AtomicU64,
    /// The checkpointer's kick.
    kick: &'a std::sync::mpsc::SyncSender<()>,
    /// Where a batch's outcomes go ([`start_relay`]); `None` answers each caller from here.
    relay: Option<&'a mpsc::Sender<Vec<Outcome>>>,
}

/// The writer thread: a batch per turn, until every handle is gone.
fn run(mut jobs: mpsc::Receiver<Job>, conn: Connection, instance: &str, ends: &Ends<'_>) {
    let mut statements = Statements::new(&conn);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = jobs.blocking_recv() {
        // Woken by the first record, step aside once: where the request threads share this
        // core (a gateway pinned to one), they run on and queue the records of the requests
        // finishing now, and the batch takes them all instead of one each; with no one else
        // to run, this returns at once.
        std::thread::yield_now();
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let turn = ends.gate.blocking_lock();
        // Callers that stopped waiting (for the queue, the turn or an earlier batch) are not
        // written: they were told it was not stored.
        batch.retain(|job: &Job| !job.done.is_closed());
        let superseded = superseded(&mut batch);
        if batch.is_empty() {
            continue;
        }
        let outcome = statements.commit(instance, &batch);
        drop(turn);
        let outcomes: Vec<Outcome> = match outcome {
            Ok(results) => {
                let committed = ends.batches.fetch_add(1, Ordering::Relaxed) + 1;
                if committed.is_multiple_of(checkpoint::EVERY) {
                    // Full: a kick is pending already.
                    let _ = ends.kick.try_send(());
                }
                let written = batch.drain(..).map(|job| job.done).zip(results);
                // As if the final version had landed first: a guarded write over it is refused.
                let refused = superseded.into_iter().map(|job| (job.done, Ok(false)));
                written.chain(refused).collect()
            }
            Err(e) => {
                let message = format!("the batched commit failed: {e}");
                batch
                    .drain(..)
                    .chain(superseded)
                    .map(|job| (job.done, Err(StoreError::Unavailable(message.clone()))))
                    .collect()
            }
        };
        answer(ends.relay, outcomes);
    }
}

/// Takes out of `batch` each guarded write of an unfinished response (a stream's `in_progress`
/// record) whose final version, same tenant and id, is in the batch too: in one transaction the
/// final version replaces it whatever the order, so it is not written at all. A stream whose
/// answer came quickly has both records queued together (its final write does not wait for the
/// first), and the batch writes one response instead of two. An unguarded write of an
/// unfinished response is never taken out: it replaces whatever is stored, final or not.
fn superseded(batch: &mut Vec<Job>) -> Vec<Job> {
    let replaceable =
        |job: &Job| job.unless_final && unfinished(&job.record.status) && !job.record.id.is_empty();
    if !batch.iter().any(replaceable) {
        return Vec::new();
    }
    let finals: Vec<(&str, &str)> = batch
        .iter()
        .filter(|job| !unfinished(&job.record.status))
        .map(|job| (job.tenant.name(), job.record.id()))
        .collect();
    let mut superseded = batch
        .iter()
        .map(|job| replaceable(job) && finals.contains(&(job.tenant.name(), job.record.id())))
        .collect::<Vec<bool>>()
        .into_iter();
    batch
        .extract_if(.., |_| superseded.next().unwrap_or(false))
        .collect()
}

/// Sends each caller its outcome: through the relay when there is one and it keeps up, else
/// from this thread (never waiting for the relay). A caller gone since has nothing to hear.
fn answer(relay: Option<&mpsc::Sender<Vec<Outcome>>>, outcomes: Vec<Outcome>) {
    use mpsc::error::TrySendError;
    let outcomes = match relay {
        Some(relay) => match relay.try_send(outcomes) {
            Ok(()) => return,
            // The relay is behind (its runtime busy, or not driven at all) or its runtime has
            // gone: answered from here.
            Err(TrySendError::Full(outcomes) | TrySendError::Closed(outcomes)) => outcomes,
        },
        None => outcomes,
    };
    for (done, result) in outcomes {
        let _ = done.send(result);
    }
}

/// Starts the relay: a task on the runtime that opens the store, which answers each caller of a
/// batch. Answered from the writer thread, each caller's wake-up was a write to the runtime's
/// eventfd, and on a core the runtime shares (a gateway pinned to one) each write let the
/// woken runtime preempt the writer: about six a batch of sixteen at S c=16, 3 % of the
/// gateway's CPU in those writes alone. Through the relay a batch wakes the runtime once, and
/// the relay wakes each caller inside it. `None` outside a runtime: the writer then answers
/// each caller itself, as it does when the relay's runtime has gone or the relay is behind. The
/// task ends with the writer (its sender dropped).
fn start_relay() -> Option<mpsc::Sender<Vec<Outcome>>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (relay, mut batches) = mpsc::channel::<Vec<Outcome>>(RELAYED_BATCHES);
    runtime.spawn(async move {
        while let Some(outcomes) = batches.recv().await {
            for (done, result) in outcomes {
                let _ = done.send(result);
            }
        }
    });
    Some(relay)
}

/// The file of a SQLite store URL as sqlx reads it (`sqlite://PATH?…` or `sqlite:PATH?…`,
/// percent-decoded); `None` for an in-memory database.
pub(crate) fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let (database, params) = rest.split_once('?').unwrap_or((rest, ""));
    if database.is_empty()
        || database == ":memory:"
        || params.split('&').any(|p| p == "mode=memory")
    {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(database)
        .decode_utf8()
        .ok()?;
    Some(std::path::PathBuf::from(decoded.as_ref()))
}

#[cfg(test)]
pub(crate) mod tests;
