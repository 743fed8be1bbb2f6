//! Gateway keys and their usage ledger, in the same database as the responses.
//!
//! A key is stored by the hash of its secret, never the secret; its scopes are JSON text the
//! gateway writes and reads (this crate does not interpret them). The ledger counts tokens per
//! key and period (`day:2025-01-31`, `month:2025-01`: the gateway names the periods), one row
//! each, incremented atomically with `ON CONFLICT … DO UPDATE`. A request's estimate is
//! reserved before it runs ([`KeyStore::reserve_usage`]: one conditional `UPDATE` per period,
//! in one transaction, so concurrent requests cannot all pass a check made before any of them
//! is counted) and settled when its usage is known (`add_usage` with the difference).

use serde_json::Value;
use sqlx::Row;

use crate::{BoxFuture, SqlStore, StoreError, parse};

/// One stored gateway key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecord {
    pub id: String,
    pub name: String,
    /// `sha256:` and the lowercase hex SHA-256 of the secret.
    pub hash: String,
    /// The key's scopes, as the gateway wrote them.
    pub scopes: Value,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// The most keys `list_keys` returns.
pub const MAX_LISTED_KEYS: i64 = 10_000;

/// What the gateway needs of a key store.
pub trait KeyStore: Send + Sync {
    /// Adds a key; an id or hash already present is an error.
    fn create_key<'a>(&'a self, key: &'a KeyRecord) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The key whose secret hashes to `hash`, revoked or not.
    fn key_by_hash<'a>(
        &'a self,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<KeyRecord>, StoreError>>;
    /// Every key, oldest first (at most [`MAX_LISTED_KEYS`]).
    fn list_keys(&self) -> BoxFuture<'_, Result<Vec<KeyRecord>, StoreError>>;
    /// Revokes a key at `now`; false when there is no such key or it was already revoked.
    fn revoke_key<'a>(&'a self, id: &'a str, now: i64) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// True when at least one key was ever created (revoked ones count).
    fn has_keys(&self) -> BoxFuture<'_, Result<bool, StoreError>>;
    /// Reserves `tokens` on the key in each of `periods`, in one transaction: each period's
    /// count grows by `tokens` when it is below that period's limit (`None`: no limit). False,
    /// with nothing changed, when some limited period's count is already at its limit.
    fn reserve_usage<'a>(
        &'a self,
        key_id: &'a str,
        periods: &'a [(String, Option<i64>)],
        tokens: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Adds `tokens` to the key's count in each of `periods` (negative to return part of a
    /// reservation).
    fn add_usage<'a>(
        &'a self,
        key_id: &'a str,
        periods: &'a [String],
        tokens: i64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The key's count in each of `periods`, in order (0 where nothing was recorded).
    fn usage<'a>(
        &'a self,
        key_id: &'a str,
        periods: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<i64>, StoreError>>;
}

