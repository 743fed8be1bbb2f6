//! [`SqlStore`]: the pool, opening (URL, connection settings, migration), the deadline and
//! circuit every operation runs under, the shared paging of ordered item lists, and the
//! [`ResponseStore`] implementation, which hands each call to the file that owns its SQL.

use std::collections::HashMap;
use std::future::Future;
use std::str::FromStr;

use serde_json::Value;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};

use crate::guard;
use crate::writer::Writer;
use crate::{
    BoxFuture, Conversation, ItemPage, Order, Page, ResponseRecord, ResponseStore, StoreError,
    StoreHealth, StoreOptions, StoredResponse, Tenant,
};

/// The three statements that page through one ordered list: the position of the `after` item,
/// and the next rows in either order (`$1` the list's owner id, `$2` the `after` id or the
/// bound, `$3` the limit; the tenant filter is `$3`, `$4` in the first and `$4`, `$5` in the
/// others).
pub(crate) struct PageSql {
    pub(crate) position: &'static str,
    pub(crate) asc: &'static str,
    pub(crate) desc: &'static str,
}

/// One write's hold on the write connection (see [`SqlStore::write_turn`]).
pub(crate) struct WriteTurn {
    _gate: Option<tokio::sync::OwnedMutexGuard<()>>,
    conn: sqlx::pool::PoolConnection<sqlx::Any>,
}

impl WriteTurn {
    /// A transaction on the write connection.
    pub(crate) async fn begin(&mut self) -> Result<sqlx::Transaction<'_, sqlx::Any>, StoreError> {
        Ok(sqlx::Connection::begin(&mut *self.conn).await?)
    }
}

impl std::ops::Deref for WriteTurn {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &Self::Target {
        &self.conn
    }
}

impl std::ops::DerefMut for WriteTurn {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conn
    }
}

/// The SQL store (SQLite or PostgreSQL).
#[derive(Debug, Clone)]
pub struct SqlStore {
    /// Reads (and, on PostgreSQL, writes).
    pub(crate) pool: AnyPool,
    /// Writes: on SQLite one connection, so this process's writes queue in order instead of
    /// meeting SQLite's sleeping busy handler; on PostgreSQL the same pool as `pool`.
    writes: AnyPool,
    /// SQLite's group commit of response writes (see [`crate::writer`]); `None` on PostgreSQL
    /// and for an in-memory SQLite database.
    pub(crate) writer: Option<std::sync::Arc<Writer>>,
    /// This process's id, owner of the responses it is still producing.
    pub(crate) instance: String,
    pub(crate) sqlite: bool,
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
        let pool_options = || {
            AnyPoolOptions::new()
                .acquire_timeout(limits.acquire_timeout)
                // A PostgreSQL connection can be dropped by its server, so it is pinged before
                // use; a SQLite one is a file handle that cannot be, and a ping would be one
                // more round trip to its worker thread per write batch.
                .test_before_acquire(!sqlite)
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        if sqlite {
                            // WAL with `synchronous = NORMAL`: a commit is a write to the WAL
                            // file, which the kernel keeps when the process is killed; the
                            // fsync waits for checkpoints (see ARCHITECTURE.md, durability),
                            // which the writer's checkpointer runs; a commit here runs one
                            // itself only past the backstop. A page cache of 512 KiB rather
                            // than SQLite's 2 MiB: these connections read a chain's links (an
                            // index) and single responses, and each connection's cache lives
                            // in its own thread's malloc arena, kept after the load
                            // (docs/performance.md, "Memory").
                            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                                "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = {}; PRAGMA cache_size = -512;",
                                crate::checkpoint::BACKSTOP_PAGES
                            )))
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
        };
        // SQLite has one writer: a few connections serve concurrent readers under WAL, the
        // group commit's thread writes responses (see `writer`), and every other write of this
        // process goes through one more connection, in order.
        let pool = pool_options()
            .max_connections(if sqlite { 4 } else { 16 })
            .connect_with(options.clone())
            .await?;
        let writes = if sqlite {
            pool_options()
                .max_connections(1)
                .connect_with(options)
                .await?
        } else {
            pool.clone()
        };
        let instance = instance_id();
        let mut store = Self {
            pool,
            writes,
            writer: None,
            instance,
            sqlite,
            circuit: std::sync::Arc::new(guard::Circuit::new(limits)),
        };
        store.migrate().await?;
        // The group commit's connection, once the file exists with its tables.
        if let Some(path) = crate::writer::sqlite_file(&url) {
            store.writer = Some(std::sync::Arc::new(Writer::start(
                &path,
                store.instance.clone(),
                limits.timeout,
            )?));
        }
        Ok(store)
    }

    /// The pool every write uses (see the `writes` field), without the turn: tests hold
    /// SQLite's lock through it.
    #[cfg(test)]
    pub(crate) fn writes(&self) -> &AnyPool {
        &self.writes
    }

    /// The write connection, for one write: on a SQLite file first this process's turn at
    /// writing (the gate the group commit's thread takes for each batch), so that the two
    /// connections that write here never meet SQLite's sleeping busy handler; the gate is fair,
    /// so a write waits for at most the batch in progress. The caller's deadline bounds both
    /// waits.
    pub(crate) async fn write_turn(&self) -> Result<WriteTurn, StoreError> {
        let gate = match &self.writer {
            Some(writer) => Some(writer.gate().lock_owned().await),
            None => None,
        };
        let conn = self.writes.acquire().await?;
        Ok(WriteTurn { _gate: gate, conn })
    }

    /// Writes a response record: through the group commit on SQLite, in a transaction of its
    /// own on PostgreSQL. See [`crate::responses::write_record`] for `unless_final`.
    async fn write_record(
        &self,
        tenant: &Tenant,
        record: ResponseRecord,
        unless_final: bool,
    ) -> Result<bool, StoreError> {
        match &self.writer {
            Some(writer) => writer.write(tenant, record, unless_final).await,
            None => self.put_direct(tenant, &record, unless_final).await,
        }
    }

    /// Runs one operation under the store's deadline and circuit.
    pub(crate) async fn guard<T>(
        &self,
        operation: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.circuit.run(operation).await
    }

    /// Deletes an object of the tenant's own and its items in one transaction: `items` and
    /// `object` are the two `DELETE`s, each `WHERE <owner> = $1 AND tenant = $2`. True when the
    /// object existed.
    pub(crate) async fn delete_owned(
        &self,
        items: &'static str,
        object: &'static str,
        tenant: &Tenant,
        id: &str,
    ) -> Result<bool, StoreError> {
        let mut turn = self.write_turn().await?;
        let mut tx = turn.begin().await?;
        sqlx::query(items)
            .bind(id)
            .bind(tenant.name())
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query(object)
            .bind(id)
            .bind(tenant.name())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted > 0)
    }

    /// One page of an ordered list of items (a response's inputs, a conversation's items).
    pub(crate) async fn page(
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
}

