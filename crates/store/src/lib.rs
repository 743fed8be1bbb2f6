//! The response store: stored responses, their input and output items, and the chains that
//! `previous_response_id` builds, behind one trait.
//!
//! [`SqlStore`] is the one implementation: SQLite by default (bundled, WAL, a file path, no
//! setup) and PostgreSQL to scale out, through sqlx's `Any` driver with SQL both accept (`$1`
//! placeholders, `BIGINT`, `TEXT`, `ON CONFLICT … DO UPDATE`). The schema is embedded and
//! migrated at open. Writes of one response and its items are one transaction, so a response is
//! never half-visible.
//!
//! Gateway keys (stored by hash) and their token ledger live here too ([`KeyStore`]).
//!
//! *Invariant*: every stored object belongs to a [`Tenant`], and every query a request makes
//! filters by the tenant in its SQL (see [`tenant`]). Only the process's own sweeps
//! (heartbeat, interrupted runs, expiry) read across tenants.
//!
//! This crate stores JSON values as given; it does not know the Responses API's shapes beyond
//! an item's `id`.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;

use serde_json::Value;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};

mod captures;
mod guard;
mod keys;
mod tenant;
pub use captures::CaptureStore;
pub use guard::{StoreHealth, StoreOptions};
pub use keys::{KeyRecord, KeyStore, MAX_LISTED_KEYS};
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
            Self::Database(_) | Self::Unavailable(_) => "store_unavailable",
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
    /// same tenant (an id of another tenant's is refused as [`StoreError::Conflict`]).
    fn put<'a>(
        &'a self,
        tenant: &'a Tenant,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Writes a response only if it is not already final (`completed`, `incomplete`, `failed`,
    /// `cancelled`): a background run finishing after a cancel must not undo it. False when the
    /// stored response was already final (or is another tenant's).
    fn put_unless_final<'a>(
        &'a self,
        tenant: &'a Tenant,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
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
    /// Records that this process is alive (call at start and every [`HEARTBEAT_SECS`]).
    fn heartbeat(&self, now: i64) -> BoxFuture<'_, Result<(), StoreError>>;
    /// Marks as failed the responses left `queued` or `in_progress` by a process that is gone:
    /// one whose heartbeat is older than [`LEASE_SECS`] (or, on SQLite, which serves one process,
    /// any process but this one). Their body gets `status: failed` and an error. The count.
    fn fail_interrupted(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
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

/// The schema, in order. Each step runs once, recorded in `toolbridge_schema`.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS toolbridge_responses (
        id TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        status TEXT NOT NULL,
        model TEXT NOT NULL,
        previous_response_id TEXT,
        expires_at BIGINT,
        body TEXT NOT NULL
    )",
    "CREATE INDEX IF NOT EXISTS toolbridge_responses_expires ON toolbridge_responses (expires_at)",
    "CREATE TABLE IF NOT EXISTS toolbridge_items (
        response_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        position BIGINT NOT NULL,
        item_id TEXT,
        body TEXT NOT NULL,
        PRIMARY KEY (response_id, kind, position)
    )",
    "CREATE INDEX IF NOT EXISTS toolbridge_items_item_id ON toolbridge_items (item_id)",
    "ALTER TABLE toolbridge_responses ADD COLUMN owner TEXT",
    "CREATE TABLE IF NOT EXISTS toolbridge_instances (id TEXT PRIMARY KEY, heartbeat_at BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS toolbridge_conversations (id TEXT PRIMARY KEY, created_at BIGINT NOT NULL, metadata TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS toolbridge_conversation_items (
        conversation_id TEXT NOT NULL,
        position BIGINT NOT NULL,
        item_id TEXT,
        body TEXT NOT NULL,
        PRIMARY KEY (conversation_id, position)
    )",
    "CREATE TABLE IF NOT EXISTS toolbridge_keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        scopes TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
    )",
    "CREATE TABLE IF NOT EXISTS toolbridge_usage (
        key_id TEXT NOT NULL,
        period TEXT NOT NULL,
        tokens BIGINT NOT NULL,
        PRIMARY KEY (key_id, period)
    )",
    "CREATE TABLE IF NOT EXISTS toolbridge_captures (
        request_id TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        body TEXT NOT NULL
    )",
    "CREATE INDEX IF NOT EXISTS toolbridge_captures_expires ON toolbridge_captures (expires_at)",
    // Tenants: rows written before them belong to the open gateway's tenant (`''`).
    "ALTER TABLE toolbridge_responses ADD COLUMN tenant TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE toolbridge_items ADD COLUMN tenant TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE toolbridge_conversations ADD COLUMN tenant TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE toolbridge_conversation_items ADD COLUMN tenant TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE toolbridge_captures ADD COLUMN tenant TEXT NOT NULL DEFAULT ''",
];

