//! The schema as an ordered list of steps, and the migration that applies the missing ones at
//! open (one at a time across processes on PostgreSQL, under an advisory lock).
//!
//! Not here: the queries over the tables (`responses`, `conversations`, `chain`, `sweeps`,
//! `keys`, `captures`).

use sqlx::Row;

use crate::{SqlStore, StoreError, now};

/// The schema, in order. Each step runs once, recorded in `toolbridge_schema`.
pub(crate) const MIGRATIONS: &[&str] = &[
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
    // Provider state by call (`provider_states`).
    "CREATE TABLE IF NOT EXISTS toolbridge_provider_states (
        tenant TEXT NOT NULL,
        call_id TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (tenant, call_id)
    )",
    "CREATE INDEX IF NOT EXISTS toolbridge_provider_states_expires ON toolbridge_provider_states (expires_at)",
    "CREATE INDEX IF NOT EXISTS toolbridge_provider_states_age ON toolbridge_provider_states (tenant, created_at)",
    // The prompt-cache ledger (`cache_turns`).
    "CREATE TABLE IF NOT EXISTS toolbridge_cache_turns (
        tenant TEXT NOT NULL,
        session TEXT NOT NULL,
        at BIGINT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens BIGINT NOT NULL,
        cached_tokens BIGINT NOT NULL,
        cache_write_tokens BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
    )",
    "CREATE INDEX IF NOT EXISTS toolbridge_cache_turns_session ON toolbridge_cache_turns (session, at)",
    "CREATE INDEX IF NOT EXISTS toolbridge_cache_turns_expires ON toolbridge_cache_turns (expires_at)",
    // A chain's walk reads only the index (`chain`): without it every step read the row, and
    // on SQLite `tenant`, stored after the body, through the body's overflow pages.
    "CREATE INDEX IF NOT EXISTS toolbridge_responses_links ON toolbridge_responses (id, previous_response_id, tenant, status)",
    // The ledger's output tokens, for a session's cost, and its sessions listed by tenant.
    "ALTER TABLE toolbridge_cache_turns ADD COLUMN output_tokens BIGINT NOT NULL DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS toolbridge_cache_turns_tenant ON toolbridge_cache_turns (tenant, at)",
];

impl SqlStore {
    pub(crate) async fn migrate(&self) -> Result<(), StoreError> {
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
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use sqlx::any::{AnyPoolOptions, install_default_drivers};

    use super::*;
    use crate::{ResponseStore, Tenant};

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