impl ResponseStore for SqlStore {
    fn create_conversation<'a>(
        &'a self,
        tenant: &'a Tenant,
        conversation: &'a Conversation,
        items: &'a [Value],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.guard(self.create_conversation_inner(tenant, conversation, items)))
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
        Box::pin(self.guard(self.delete_conversation_inner(tenant, id)))
    }
    fn append_conversation_items<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        items: &'a [Value],
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.guard(self.append_conversation_items_inner(tenant, id, items)))
    }
    fn conversation_items<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        page: &'a Page,
    ) -> BoxFuture<'a, Result<Option<ItemPage>, StoreError>> {
        Box::pin(self.guard(self.conversation_items_inner(tenant, id, page)))
    }
    fn put_record<'a>(
        &'a self,
        tenant: &'a Tenant,
        record: ResponseRecord,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(
            self.guard(async move { self.write_record(tenant, record, false).await.map(|_| ()) }),
        )
    }
    fn put_record_unless_final<'a>(
        &'a self,
        tenant: &'a Tenant,
        record: ResponseRecord,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.guard(self.write_record(tenant, record, true)))
    }
    fn cancel<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredResponse>, StoreError>> {
        Box::pin(self.guard(self.cancel_inner(tenant, id)))
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
    fn chain_links<'a>(
        &'a self,
        tenant: &'a Tenant,
        id: &'a str,
        max_depth: usize,
    ) -> BoxFuture<'a, Result<Vec<crate::ChainLink>, StoreError>> {
        Box::pin(self.guard(self.chain_links_inner(tenant, id, max_depth)))
    }
    fn heartbeat(&self, now: i64) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.guard(self.heartbeat_inner(now)))
    }

    fn fail_interrupted(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.guard(self.fail_interrupted_inner(now)))
    }
    fn fail_orphans<'a>(
        &'a self,
        before: i64,
        live: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(self.guard(self.fail_orphans_inner(before, live)))
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
        Box::pin(self.guard(self.purge_expired_inner(now)))
    }
}

pub(crate) fn unfinished(status: &str) -> bool {
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

pub(crate) fn parse(text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