/// The three statements that page through one ordered list: the position of the `after` item,
/// and the next rows in either order (`$1` the list's owner id, `$2` the `after` id or the
/// bound, `$3` the limit; the tenant filter is `$3`, `$4` in the first and `$4`, `$5` in the
/// others).
struct PageSql {
    position: &'static str,
    asc: &'static str,
    desc: &'static str,
}

const RESPONSE_INPUT_PAGES: PageSql = PageSql {
    position: "SELECT position FROM toolbridge_items WHERE response_id = $1 AND kind = 'input' AND item_id = $2 AND (tenant = $3 OR $4 = 1)",
    asc: "SELECT body FROM toolbridge_items WHERE response_id = $1 AND kind = 'input' AND position > $2 AND (tenant = $4 OR $5 = 1) ORDER BY position ASC LIMIT $3",
    desc: "SELECT body FROM toolbridge_items WHERE response_id = $1 AND kind = 'input' AND position < $2 AND (tenant = $4 OR $5 = 1) ORDER BY position DESC LIMIT $3",
};

const CONVERSATION_PAGES: PageSql = PageSql {
    position: "SELECT position FROM toolbridge_conversation_items WHERE conversation_id = $1 AND item_id = $2 AND (tenant = $3 OR $4 = 1)",
    asc: "SELECT body FROM toolbridge_conversation_items WHERE conversation_id = $1 AND position > $2 AND (tenant = $4 OR $5 = 1) ORDER BY position ASC LIMIT $3",
    desc: "SELECT body FROM toolbridge_conversation_items WHERE conversation_id = $1 AND position < $2 AND (tenant = $4 OR $5 = 1) ORDER BY position DESC LIMIT $3",
};

/// The SQL store (SQLite or PostgreSQL).
#[derive(Debug, Clone)]
pub struct SqlStore {
    pool: AnyPool,
    /// This process's id, owner of the responses it is still producing.
    instance: String,
    sqlite: bool,
    /// Bounds every operation and fails fast after repeated outages (see [`guard`]).
    circuit: std::sync::Arc<guard::Circuit>,
}

