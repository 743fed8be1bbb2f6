//! Provider state kept server-side: what a provider needs back with an assistant turn's calls
//! (a signed thinking block, a Gemini `thoughtSignature`, redacted reasoning), keyed by the
//! tenant and the call's `call_id`, so a client that keeps no `encrypted_content` (or sends
//! `previous_response_id`) still gets its next tool turn accepted, on any gateway sharing the
//! database. The state is JSON text the gateway writes and reads; this crate does not
//! interpret it.
//!
//! Bounded three ways: each row expires (`expires_at`, deleted by the sweep and never read
//! after it), each tenant keeps at most `max_per_tenant` rows (the oldest go at each write;
//! rows written in the same second as the oldest kept may stay beside it), and the gateway caps
//! each state's size before writing.

use std::collections::HashMap;

use sqlx::Row;

use crate::{BoxFuture, SqlStore, StoreError, Tenant};

/// The most `call_id`s looked up in one query.
pub const MAX_LOOKUP: usize = 256;

/// What the gateway needs of a provider-state store.
pub trait ProviderStateStore: Send + Sync {
    /// Writes `(call_id, state)` pairs owned by `tenant` (replacing its earlier ones), then
    /// deletes the tenant's oldest rows beyond `max_per_tenant`.
    fn put_provider_states<'a>(
        &'a self,
        tenant: &'a Tenant,
        states: &'a [(String, String)],
        created_at: i64,
        expires_at: i64,
        max_per_tenant: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The states of those `call_ids` (at most [`MAX_LOOKUP`] are read) that the tenant owns
    /// and that have not expired at `now`.
    fn provider_states<'a>(
        &'a self,
        tenant: &'a Tenant,
        call_ids: &'a [String],
        now: i64,
    ) -> BoxFuture<'a, Result<HashMap<String, String>, StoreError>>;
    /// Deletes the states expired at `now`; returns how many.
    fn purge_provider_states(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
}

impl ProviderStateStore for SqlStore {
    fn put_provider_states<'a>(
        &'a self,
        tenant: &'a Tenant,
        states: &'a [(String, String)],
        created_at: i64,
        expires_at: i64,
        max_per_tenant: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.guard(async move {
            if states.is_empty() {
                return Ok(());
            }
            let mut turn = self.write_turn().await?;
            let mut tx = turn.begin().await?;
            for (call_id, state) in states {
                sqlx::query(
                    "INSERT INTO toolbridge_provider_states
                        (tenant, call_id, state, created_at, expires_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (tenant, call_id) DO UPDATE
                     SET state = excluded.state, created_at = excluded.created_at,
                         expires_at = excluded.expires_at",
                )
                .bind(tenant.name())
                .bind(call_id.as_str())
                .bind(state.as_str())
                .bind(created_at)
                .bind(expires_at)
                .execute(&mut *tx)
                .await?;
            }
            // The bound: rows older than the tenant's `max_per_tenant`-th newest go.
            let keep = i64::try_from(max_per_tenant.max(1) - 1).unwrap_or(i64::MAX);
            sqlx::query(
                "DELETE FROM toolbridge_provider_states
                 WHERE tenant = $1 AND created_at < (
                     SELECT created_at FROM toolbridge_provider_states
                     WHERE tenant = $1 ORDER BY created_at DESC LIMIT 1 OFFSET $2)",
            )
            .bind(tenant.name())
            .bind(keep)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        }))
    }

    fn provider_states<'a>(
        &'a self,
        tenant: &'a Tenant,
        call_ids: &'a [String],
        now: i64,
    ) -> BoxFuture<'a, Result<HashMap<String, String>, StoreError>> {
        Box::pin(self.guard(async move {
            let call_ids = &call_ids[..call_ids.len().min(MAX_LOOKUP)];
            if call_ids.is_empty() {
                return Ok(HashMap::new());
            }
            let slots: Vec<String> = (0..call_ids.len()).map(|i| format!("${}", i + 3)).collect();
            let sql = format!(
                "SELECT call_id, state FROM toolbridge_provider_states
                 WHERE tenant = $1 AND expires_at >= $2 AND call_id IN ({})",
                slots.join(", ")
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(tenant.name())
                .bind(now);
            for id in call_ids {
                query = query.bind(id.as_str());
            }
            let rows = query.fetch_all(&self.pool).await?;
            let mut found = HashMap::with_capacity(rows.len());
            for row in rows {
                found.insert(row.try_get("call_id")?, row.try_get("state")?);
            }
            Ok(found)
        }))
    }

    fn purge_provider_states(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.guard(async move {
            let n = sqlx::query("DELETE FROM toolbridge_provider_states WHERE expires_at < $1")
                .bind(now)
                .execute(&mut *self.write_turn().await?)
                .await?
                .rows_affected();
            Ok(n)
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pair(call_id: &str, state: &str) -> (String, String) {
        (call_id.to_owned(), state.to_owned())
    }

    async fn exercise(store: &SqlStore, tag: &str) {
        let (a, b) = (
            Tenant::named(format!("a-{tag}")),
            Tenant::named(format!("b-{tag}")),
        );
        let ids: Vec<String> = (0..5).map(|i| format!("call_{i}")).collect();
        // Five rows, one per second, bound 3: the two oldest go.
        for (i, id) in ids.iter().enumerate() {
            let at = 100 + i as i64;
            store
                .put_provider_states(&a, &[pair(id, &format!("s{i}"))], at, 1_000, 3)
                .await
                .unwrap();
        }
        let found = store.provider_states(&a, &ids, 200).await.unwrap();
        let mut kept: Vec<&String> = found.keys().collect();
        kept.sort();
        assert_eq!(kept, ["call_2", "call_3", "call_4"], "bounded per tenant");
        assert_eq!(found["call_4"], "s4");
        // Another tenant sees none of them, and its own rows with the same ids are its own.
        assert!(
            store
                .provider_states(&b, &ids, 200)
                .await
                .unwrap()
                .is_empty()
        );
        store
            .put_provider_states(&b, &[pair("call_4", "theirs")], 110, 1_000, 3)
            .await
            .unwrap();
        assert_eq!(
            store.provider_states(&a, &ids, 200).await.unwrap()["call_4"],
            "s4"
        );
        // Expiry: not read past it, and swept.
        store
            .put_provider_states(&a, &[pair("call_old", "old")], 120, 150, 10)
            .await
            .unwrap();
        let old = ["call_old".to_owned()];
        assert_eq!(store.provider_states(&a, &old, 140).await.unwrap().len(), 1);
        assert!(
            store
                .provider_states(&a, &old, 151)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(store.purge_provider_states(151).await.unwrap() >= 1);
        assert!(
            store
                .provider_states(&a, &old, 140)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.provider_states(&a, &ids, 200).await.unwrap().len(), 3);
    }

    #[tokio::test]
    async fn provider_states_are_tenant_scoped_bounded_and_expire_on_sqlite() {
        let path = std::env::temp_dir().join(format!(
            "toolbridge-provider-states-{}-{}.db",
            std::process::id(),
            crate::now()
        ));
        let store = SqlStore::open(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        exercise(&store, "lite").await;
        drop(store);
        let _ = std::fs::remove_file(&path);
    }

    #[tokio::test]
    async fn provider_states_are_tenant_scoped_bounded_and_expire_on_postgres() {
        let store = SqlStore::open("postgres://postgres@127.0.0.1:5432/test")
            .await
            .unwrap();
        let tag = format!(
            "{:x}",
            std::process::id() as u64 * 1_000_003 + crate::now() as u64
        );
        exercise(&store, &tag).await;
    }
}
