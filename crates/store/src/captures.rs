//! Request captures: one request seen end to end (the body as received, the upstream requests,
//! the final response), kept for debugging when an operator turns capture on, and deleted at
//! their expiry. The body is JSON text the gateway writes and reads; this crate does not
//! interpret it, and it does not bound it either (the gateway caps a capture before writing).

use serde_json::Value;
use sqlx::Row;

use crate::{BoxFuture, SqlStore, StoreError, Tenant, parse};

/// What the gateway needs of a capture store.
pub trait CaptureStore: Send + Sync {
    /// Writes the capture of `request_id`, owned by `tenant`, replacing an earlier one.
    fn put_capture<'a>(
        &'a self,
        tenant: &'a Tenant,
        request_id: &'a str,
        body: &'a Value,
        created_at: i64,
        expires_at: i64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The capture of `request_id`, unless it is missing, expired at `now` or not the tenant's.
    fn capture<'a>(
        &'a self,
        tenant: &'a Tenant,
        request_id: &'a str,
        now: i64,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>>;
    /// Deletes the captures expired at `now`; returns how many.
    fn purge_captures(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
}

impl CaptureStore for SqlStore {
    fn put_capture<'a>(
        &'a self,
        tenant: &'a Tenant,
        request_id: &'a str,
        body: &'a Value,
        created_at: i64,
        expires_at: i64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.guard(async move {
            let text =
                serde_json::to_string(body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            sqlx::query(
                "INSERT INTO toolbridge_captures (request_id, created_at, expires_at, body, tenant)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (request_id) DO UPDATE
                 SET created_at = excluded.created_at, expires_at = excluded.expires_at,
                     body = excluded.body
                 WHERE toolbridge_captures.tenant = excluded.tenant",
            )
            .bind(request_id)
            .bind(created_at)
            .bind(expires_at)
            .bind(text)
            .bind(tenant.name())
            .execute(&mut *self.write_turn().await?)
            .await?;
            Ok(())
        }))
    }

    fn capture<'a>(
        &'a self,
        tenant: &'a Tenant,
        request_id: &'a str,
        now: i64,
    ) -> BoxFuture<'a, Result<Option<Value>, StoreError>> {
        Box::pin(self.guard(async move {
            let row = sqlx::query(
                "SELECT body FROM toolbridge_captures
                 WHERE request_id = $1 AND expires_at >= $2 AND (tenant = $3 OR $4 = 1)",
            )
            .bind(request_id)
            .bind(now)
            .bind(tenant.name())
            .bind(tenant.all_flag())
            .fetch_optional(&self.pool)
            .await?;
            match row {
                None => Ok(None),
                Some(row) => {
                    let text: String = row.try_get("body")?;
                    parse(&text).map(Some)
                }
            }
        }))
    }

    fn purge_captures(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.guard(async move {
            let n = sqlx::query("DELETE FROM toolbridge_captures WHERE expires_at < $1")
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
    use super::*;

    async fn exercise(store: &SqlStore, tag: &str) {
        let (live, old) = (format!("req_live_{tag}"), format!("req_old_{tag}"));
        let body = serde_json::json!({"request": {"model": "m"}, "upstream": [], "response": null});
        let (a, b) = (Tenant::named("team-a"), Tenant::named("team-b"));
        let admin = Tenant::named("ops").reading_all();
        store
            .put_capture(&a, &live, &body, 100, 1_000)
            .await
            .unwrap();
        store.put_capture(&a, &old, &body, 100, 150).await.unwrap();
        assert_eq!(
            store.capture(&a, &live, 200).await.unwrap(),
            Some(body.clone())
        );
        assert_eq!(
            store.capture(&b, &live, 200).await.unwrap(),
            None,
            "another tenant's"
        );
        assert_eq!(
            store.capture(&admin, &live, 200).await.unwrap(),
            Some(body.clone())
        );
        assert_eq!(store.capture(&a, &old, 200).await.unwrap(), None, "expired");
        // Another tenant cannot overwrite it.
        store
            .put_capture(&b, &live, &serde_json::json!({"request": 2}), 110, 1_000)
            .await
            .unwrap();
        assert_eq!(
            store.capture(&a, &live, 200).await.unwrap(),
            Some(body.clone())
        );
        let replaced = serde_json::json!({"request": 1});
        store
            .put_capture(&a, &live, &replaced, 110, 1_000)
            .await
            .unwrap();
        assert_eq!(store.capture(&a, &live, 200).await.unwrap(), Some(replaced));
        assert!(store.purge_captures(200).await.unwrap() >= 1);
        assert!(store.capture(&a, &live, 200).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn captures_round_trip_and_expire_on_sqlite() {
        let path = std::env::temp_dir().join(format!(
            "toolbridge-captures-{}-{}.db",
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
    async fn captures_round_trip_and_expire_on_postgres() {
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