impl SqlStore {
    /// Opens (creating if needed) the store at `url` — `sqlite://PATH`, `sqlite::memory:` or
    /// `postgres://…` — and migrates it, with the default [`StoreOptions`].
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, StoreOptions::default()).await
    }

    /// [`Self::open`] with the given timeouts and circuit.
    pub async fn open_with(url: &str, limits: StoreOptions) -> Result<Self, StoreError> {
        install_default_drivers();
        let statement_ms = limits.timeout.as_millis().max(1);
        let sqlite = url.starts_with("sqlite:");
        let url = if sqlite && !url.contains("mode=") && !url.contains(":memory:") {
            format!("{url}{}mode=rwc", if url.contains('?') { '&' } else { '?' })
        } else {
            url.to_owned()
        };
        let options =
            AnyConnectOptions::from_str(&url).map_err(|e| StoreError::Url(e.to_string()))?;
        let pool = AnyPoolOptions::new()
            // SQLite has one writer; a few connections serve concurrent readers under WAL.
            .max_connections(if sqlite { 4 } else { 16 })
            .acquire_timeout(limits.acquire_timeout)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if sqlite {
                        sqlx::raw_sql(
                            "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL;",
                        )
                        .execute(&mut *conn)
                        .await?;
                    } else {
                        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                            "SET statement_timeout = {statement_ms}"
                        )))
                        .execute(&mut *conn)
                        .await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        let store = Self {
            pool,
            instance: instance_id(),
            sqlite,
            circuit: std::sync::Arc::new(guard::Circuit::new(limits)),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Runs one operation under the store's deadline and circuit.
    pub(crate) async fn guard<T>(
        &self,
        operation: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.circuit.run(operation).await
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        // Several processes may start at once on one PostgreSQL database: one migrates at a time.
        // (SQLite serialises writers itself.)
        let mut conn = self.pool.acquire().await?;
        if !self.sqlite {
            sqlx::query("SELECT pg_advisory_lock(7745634)")
                .execute(&mut *conn)
                .await?;
        }
        let result = self.migrate_on(&mut conn).await;
        if !self.sqlite {
            sqlx::query("SELECT pg_advisory_unlock(7745634)")
                .execute(&mut *conn)
                .await?;
        }
        result
    }

    async fn migrate_on(&self, conn: &mut sqlx::AnyConnection) -> Result<(), StoreError> {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS toolbridge_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
        )
        .execute(&mut *conn)
        .await?;
        let applied: i64 = sqlx::query("SELECT COUNT(*) AS n FROM toolbridge_schema")
            .fetch_one(&mut *conn)
            .await?
            .try_get("n")?;
        for (version, sql) in MIGRATIONS.iter().enumerate().skip(applied.max(0) as usize) {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            sqlx::query(*sql).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO toolbridge_schema (version, applied_at) VALUES ($1, $2)")
                .bind(version as i64 + 1)
                .bind(now())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Ok(())
    }

    async fn put_inner(&self, t: &Tenant, r: &StoredResponse) -> Result<(), StoreError> {
        let body =
            serde_json::to_string(&r.response).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut tx = self.pool.begin().await?;
        // The update applies only to the tenant's own row: an id of another tenant's is never
        // overwritten (ids are random, so this is a forged or colliding id).
        let written = sqlx::query(
            "INSERT INTO toolbridge_responses (id, created_at, status, model, previous_response_id, expires_at, body, owner, tenant)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, model = excluded.model,
               previous_response_id = excluded.previous_response_id, expires_at = excluded.expires_at,
               body = excluded.body, owner = excluded.owner
             WHERE toolbridge_responses.tenant = excluded.tenant",
        )
        .bind(&r.id)
        .bind(r.created_at)
        .bind(&r.status)
        .bind(&r.model)
        .bind(r.previous_response_id.as_deref())
        .bind(r.expires_at)
        .bind(body)
        .bind(unfinished(&r.status).then_some(self.instance.as_str()))
        .bind(t.name())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if written == 0 {
            tx.rollback().await?;
            return Err(StoreError::Conflict(r.id.clone()));
        }
        Self::write_items(&mut tx, t, r).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn put_unless_final_inner(
        &self,
        t: &Tenant,
        r: &StoredResponse,
    ) -> Result<bool, StoreError> {
        let body =
            serde_json::to_string(&r.response).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        // One transaction: the guarded update takes the row (PostgreSQL) or the database
        // (SQLite) for writing, so a cancel either lands before it (and wins) or after it.
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE toolbridge_responses SET status = $2, body = $3, owner = $4, expires_at = $5
             WHERE id = $1 AND tenant = $6 AND status IN ('queued', 'in_progress')",
        )
        .bind(&r.id)
        .bind(&r.status)
        .bind(&body)
        .bind(unfinished(&r.status).then_some(self.instance.as_str()))
        .bind(r.expires_at)
        .bind(t.name())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if updated == 0 {
            let inserted = sqlx::query(
                "INSERT INTO toolbridge_responses (id, created_at, status, model, previous_response_id, expires_at, body, owner, tenant)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
            )
            .bind(&r.id)
            .bind(r.created_at)
            .bind(&r.status)
            .bind(&r.model)
            .bind(r.previous_response_id.as_deref())
            .bind(r.expires_at)
            .bind(&body)
            .bind(unfinished(&r.status).then_some(self.instance.as_str()))
            .bind(t.name())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                // It exists and is final already (or is another tenant's).
                tx.rollback().await?;
                return Ok(false);
            }
        }
        Self::write_items(&mut tx, t, r).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn write_items(
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        t: &Tenant,
        r: &StoredResponse,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM toolbridge_items WHERE response_id = $1 AND tenant = $2")
            .bind(&r.id)
            .bind(t.name())
            .execute(&mut **tx)
            .await?;
        for (kind, items) in [("input", &r.input_items), ("output", &r.output_items)] {
            for (position, item) in items.iter().enumerate() {
                let body =
                    serde_json::to_string(item).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                sqlx::query(
                    "INSERT INTO toolbridge_items (response_id, kind, position, item_id, body, tenant) VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&r.id)
                .bind(kind)
                .bind(position as i64)
                .bind(item.get("id").and_then(Value::as_str))
                .bind(body)
                .bind(t.name())
                .execute(&mut **tx)
                .await?;
            }
        }
        Ok(())
    }

    async fn cancel_inner(
        &self,
        t: &Tenant,
        id: &str,
    ) -> Result<Option<StoredResponse>, StoreError> {
        // Only the tenant's own response is cancelled, even by an admin.
        let own = t.own();
        let Some(mut response) = self.get_inner(&own, id).await? else {
            return Ok(None);
        };
        if !unfinished(&response.status) {
            return Ok(Some(response));
        }
        response.status = "cancelled".to_owned();
        if let Value::Object(map) = &mut response.response {
            map.insert("status".to_owned(), Value::String("cancelled".to_owned()));
        }
        let body = serde_json::to_string(&response.response)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        sqlx::query(
            "UPDATE toolbridge_responses SET status = 'cancelled', owner = NULL, body = $2
             WHERE id = $1 AND tenant = $3 AND status IN ('queued', 'in_progress')",
        )
        .bind(id)
        .bind(body)
        .bind(own.name())
        .execute(&self.pool)
        .await?;
        self.get_inner(&own, id).await
    }

    async fn insert_conversation_items(
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        t: &Tenant,
        id: &str,
        items: &[Value],
    ) -> Result<(), StoreError> {
        // Each item's position is computed inside its INSERT, so the transaction's first
        // statement is a write: on SQLite (WAL) a transaction that reads first and then writes
        // fails at once with SQLITE_BUSY_SNAPSHOT when another connection wrote in between,
        // busy timeout or not.
        for item in items {
            let body =
                serde_json::to_string(item).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            sqlx::query(
                "INSERT INTO toolbridge_conversation_items (conversation_id, position, item_id, body, tenant)
                 SELECT $1, COALESCE(MAX(position), -1) + 1, $2, $3, $4
                 FROM toolbridge_conversation_items WHERE conversation_id = $1",
            )
            .bind(id)
            .bind(item.get("id").and_then(Value::as_str))
            .bind(body)
            .bind(t.name())
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    async fn conversation_items_inner(
        &self,
        t: &Tenant,
        id: &str,
        page: &Page,
    ) -> Result<Option<ItemPage>, StoreError> {
        if self.get_conversation_inner(t, id).await?.is_none() {
            return Ok(None);
        }
        self.page(t, id, page, &CONVERSATION_PAGES).await.map(Some)
    }

    /// One page of an ordered list of items (a response's inputs, a conversation's items).
    async fn page(
        &self,
        t: &Tenant,
        id: &str,
        page: &Page,
        sql: &PageSql,
    ) -> Result<ItemPage, StoreError> {
        let start = match &page.after {
            None => None,
            Some(after) => {
                let row = sqlx::query(sql.position)
                    .bind(id)
                    .bind(after)
                    .bind(t.name())
                    .bind(t.all_flag())
                    .fetch_optional(&self.pool)
                    .await?;
                match row {
                    Some(row) => Some(row.try_get::<i64, _>("position")?),
                    None => return Err(StoreError::NotFound(after.clone())),
                }
            }
        };
        let limit = i64::from(page.limit.clamp(1, 100));
        let (query, bound) = match page.order {
            Order::Asc => (sql.asc, start.unwrap_or(-1)),
            Order::Desc => (sql.desc, start.unwrap_or(i64::MAX)),
        };
        let rows = sqlx::query(query)
            .bind(id)
            .bind(bound)
            .bind(limit + 1)
            .bind(t.name())
            .bind(t.all_flag())
            .fetch_all(&self.pool)
            .await?;
        let has_more = rows.len() as i64 > limit;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows.into_iter().take(limit as usize) {
            items.push(parse(&row.try_get::<String, _>("body")?)?);
        }
        Ok(ItemPage { items, has_more })
    }

    async fn get_conversation_inner(
        &self,
        t: &Tenant,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        let Some(row) = sqlx::query(
            "SELECT id, created_at, metadata FROM toolbridge_conversations
             WHERE id = $1 AND (tenant = $2 OR $3 = 1)",
        )
        .bind(id)
        .bind(t.name())
        .bind(t.all_flag())
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        Ok(Some(Conversation {
            id: row.try_get("id")?,
            created_at: row.try_get("created_at")?,
            metadata: parse(&row.try_get::<String, _>("metadata")?)?,
        }))
    }

    async fn get_inner(&self, t: &Tenant, id: &str) -> Result<Option<StoredResponse>, StoreError> {
        let Some(row) = sqlx::query(
            "SELECT id, created_at, status, model, previous_response_id, expires_at, body
             FROM toolbridge_responses WHERE id = $1 AND (tenant = $2 OR $3 = 1)",
        )
        .bind(id)
        .bind(t.name())
        .bind(t.all_flag())
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let mut response = response_from_row(&row)?;
        let items = sqlx::query(
            "SELECT kind, body FROM toolbridge_items WHERE response_id = $1 AND (tenant = $2 OR $3 = 1)
             ORDER BY kind, position",
        )
        .bind(id)
        .bind(t.name())
        .bind(t.all_flag())
        .fetch_all(&self.pool)
        .await?;
        for row in items {
            push_item(&mut response, &row)?;
        }
        Ok(Some(response))
    }

    async fn delete_inner(&self, t: &Tenant, id: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM toolbridge_items WHERE response_id = $1 AND tenant = $2")
            .bind(id)
            .bind(t.name())
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query("DELETE FROM toolbridge_responses WHERE id = $1 AND tenant = $2")
            .bind(id)
            .bind(t.name())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted > 0)
    }

    async fn input_items_inner(
        &self,
        t: &Tenant,
        id: &str,
        page: &Page,
    ) -> Result<Option<ItemPage>, StoreError> {
        let exists = sqlx::query(
            "SELECT id FROM toolbridge_responses WHERE id = $1 AND (tenant = $2 OR $3 = 1)",
        )
        .bind(id)
        .bind(t.name())
        .bind(t.all_flag())
        .fetch_optional(&self.pool)
        .await?
        .is_some();
        if !exists {
            return Ok(None);
        }
        self.page(t, id, page, &RESPONSE_INPUT_PAGES)
            .await
            .map(Some)
    }

    async fn items_by_id_inner(
        &self,
        t: &Tenant,
        ids: &[String],
    ) -> Result<HashMap<String, Value>, StoreError> {
        let mut found = HashMap::new();
        for id in ids {
            if found.contains_key(id) {
                continue;
            }
            let row = sqlx::query(
                "SELECT body FROM toolbridge_items WHERE item_id = $1 AND (tenant = $2 OR $3 = 1) LIMIT 1",
            )
            .bind(id)
            .bind(t.name())
            .bind(t.all_flag())
            .fetch_optional(&self.pool)
            .await?;
            if let Some(row) = row {
                found.insert(id.clone(), parse(&row.try_get::<String, _>("body")?)?);
            }
        }
        Ok(found)
    }

    /// Two queries whatever the length: a recursive walk down `previous_response_id` (bounded by
    /// `max_depth`, so a cycle in stored data cannot loop; every step filtered by tenant, so a
    /// link to another tenant's response ends the walk and reads as not found), then every item
    /// of the walked responses. The rows are then checked in order for a cycle, a gap or too
    /// much depth.
    async fn chain_inner(
        &self,
        t: &Tenant,
        id: &str,
        max_depth: usize,
    ) -> Result<Vec<StoredResponse>, StoreError> {
        let depth = i64::try_from(max_depth).unwrap_or(i64::MAX);
        let rows = sqlx::query(CHAIN_RESPONSES)
            .bind(id)
            .bind(depth)
            .bind(t.name())
            .bind(t.all_flag())
            .fetch_all(&self.pool)
            .await?;
        let mut chain = Vec::with_capacity(rows.len());
        let mut seen = HashSet::new();
        let mut rows = rows.iter();
        let mut next = Some(id.to_owned());
        while let Some(current) = next {
            if !seen.insert(current.clone()) {
                return Err(StoreError::Cycle(current));
            }
            if chain.len() >= max_depth {
                return Err(StoreError::TooDeep(max_depth));
            }
            let response = match rows.next() {
                Some(row) => response_from_row(row)?,
                None => return Err(StoreError::NotFound(current)),
            };
            if response.id != current {
                return Err(StoreError::NotFound(current));
            }
            next = response.previous_response_id.clone();
            chain.push(response);
        }

        let items = sqlx::query(CHAIN_ITEMS)
            .bind(id)
            .bind(depth)
            .bind(t.name())
            .bind(t.all_flag())
            .fetch_all(&self.pool)
            .await?;
        let index: HashMap<String, usize> = chain
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        for row in items {
            let owner: String = row.try_get("response_id")?;
            if let Some(response) = index.get(&owner).and_then(|&i| chain.get_mut(i)) {
                push_item(response, &row)?;
            }
        }
        chain.reverse();
        Ok(chain)
    }
}

/// The recursive walk from `$1` down `previous_response_id`, at most `$2` links below it, only
/// through responses of tenant `$3` (every tenant when `$4 = 1`), as the head of the two chain
/// queries.
macro_rules! chain_walk {
    () => {
        "WITH RECURSIVE walk (id, previous_response_id, depth) AS (\
         SELECT id, previous_response_id, 0 FROM toolbridge_responses \
         WHERE id = $1 AND (tenant = $3 OR $4 = 1) \
         UNION ALL \
         SELECT r.id, r.previous_response_id, w.depth + 1 FROM toolbridge_responses r \
         JOIN walk w ON r.id = w.previous_response_id \
         WHERE w.depth < $2 AND (r.tenant = $3 OR $4 = 1)) "
    };
}

/// The walked responses, newest first.
const CHAIN_RESPONSES: &str = concat!(
    chain_walk!(),
    "SELECT r.id, r.created_at, r.status, r.model, r.previous_response_id, r.expires_at, r.body \
     FROM walk w JOIN toolbridge_responses r ON r.id = w.id ORDER BY w.depth"
);

/// Every item of the walked responses.
const CHAIN_ITEMS: &str = concat!(
    chain_walk!(),
    "SELECT i.response_id, i.kind, i.body FROM toolbridge_items i \
     WHERE i.response_id IN (SELECT id FROM walk) AND (i.tenant = $3 OR $4 = 1) \
     ORDER BY i.response_id, i.kind, i.position"
);

/// A response row (`id` … `body`) without its items.
fn response_from_row(row: &sqlx::any::AnyRow) -> Result<StoredResponse, StoreError> {
    Ok(StoredResponse {
        id: row.try_get("id")?,
        created_at: row.try_get("created_at")?,
        status: row.try_get("status")?,
        model: row.try_get("model")?,
        previous_response_id: row.try_get("previous_response_id")?,
        expires_at: row.try_get("expires_at")?,
        response: parse(&row.try_get::<String, _>("body")?)?,
        input_items: Vec::new(),
        output_items: Vec::new(),
    })
}

/// Appends an item row (`kind`, `body`) to its response's input or output items.
fn push_item(response: &mut StoredResponse, row: &sqlx::any::AnyRow) -> Result<(), StoreError> {
    let kind: String = row.try_get("kind")?;
    let item = parse(&row.try_get::<String, _>("body")?)?;
    if kind == "input" {
        response.input_items.push(item);
    } else {
        response.output_items.push(item);
    }
    Ok(())
}

impl ResponseStore for SqlStore {
    fn create_conversation<'a>(
        &'a self,
        tenant: &'a Tenant,
        conversation: &'a Conversation,
        items: &'a [Value],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.guard(async move {
            let metadata = serde_json::to_string(&conversation.metadata)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let mut tx = self.pool.begin().await?;
            sqlx::query(
                "INSERT INTO toolbridge_conversations (id, created_at, metadata, tenant) VALUES ($1, $2, $3, $4)",
            )
            .bind(&conversation.id)
            .bind(conversation.created_at)
            .bind(metadata)
            .bind(tenant.name())
            .execute(&mut *tx)
            .await?;
            Self::insert_conversation_items(&mut tx, tenant, &conversation.id, items).await?;
            tx.commit().await?;
            Ok(())
        }))
    }
    fn get_conversation<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Conversation>, StoreError>> {
        Box::pin(self.guard(self.get_conversation_inner(tenant, id)))
    }
    fn delete_conversation<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.guard(async move {
            let mut tx = self.pool.begin().await?;
            sqlx::query(
                "DELETE FROM toolbridge_conversation_items WHERE conversation_id = $1 AND tenant = $2",
            )
            .bind(id)
            .bind(tenant.name())
            .execute(&mut *tx)
            .await?;
            let n =
                sqlx::query("DELETE FROM toolbridge_conversations WHERE id = $1 AND tenant = $2")
                    .bind(id)
                    .bind(tenant.name())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            tx.commit().await?;
            Ok(n > 0)
        }))
    }
    fn append_conversation_items<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        items: &'a [Value],
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.guard(async move {
            let mut tx = self.pool.begin().await?;
            // Writes first (see `insert_conversation_items`); the existence check then runs
            // under the write lock, and a missing conversation (or another tenant's) rolls the
            // items back.
            Self::insert_conversation_items(&mut tx, tenant, id, items).await?;
            let exists = sqlx::query(
                "SELECT id FROM toolbridge_conversations WHERE id = $1 AND tenant = $2",
            )
            .bind(id)
            .bind(tenant.name())
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
            if !exists {
                tx.rollback().await?;
                return Ok(false);
            }
            tx.commit().await?;
            Ok(true)
        }))
    }
    fn conversation_items<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        page: &'a Page,
    ) -> BoxFuture<'a, Result<Option<ItemPage>, StoreError>> {
        Box::pin(self.guard(self.conversation_items_inner(tenant, id, page)))
    }
    fn put_unless_final<'a>(
        &'a self,
        tenant: &'a Tenant,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.guard(self.put_unless_final_inner(tenant, response)))
    }
    fn cancel<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredResponse>, StoreError>> {
        Box::pin(self.guard(self.cancel_inner(tenant, id)))
    }
    fn put<'a>(
        &'a self,
        tenant: &'a Tenant,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.guard(self.put_inner(tenant, response)))
    }
    fn get<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredResponse>, StoreError>> {
        Box::pin(self.guard(self.get_inner(tenant, id)))
    }
    fn delete<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.guard(self.delete_inner(tenant, id)))
    }
    fn input_items<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        page: &'a Page,
    ) -> BoxFuture<'a, Result<Option<ItemPage>, StoreError>> {
        Box::pin(self.guard(self.input_items_inner(tenant, id, page)))
    }
    fn items_by_id<'a>(
        &'a self,
        tenant: &'a Tenant,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, Value>, StoreError>> {
        Box::pin(self.guard(self.items_by_id_inner(tenant, ids)))
    }
    fn chain<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        max_depth: usize,
    ) -> BoxFuture<'a, Result<Vec<StoredResponse>, StoreError>> {
        Box::pin(self.guard(self.chain_inner(tenant, id, max_depth)))
    }
    fn heartbeat(&self, now: i64) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.guard(async move {
            sqlx::query(
                "INSERT INTO toolbridge_instances (id, heartbeat_at) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            )
            .bind(&self.instance)
            .bind(now)
            .execute(&self.pool)
            .await?;
            sqlx::query("DELETE FROM toolbridge_instances WHERE heartbeat_at < $1")
                .bind(now - 10 * LEASE_SECS)
                .execute(&self.pool)
                .await?;
            Ok(())
        }))
    }

    fn fail_interrupted(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.guard(async move {
            let rows = if self.sqlite {
                sqlx::query(
                    "SELECT id, body FROM toolbridge_responses WHERE status IN ('queued', 'in_progress')
                     AND (owner IS NULL OR owner <> $1)",
                )
                .bind(&self.instance)
                .fetch_all(&self.pool)
                .await?
            } else {
                sqlx::query(
                    "SELECT id, body FROM toolbridge_responses WHERE status IN ('queued', 'in_progress')
                     AND (owner IS NULL OR owner NOT IN
                          (SELECT id FROM toolbridge_instances WHERE heartbeat_at >= $1))",
                )
                .bind(now - LEASE_SECS)
                .fetch_all(&self.pool)
                .await?
            };
            let mut failed = 0;
            for row in rows {
                let id: String = row.try_get("id")?;
                let mut body = parse(&row.try_get::<String, _>("body")?)?;
                if let Value::Object(map) = &mut body {
                    map.insert("status".to_owned(), Value::String("failed".to_owned()));
                    map.insert(
                        "error".to_owned(),
                        serde_json::json!({
                            "code": "server_error",
                            "message": "the gateway process serving this response stopped before it finished",
                        }),
                    );
                }
                let body =
                    serde_json::to_string(&body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                failed += sqlx::query(
                    "UPDATE toolbridge_responses SET status = 'failed', owner = NULL, body = $2
                     WHERE id = $1 AND status IN ('queued', 'in_progress')",
                )
                .bind(id)
                .bind(body)
                .execute(&self.pool)
                .await?
                .rows_affected();
            }
            Ok(failed)
        }))
    }
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.guard(async move {
            sqlx::query("SELECT 1").execute(&self.pool).await?;
            Ok(())
        }))
    }
    fn health(&self) -> StoreHealth {
        self.circuit.health()
    }
    fn purge_expired(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.guard(async move {
            let mut tx = self.pool.begin().await?;
            sqlx::query(
                "DELETE FROM toolbridge_items WHERE response_id IN (SELECT id FROM toolbridge_responses WHERE expires_at IS NOT NULL AND expires_at < $1)",
            )
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let n = sqlx::query(
                "DELETE FROM toolbridge_responses WHERE expires_at IS NOT NULL AND expires_at < $1",
            )
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            Ok(n)
        }))
    }
}

