//! The response store: stored responses, their input and output items, and the chains that
//! `previous_response_id` builds, behind one trait.
//!
//! [`SqlStore`] is the one implementation: SQLite by default (bundled, WAL, a file path, no
//! setup) and PostgreSQL to scale out, through sqlx's `Any` driver with SQL both accept (`$1`
//! placeholders, `BIGINT`, `TEXT`, `ON CONFLICT … DO UPDATE`). The schema is embedded and
//! migrated at open. A response and its items are written together (one transaction; in a
//! batch, a record failing part-way is rolled back alone), so a response is never
//! half-visible. On SQLite response writes are group-committed by one writer thread (`writer`),
//! and the WAL is checkpointed by another (`checkpoint`); the gateway hands the writes over
//! already serialised ([`ResponseRecord`]).
//!
//! Gateway keys (stored by hash) and their token ledger live here too ([`KeyStore`]).
//!
//! *Invariant*: every stored object belongs to a [`Tenant`], and every query a request makes
//! filters by the tenant in its SQL (see [`tenant`]). Only the process's own sweeps
//! (heartbeat, interrupted runs, expiry) read across tenants.
//!
//! The SQL lives by job: `sql` (opening, paging, the trait's implementation), `migrations`,
//! `responses`, `conversations`, `chain`, and `sweeps` (the process's own cross-tenant queries);
//! `record` (the serialised response to write), `writer` (SQLite's group commit) and `once`
//! (a large output `result` — an image — kept once, in its item row).
//!
//! This crate stores JSON values as given; it does not know the Responses API's shapes beyond
//! an item's `id` and an output item's large `result` (`once`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

mod cache_turns;
mod captures;
mod chain;
mod checkpoint;
mod conversations;
mod guard;
mod keys;
mod migrations;
mod noted;
mod once;
mod provider_states;
mod record;
mod responses;
mod sql;
mod sweeps;
mod tenant;
mod writer;
pub use cache_turns::{
    CacheLedger, CacheSession, CacheTurn, MAX_LISTED_SESSIONS, MAX_REPORTED_TURNS,
};
pub use captures::CaptureStore;
pub use chain::ChainLink;
pub use guard::{StoreHealth, StoreOptions};
pub use keys::{KeyRecord, KeyStore, MAX_LISTED_KEYS};
pub use noted::ResponseText;
pub use provider_states::{MAX_LOOKUP, ProviderStateStore};
pub use record::ResponseRecord;
pub use sql::SqlStore;
pub(crate) use sql::{now, parse};
pub use tenant::Tenant;

/// A boxed future, so that [`ResponseStore`] stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One stored response.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    pub id: String,
    pub created_at: i64,
    /// `queued`, `in_progress`, `completed`, `incomplete`, `failed`, `cancelled`.
    pub status: String,
    pub model: String,
    pub previous_response_id: Option<String>,
    /// When the response may be garbage-collected (Unix seconds), if ever.
    pub expires_at: Option<i64>,
    /// The response object.
    pub response: Value,
    /// This turn's input items, each with an `id`.
    pub input_items: Vec<Value>,
    /// The response's output items.
    pub output_items: Vec<Value>,
}

/// The order of a page of items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// Which items of a list to return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Start after the item with this id.
    pub after: Option<String>,
    /// 1 to 100.
    pub limit: u32,
    pub order: Order,
}

/// A page of items.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemPage {
    pub items: Vec<Value>,
    pub has_more: bool,
}

/// Store failures, with stable codes.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("response `{0}` was not found")]
    NotFound(String),
    #[error("the chain of previous responses loops back to `{0}`")]
    Cycle(String),
    #[error("the chain of previous responses is longer than {0}")]
    TooDeep(usize),
    #[error("the stored data is not valid: {0}")]
    Corrupt(String),
    #[error("the store URL is not usable: {0}")]
    Url(String),
    #[error("an object with id `{0}` already exists")]
    Conflict(String),
    #[error("the store failed: {0}")]
    Database(#[from] sqlx::Error),
    /// SQLite's write connection (the group commit's, `writer`) failed.
    #[error("the store failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The store did not answer in time, or its circuit is open after repeated failures.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "previous_response_not_found",
            Self::Cycle(_) => "previous_response_cycle",
            Self::TooDeep(_) => "previous_response_chain_too_long",
            Self::Corrupt(_) => "store_corrupt",
            Self::Url(_) => "store_url_invalid",
            Self::Conflict(_) => "store_conflict",
            Self::Database(_) | Self::Sqlite(_) | Self::Unavailable(_) => "store_unavailable",
        }
    }

    /// Whether the database itself failed (unreachable, too slow, shutting down), as opposed
    /// to a request it refused: only outages count towards opening the circuit.
    pub fn is_outage(&self) -> bool {
        match self {
            Self::Unavailable(_) => true,
            Self::Database(sqlx::Error::Database(e)) => {
                // SQLSTATE classes 08 (connection), 53 (resources), 57 (operator
                // intervention: statement timeout, shutdown); SQLite's busy and locked.
                let code = e.code();
                let code = code.as_deref().unwrap_or("");
                code.starts_with("08")
                    || code.starts_with("53")
                    || code.starts_with("57")
                    || matches!(code, "5" | "6")
            }
            // Busy and locked past the busy timeout, I/O, a full disk or a read-only file;
            // a refused statement (a constraint, say) is not an outage.
            Self::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy
                    | rusqlite::ErrorCode::DatabaseLocked
                    | rusqlite::ErrorCode::SystemIoFailure
                    | rusqlite::ErrorCode::DiskFull
                    | rusqlite::ErrorCode::CannotOpen
                    | rusqlite::ErrorCode::ReadOnly
            ),
            Self::Database(
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed,
            ) => true,
            _ => false,
        }
    }
}