fn key_from_row(row: &sqlx::any::AnyRow) -> Result<KeyRecord, StoreError> {
    Ok(KeyRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        hash: row.try_get("hash")?,
        scopes: parse(&row.try_get::<String, _>("scopes")?)?,
        created_at: row.try_get("created_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

impl KeyStore for SqlStore {
    fn create_key<'a>(&'a self, key: &'a KeyRecord) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.guard(async move {
            let scopes = serde_json::to_string(&key.scopes)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            sqlx::query(
                "INSERT INTO toolbridge_keys (id, name, hash, scopes, created_at, revoked_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&key.id)
            .bind(&key.name)
            .bind(&key.hash)
            .bind(scopes)
            .bind(key.created_at)
            .bind(key.revoked_at)
            .execute(&mut *self.write_turn().await?)
            .await?;
            Ok(())
        }))
    }

    fn key_by_hash<'a>(
        &'a self,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<KeyRecord>, StoreError>> {
        Box::pin(self.guard(async move {
            let row = sqlx::query(
                "SELECT id, name, hash, scopes, created_at, revoked_at FROM toolbridge_keys WHERE hash = $1",
            )
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
            row.as_ref().map(key_from_row).transpose()
        }))
    }

    fn list_keys(&self) -> BoxFuture<'_, Result<Vec<KeyRecord>, StoreError>> {
        Box::pin(self.guard(async move {
            let rows = sqlx::query(
                "SELECT id, name, hash, scopes, created_at, revoked_at FROM toolbridge_keys
                 ORDER BY created_at, id LIMIT $1",
            )
            .bind(MAX_LISTED_KEYS)
            .fetch_all(&self.pool)
            .await?;
            rows.iter().map(key_from_row).collect()
        }))
    }

    fn revoke_key<'a>(&'a self, id: &'a str, now: i64) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.guard(async move {
            let n = sqlx::query(
                "UPDATE toolbridge_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            )
            .bind(id)
            .bind(now)
            .execute(&mut *self.write_turn().await?)
            .await?
            .rows_affected();
            Ok(n > 0)
        }))
    }

    fn has_keys(&self) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(self.guard(async move {
            Ok(sqlx::query("SELECT id FROM toolbridge_keys LIMIT 1")
                .fetch_optional(&self.pool)
                .await?
                .is_some())
        }))
    }

    fn reserve_usage<'a>(
        &'a self,
        key_id: &'a str,
        periods: &'a [(String, Option<i64>)],
        tokens: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.guard(async move {
            let mut turn = self.write_turn().await?;
            let mut tx = turn.begin().await?;
            for (period, limit) in periods {
                sqlx::query(
                    "INSERT INTO toolbridge_usage (key_id, period, tokens) VALUES ($1, $2, 0)
                     ON CONFLICT (key_id, period) DO NOTHING",
                )
                .bind(key_id)
                .bind(period)
                .execute(&mut *tx)
                .await?;
                // The condition is evaluated on the row as it stands once its lock is held, so
                // two requests racing for the last of a budget cannot both pass.
                let reserved = sqlx::query(
                    "UPDATE toolbridge_usage SET tokens = tokens + $3
                     WHERE key_id = $1 AND period = $2 AND tokens < $4",
                )
                .bind(key_id)
                .bind(period)
                .bind(tokens)
                .bind(limit.unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if reserved == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
            }
            tx.commit().await?;
            Ok(true)
        }))
    }

    fn add_usage<'a>(
        &'a self,
        key_id: &'a str,
        periods: &'a [String],
        tokens: i64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.guard(async move {
            let mut turn = self.write_turn().await?;
            let mut tx = turn.begin().await?;
            for period in periods {
                sqlx::query(
                    "INSERT INTO toolbridge_usage (key_id, period, tokens) VALUES ($1, $2, $3)
                     ON CONFLICT (key_id, period) DO UPDATE SET tokens = toolbridge_usage.tokens + excluded.tokens",
                )
                .bind(key_id)
                .bind(period)
                .bind(tokens)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        }))
    }

    fn usage<'a>(
        &'a self,
        key_id: &'a str,
        periods: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<i64>, StoreError>> {
        Box::pin(self.guard(async move {
            let mut out = Vec::with_capacity(periods.len());
            for period in periods {
                let row = sqlx::query(
                    "SELECT tokens FROM toolbridge_usage WHERE key_id = $1 AND period = $2",
                )
                .bind(key_id)
                .bind(period)
                .fetch_optional(&self.pool)
                .await?;
                out.push(match row {
                    Some(row) => row.try_get("tokens")?,
                    None => 0,
                });
            }
            Ok(out)
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn record(id: &str, hash: &str) -> KeyRecord {
        KeyRecord {
            id: id.to_owned(),
            name: format!("{id} name"),
            hash: hash.to_owned(),
            scopes: serde_json::json!({"models": ["gpt-*"]}),
            created_at: 100,
            revoked_at: None,
        }
    }

    async fn exercise(store: &SqlStore, tag: &str) {
        let (a, b) = (format!("key_a_{tag}"), format!("key_b_{tag}"));
        let (ha, hb) = (format!("sha256:a{tag}"), format!("sha256:b{tag}"));
        store.create_key(&record(&a, &ha)).await.unwrap();
        store.create_key(&record(&b, &hb)).await.unwrap();
        assert!(store.has_keys().await.unwrap());
        assert!(store.create_key(&record(&a, "sha256:other")).await.is_err());
        let found = store.key_by_hash(&ha).await.unwrap().unwrap();
        assert_eq!(found, record(&a, &ha));
        assert!(store.revoke_key(&a, 200).await.unwrap());
        assert!(!store.revoke_key(&a, 300).await.unwrap(), "revoked once");
        assert!(!store.revoke_key("missing", 300).await.unwrap());
        let found = store.key_by_hash(&ha).await.unwrap().unwrap();
        assert_eq!(found.revoked_at, Some(200));
        let listed = store.list_keys().await.unwrap();
        assert!(listed.iter().any(|k| k.id == b));

        let periods = vec!["day:2025-01-31".to_owned(), "month:2025-01".to_owned()];
        assert_eq!(store.usage(&b, &periods).await.unwrap(), vec![0, 0]);
        store.add_usage(&b, &periods, 40).await.unwrap();
        store.add_usage(&b, &periods[..1], 2).await.unwrap();
        assert_eq!(store.usage(&b, &periods).await.unwrap(), vec![42, 40]);

        // A reservation passes below the limit (the day's count is 42) and is refused at it.
        let limited = vec![(periods[0].clone(), Some(50)), (periods[1].clone(), None)];
        assert!(store.reserve_usage(&b, &limited, 10).await.unwrap());
        assert_eq!(store.usage(&b, &periods).await.unwrap(), vec![52, 50]);
        assert!(!store.reserve_usage(&b, &limited, 10).await.unwrap());
        assert_eq!(store.usage(&b, &periods).await.unwrap(), vec![52, 50]);
        // Settling returns what was not used.
        store.add_usage(&b, &periods, -7).await.unwrap();
        assert_eq!(store.usage(&b, &periods).await.unwrap(), vec![45, 43]);
    }

    #[tokio::test]
    async fn keys_and_usage_round_trip_on_sqlite() {
        let path = std::env::temp_dir().join(format!(
            "toolbridge-keys-{}-{}.db",
            std::process::id(),
            now()
        ));
        let store = SqlStore::open(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        assert!(!store.has_keys().await.unwrap());
        exercise(&store, "lite").await;
        drop(store);
        let _ = std::fs::remove_file(&path);
    }

    #[tokio::test]
    async fn keys_and_usage_round_trip_on_postgres() {
        let store = SqlStore::open("postgres://postgres@127.0.0.1:5432/test")
            .await
            .unwrap();
        let tag = format!("{:x}", std::process::id() as u64 * 1_000_003 + now() as u64);
        exercise(&store, &tag).await;
    }

    /// Issue 15: twenty requests checking a budget worth five before any was charged all
    /// passed. Reservations racing on one row: exactly five fit.
    #[tokio::test]
    async fn parallel_reservations_never_pass_the_limit_on_postgres() {
        let store = SqlStore::open("postgres://postgres@127.0.0.1:5432/test")
            .await
            .unwrap();
        let key = format!("key_race_{:x}_{}", std::process::id(), now());
        let periods = vec![
            (format!("day:{key}"), Some(50)),
            (format!("month:{key}"), None),
        ];
        let attempts = (0..20).map(|_| {
            let (store, key, periods) = (store.clone(), key.clone(), periods.clone());
            tokio::spawn(async move { store.reserve_usage(&key, &periods, 10).await.unwrap() })
        });
        let mut passed = 0;
        for attempt in attempts.collect::<Vec<_>>() {
            passed += usize::from(attempt.await.unwrap());
        }
        assert_eq!(passed, 5);
        let labels: Vec<String> = periods.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(store.usage(&key, &labels).await.unwrap(), vec![50, 50]);
    }

    fn now() -> i64 {
        crate::now()
    }
}