fn unfinished(status: &str) -> bool {
    matches!(status, "queued" | "in_progress")
}

/// A process id unique enough across hosts and restarts: time, pid and a counter's address.
fn instance_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}-{:x}", nanos, std::process::id())
}

fn parse(text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A database from before tenants: its rows become the open gateway's, readable by an open
    /// gateway and an admin, and by no key's tenant.
    #[tokio::test]
    async fn rows_from_before_tenants_belong_to_the_open_gateway() {
        let path = std::env::temp_dir().join(format!(
            "toolbridge-pre-tenant-{}-{}.db",
            std::process::id(),
            now()
        ));
        let url = format!("sqlite://{}?mode=rwc", path.display());
        install_default_drivers();
        {
            let pool = AnyPoolOptions::new().connect(&url).await.unwrap();
            let before_tenants = MIGRATIONS
                .iter()
                .position(|m| m.contains("ADD COLUMN tenant"))
                .unwrap();
            sqlx::query("CREATE TABLE toolbridge_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)")
                .execute(&pool)
                .await
                .unwrap();
            for (i, sql) in MIGRATIONS[..before_tenants].iter().enumerate() {
                sqlx::query(*sql).execute(&pool).await.unwrap();
                sqlx::query("INSERT INTO toolbridge_schema (version, applied_at) VALUES ($1, 0)")
                    .bind(i as i64 + 1)
                    .execute(&pool)
                    .await
                    .unwrap();
            }
            sqlx::query("INSERT INTO toolbridge_responses (id, created_at, status, model, body) VALUES ('resp_old', 1, 'completed', 'm', '{\"id\":\"resp_old\"}')")
                .execute(&pool)
                .await
                .unwrap();
            sqlx::query("INSERT INTO toolbridge_items (response_id, kind, position, item_id, body) VALUES ('resp_old', 'input', 0, 'msg_old', '{\"id\":\"msg_old\"}')")
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        }
        let store = SqlStore::open(&url).await.unwrap();
        let open = store
            .get(&Tenant::open(), "resp_old")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(open.input_items.len(), 1);
        let admin = Tenant::named("ops").reading_all();
        assert!(store.get(&admin, "resp_old").await.unwrap().is_some());
        assert!(
            store
                .get(&Tenant::named("team-a"), "resp_old")
                .await
                .unwrap()
                .is_none()
        );
        let ids = ["msg_old".to_owned()];
        assert!(
            store
                .items_by_id(&Tenant::named("team-a"), &ids)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store
                .items_by_id(&Tenant::open(), &ids)
                .await
                .unwrap()
                .len(),
            1
        );
        drop(store);
        let _ = std::fs::remove_file(&path);
    }
}