/// What the gateway needs of a store. Every call made for a request takes the [`Tenant`] it
/// acts for: what it writes is owned by that tenant, and it finds only that tenant's objects
/// (an admin tenant reads every tenant's, and writes as itself).
pub trait ResponseStore: Send + Sync {
    /// Writes a response and its items, replacing an earlier version with the same id of the
    /// same tenant (an id of another tenant's is refused as [`StoreError::Conflict`]). The
    /// record's JSON text is stored as it is: the text the client is sent, serialised once.
    fn put_record<'a>(
        &'a self,
        tenant: &'a Tenant,
        record: ResponseRecord,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Writes a response only if it is not already final (`completed`, `incomplete`, `failed`,
    /// `cancelled`): a background run finishing after a cancel must not undo it. False when the
    /// stored response was already final (or is another tenant's).
    fn put_record_unless_final<'a>(
        &'a self,
        tenant: &'a Tenant,
        record: ResponseRecord,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// [`Self::put_record`] of a [`StoredResponse`] (serialised here).
    fn put<'a>(
        &'a self,
        tenant: &'a Tenant,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let record = ResponseRecord::from_stored(response)?;
            self.put_record(tenant, record).await
        })
    }
    /// [`Self::put_record_unless_final`] of a [`StoredResponse`] (serialised here).
    fn put_unless_final<'a>(
        &'a self,
        tenant: &'a Tenant,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let record = ResponseRecord::from_stored(response)?;
            self.put_record_unless_final(tenant, record).await
        })
    }
    /// Cancels a queued or running response of the tenant's own: its status and body become
    /// `cancelled`. The response as it now stands; `None` when the tenant has no such response.
    fn cancel<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredResponse>, StoreError>>;
    /// A response by id.
    fn get<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredResponse>, StoreError>>;
    /// Deletes a response of the tenant's own and its items; false when there was none.
    fn delete<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// A page of a response's input items; `None` when the response does not exist.
    fn input_items<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        page: &'a Page,
    ) -> BoxFuture<'a, Result<Option<ItemPage>, StoreError>>;
    /// Stored items (input or output) by item id; ids not found are absent from the map.
    fn items_by_id<'a>(
        &'a self,
        tenant: &'a Tenant,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, Value>, StoreError>>;
    /// The chain ending at `id`, oldest first, following `previous_response_id`; a link that is
    /// another tenant's is not found.
    fn chain<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        max_depth: usize,
    ) -> BoxFuture<'a, Result<Vec<StoredResponse>, StoreError>>;
    /// The ids and statuses of [`Self::chain`]'s responses, oldest first, with the same checks,
    /// without their bodies and items (a process that holds a chain's items checks it is still
    /// whole and its own).
    fn chain_links<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        max_depth: usize,
    ) -> BoxFuture<'a, Result<Vec<ChainLink>, StoreError>>;
    /// Records that this process is alive (call at start and every [`HEARTBEAT_SECS`]).
    fn heartbeat(&self, now: i64) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Marks as failed the responses left `queued` or `in_progress` by a process that is gone:
    /// one whose heartbeat is older than [`LEASE_SECS`] (or, on SQLite, which serves one process,
    /// any process but this one). Their body gets `status: failed` and an error. The count.
    fn fail_interrupted(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// Marks as failed this process's own orphans: responses it left `queued` or `in_progress`,
    /// created before `before`, that `live` says are no longer running here (nor waiting to be
    /// written). At most 1,000 a call. The count.
    fn fail_orphans<'a>(
        &'a self,
        before: i64,
        live: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> BoxFuture<'a, Result<u64, StoreError>>;
    /// Deletes responses whose `expires_at` is before `now`; the count.
    fn purge_expired(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// Asks the database a trivial question, bounded like every other call (readiness).
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }
    /// What the store's circuit says, without asking the database.
    fn health(&self) -> StoreHealth {
        StoreHealth::Ok
    }

    /// Creates a conversation with its first items, owned by the tenant.
    fn create_conversation<'a>(
        &'a self,
        tenant: &'a Tenant,
        conversation: &'a Conversation,
        items: &'a [Value],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// A conversation by id.
    fn get_conversation<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Conversation>, StoreError>>;
    /// Deletes a conversation of the tenant's own and its items; false when there was none.
    fn delete_conversation<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Appends items at the end of a conversation of the tenant's own; false when there is no
    /// such conversation.
    fn append_conversation_items<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        items: &'a [Value],
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// A page of a conversation's items; `None` when there is no such conversation.
    fn conversation_items<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        page: &'a Page,
    ) -> BoxFuture<'a, Result<Option<ItemPage>, StoreError>>;
}

/// A conversation: a long-lived list of items that responses read and extend.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub id: String,
    pub created_at: i64,
    pub metadata: Value,
}

/// How often a process records that it is alive.
pub const HEARTBEAT_SECS: i64 = 30;
/// How long without a heartbeat before a process's unfinished responses are failed.
pub const LEASE_SECS: i64 = 3 * HEARTBEAT_SECS;
