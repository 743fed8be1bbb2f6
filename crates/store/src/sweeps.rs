//! The process's own sweeps: its heartbeat, failing the unfinished responses of processes that
//! stopped and this process's own orphans (unfinished here, no longer running here), and purging
//! expired responses.
//!
//! These are the only queries that read across tenants: they run for the process, never for a
//! request.

use serde_json::Value;
use sqlx::Row;

use crate::{LEASE_SECS, SqlStore, StoreError, parse};

impl SqlStore {
    pub(crate) async fn heartbeat_inner(&self, now: i64) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO toolbridge_instances (id, heartbeat_at) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
        )
        .bind(&self.instance)
        .bind(now)
        .execute(&mut *self.write_turn().await?)
        .await?;
        sqlx::query("DELETE FROM toolbridge_instances WHERE heartbeat_at < $1")
            .bind(now - 10 * LEASE_SECS)
            .execute(&mut *self.write_turn().await?)
            .await?;
        Ok(())
    }

    pub(crate) async fn fail_interrupted_inner(&self, now: i64) -> Result<u64, StoreError> {
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
            let body: String = row.try_get("body")?;
            failed += self
                .fail_row(
                    &id,
                    &body,
                    "the gateway process serving this response stopped before it finished",
                )
                .await?;
        }
        Ok(failed)
    }

    pub(crate) async fn fail_orphans_inner(
        &self,
        before: i64,
        live: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<u64, StoreError> {
        let rows = sqlx::query(
            "SELECT id, body FROM toolbridge_responses WHERE status IN ('queued', 'in_progress')
             AND owner = $1 AND created_at < $2 LIMIT 1000",
        )
        .bind(&self.instance)
        .bind(before)
        .fetch_all(&self.pool)
        .await?;
        let mut failed = 0;
        for row in rows {
            let id: String = row.try_get("id")?;
            if live(&id) {
                continue;
            }
            let body: String = row.try_get("body")?;
            failed += self
                .fail_row(
                    &id,
                    &body,
                    "the gateway could not store how this response ended",
                )
                .await?;
        }
        Ok(failed)
    }

    /// Marks row `id` (body `body`) failed with `message`, if it is still unfinished; 1 when it
    /// was.
    async fn fail_row(&self, id: &str, body: &str, message: &str) -> Result<u64, StoreError> {
        let mut body = parse(body)?;
        if let Value::Object(map) = &mut body {
            map.insert("status".to_owned(), Value::String("failed".to_owned()));
            map.insert(
                "error".to_owned(),
                serde_json::json!({"code": "server_error", "message": message}),
            );
        }
        let body = serde_json::to_string(&body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(sqlx::query(
            "UPDATE toolbridge_responses SET status = 'failed', owner = NULL, body = $2
             WHERE id = $1 AND status IN ('queued', 'in_progress')",
        )
        .bind(id)
        .bind(body)
        .execute(&mut *self.write_turn().await?)
        .await?
        .rows_affected())
    }

    pub(crate) async fn purge_expired_inner(&self, now: i64) -> Result<u64, StoreError> {
        let mut turn = self.write_turn().await?;
        let mut tx = turn.begin().await?;
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
    }
}
