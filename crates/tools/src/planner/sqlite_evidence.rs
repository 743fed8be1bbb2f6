//! [`SqliteEvidenceStore`]: evidence kept in a SQLite file, so rankings survive restarts.
//!
//! One table, `toolbridge_evidence`, indexed by tool and time; `recent` reads the newest records
//! first, as the scorer needs. The store keeps at most `capacity` records per tool, deleting the
//! oldest on write.

use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{Row, SqlitePool};

use super::evidence::{EvidenceRecord, EvidenceStore};
use crate::ToolError;
use crate::tool::BoxFuture;

/// Evidence in SQLite.
#[derive(Debug, Clone)]
pub struct SqliteEvidenceStore {
    pool: SqlitePool,
    capacity: usize,
}

fn failed(e: sqlx::Error) -> ToolError {
    ToolError::Failed(format!("the evidence store failed: {e}"))
}

impl SqliteEvidenceStore {
    /// Opens (creating if needed) the store at `url` (`sqlite://PATH` or `sqlite::memory:`),
    /// keeping at most `capacity` records per tool.
    pub async fn open(url: &str, capacity: usize) -> Result<Self, ToolError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(failed)?
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(5));
        // One connection: an in-memory database exists per connection.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(failed)?;
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS toolbridge_evidence (
                tool TEXT NOT NULL,
                capability TEXT,
                success INTEGER NOT NULL,
                error_code TEXT,
                latency_us INTEGER NOT NULL,
                at_ms INTEGER NOT NULL
            );
            CREATE INDEX IF NOT EXISTS toolbridge_evidence_tool_at ON toolbridge_evidence (tool, at_ms);",
        )
        .execute(&pool)
        .await
        .map_err(failed)?;
        Ok(Self {
            pool,
            capacity: capacity.max(1),
        })
    }
}

fn millis(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl EvidenceStore for SqliteEvidenceStore {
    fn record(&self, record: EvidenceRecord) -> BoxFuture<'_, Result<(), ToolError>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(failed)?;
            sqlx::query(
                "INSERT INTO toolbridge_evidence (tool, capability, success, error_code, latency_us, at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&record.tool)
            .bind(record.capability.as_deref())
            .bind(record.success)
            .bind(record.error_code.as_deref())
            .bind(i64::try_from(record.latency.as_micros()).unwrap_or(i64::MAX))
            .bind(millis(record.at))
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
            sqlx::query(
                "DELETE FROM toolbridge_evidence WHERE tool = $1 AND rowid NOT IN
                 (SELECT rowid FROM toolbridge_evidence WHERE tool = $1 ORDER BY at_ms DESC, rowid DESC LIMIT $2)",
            )
            .bind(&record.tool)
            .bind(i64::try_from(self.capacity).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
            tx.commit().await.map_err(failed)
        })
    }

    fn recent<'a>(
        &'a self,
        tool: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<EvidenceRecord>, ToolError>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT tool, capability, success, error_code, latency_us, at_ms FROM toolbridge_evidence
                 WHERE tool = $1 ORDER BY at_ms DESC, rowid DESC LIMIT $2",
            )
            .bind(tool)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(failed)?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let latency: i64 = row.try_get("latency_us").map_err(failed)?;
                let at: i64 = row.try_get("at_ms").map_err(failed)?;
                out.push(EvidenceRecord {
                    tool: row.try_get("tool").map_err(failed)?,
                    capability: row.try_get("capability").map_err(failed)?,
                    success: row.try_get("success").map_err(failed)?,
                    error_code: row.try_get("error_code").map_err(failed)?,
                    latency: Duration::from_micros(u64::try_from(latency).unwrap_or(0)),
                    at: UNIX_EPOCH + Duration::from_millis(u64::try_from(at).unwrap_or(0)),
                });
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tool: &str, success: bool, at_ms: u64) -> EvidenceRecord {
        EvidenceRecord {
            tool: tool.to_owned(),
            capability: Some("math".to_owned()),
            success,
            error_code: (!success).then(|| "tool_failed".to_owned()),
            latency: Duration::from_millis(3),
            at: UNIX_EPOCH + Duration::from_millis(at_ms),
        }
    }

    #[tokio::test]
    async fn keeps_the_newest_records_and_reads_them_newest_first() {
        let dir = std::env::temp_dir().join(format!("tb-evidence-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("evidence.db").display());
        let store = SqliteEvidenceStore::open(&url, 3).await.unwrap();
        for at in 1..=5 {
            store.record(record("calc", at % 2 == 0, at)).await.unwrap();
        }
        store.record(record("other", true, 9)).await.unwrap();
        let recent = store.recent("calc", 10).await.unwrap();
        let times: Vec<u128> = recent
            .iter()
            .map(|r| r.at.duration_since(UNIX_EPOCH).unwrap().as_millis())
            .collect();
        assert_eq!(
            times,
            [5, 4, 3],
            "the newest three, newest first; the oldest were deleted"
        );
        assert_eq!(recent[1].error_code, None);
        assert_eq!(recent[0].error_code.as_deref(), Some("tool_failed"));
        // It survives a reopen.
        drop(store);
        let again = SqliteEvidenceStore::open(&url, 3).await.unwrap();
        assert_eq!(again.recent("calc", 1).await.unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
