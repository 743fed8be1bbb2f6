//! The prompt-cache ledger: one row per upstream answer of a session (its `prompt_cache_key`,
//! conversation or Codex session): which provider and model served it, the input tokens, and
//! how many of them the provider's cache read and wrote. An operator reads a session's cached
//! share turn by turn (`toolbridge cache SESSION`, `GET /v1/cache/sessions/{id}`); rows expire
//! and are purged like captures.

use sqlx::Row;

use crate::{BoxFuture, SqlStore, StoreError, Tenant};

/// The most turns one report lists (the latest).
pub const MAX_REPORTED_TURNS: i64 = 500;

/// One upstream answer of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheTurn {
    pub tenant: Tenant,
    pub session: String,
    /// Milliseconds since the epoch.
    pub at: i64,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    /// Seconds since the epoch after which the row is purged.
    pub expires_at: i64,
}

/// One session of the ledger, summed over its turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSession {
    pub tenant: Tenant,
    pub session: String,
    pub turns: u64,
    /// Milliseconds since the epoch of its first and latest turns.
    pub first_at: i64,
    pub last_at: i64,
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
}

/// The most sessions one listing gives (the latest).
pub const MAX_LISTED_SESSIONS: i64 = 200;

/// What the gateway needs of a cache ledger.
pub trait CacheLedger: Send + Sync {
    /// Writes `turns` in one transaction.
    fn put_cache_turns<'a>(
        &'a self,
        turns: &'a [CacheTurn],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The latest turns of `session` (at most [`MAX_REPORTED_TURNS`]), oldest first; only the
    /// tenant's (every tenant's for an admin).
    fn cache_turns<'a>(
        &'a self,
        tenant: &'a Tenant,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Vec<CacheTurn>, StoreError>>;
    /// The latest sessions (at most [`MAX_LISTED_SESSIONS`]), latest first, summed; only the
    /// tenant's (every tenant's for an admin).
    fn cache_sessions<'a>(
        &'a self,
        tenant: &'a Tenant,
    ) -> BoxFuture<'a, Result<Vec<CacheSession>, StoreError>>;
    /// Deletes the turns expired at `now` (seconds); returns how many.
    fn purge_cache_turns(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl CacheLedger for SqlStore {
    fn put_cache_turns<'a>(
        &'a self,
        turns: &'a [CacheTurn],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.guard(async move {
            let mut conn = self.write_turn().await?;
            sqlx::query("BEGIN").execute(&mut *conn).await?;
            for t in turns {
                let written = sqlx::query(
                    "INSERT INTO toolbridge_cache_turns (tenant, session, at, provider, model,
                         input_tokens, cached_tokens, cache_write_tokens, expires_at,
                         output_tokens)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                )
                .bind(t.tenant.name())
                .bind(&t.session)
                .bind(t.at)
                .bind(&t.provider)
                .bind(&t.model)
                .bind(signed(t.input_tokens))
                .bind(signed(t.cached_tokens))
                .bind(signed(t.cache_write_tokens))
                .bind(t.expires_at)
                .bind(signed(t.output_tokens))
                .execute(&mut *conn)
                .await;
                if let Err(e) = written {
                    let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
                    return Err(e.into());
                }
            }
            sqlx::query("COMMIT").execute(&mut *conn).await?;
            Ok(())
        }))
    }

    fn cache_turns<'a>(
        &'a self,
        tenant: &'a Tenant,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Vec<CacheTurn>, StoreError>> {
        Box::pin(self.guard(async move {
            let rows = sqlx::query(
                "SELECT tenant, session, at, provider, model, input_tokens, cached_tokens,
                        cache_write_tokens, output_tokens, expires_at
                 FROM toolbridge_cache_turns
                 WHERE session = $1 AND (tenant = $2 OR $3 = 1)
                 ORDER BY at DESC LIMIT $4",
            )
            .bind(session)
            .bind(tenant.name())
            .bind(tenant.all_flag())
            .bind(MAX_REPORTED_TURNS)
            .fetch_all(&self.pool)
            .await?;
            let mut turns = rows
                .iter()
                .map(|row| {
                    Ok(CacheTurn {
                        tenant: Tenant::named(&row.try_get::<String, _>("tenant")?),
                        session: row.try_get("session")?,
                        at: row.try_get("at")?,
                        provider: row.try_get("provider")?,
                        model: row.try_get("model")?,
                        input_tokens: unsigned(row.try_get("input_tokens")?),
                        cached_tokens: unsigned(row.try_get("cached_tokens")?),
                        cache_write_tokens: unsigned(row.try_get("cache_write_tokens")?),
                        output_tokens: unsigned(row.try_get("output_tokens")?),
                        expires_at: row.try_get("expires_at")?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            turns.reverse();
            Ok(turns)
        }))
    }

    fn cache_sessions<'a>(
        &'a self,
        tenant: &'a Tenant,
    ) -> BoxFuture<'a, Result<Vec<CacheSession>, StoreError>> {
        Box::pin(self.guard(async move {
            let rows = sqlx::query(
                "SELECT tenant, session, COUNT(*) AS turns, MIN(at) AS first_at,
                        MAX(at) AS last_at,
                        CAST(SUM(input_tokens) AS BIGINT) AS input_tokens,
                        CAST(SUM(cached_tokens) AS BIGINT) AS cached_tokens,
                        CAST(SUM(cache_write_tokens) AS BIGINT) AS cache_write_tokens,
                        CAST(SUM(output_tokens) AS BIGINT) AS output_tokens
                 FROM toolbridge_cache_turns
                 WHERE tenant = $1 OR $2 = 1
                 GROUP BY tenant, session
                 ORDER BY MAX(at) DESC LIMIT $3",
            )
            .bind(tenant.name())
            .bind(tenant.all_flag())
            .bind(MAX_LISTED_SESSIONS)
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|row| {
                    // PostgreSQL sums BIGINTs into NUMERIC: the query casts them back.
                    Ok(CacheSession {
                        tenant: Tenant::named(&row.try_get::<String, _>("tenant")?),
                        session: row.try_get("session")?,
                        turns: unsigned(row.try_get("turns")?),
                        first_at: row.try_get("first_at")?,
                        last_at: row.try_get("last_at")?,
                        input_tokens: unsigned(row.try_get("input_tokens")?),
                        cached_tokens: unsigned(row.try_get("cached_tokens")?),
                        cache_write_tokens: unsigned(row.try_get("cache_write_tokens")?),
                        output_tokens: unsigned(row.try_get("output_tokens")?),
                    })
                })
                .collect()
        }))
    }

    fn purge_cache_turns(&self, now: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.guard(async move {
            let n = sqlx::query("DELETE FROM toolbridge_cache_turns WHERE expires_at < $1")
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

    fn turn(tenant: &str, session: &str, at: i64, cached: u64, expires_at: i64) -> CacheTurn {
        CacheTurn {
            tenant: Tenant::named(tenant),
            session: session.to_owned(),
            at,
            provider: "claude".to_owned(),
            model: "claude-x".to_owned(),
            input_tokens: 1000,
            cached_tokens: cached,
            cache_write_tokens: 10,
            output_tokens: 7,
            expires_at,
        }
    }

    async fn exercise(store: &SqlStore, tag: &str) {
        let (a, b) = (Tenant::named("team-a"), Tenant::named("team-b"));
        let (one, two) = (format!("thread-1-{tag}"), format!("thread-2-{tag}"));
        let turns = [
            turn("team-a", &one, 2, 900, i64::MAX),
            turn("team-a", &one, 1, 0, i64::MAX),
            turn("team-b", &one, 3, 500, i64::MAX),
            turn("team-a", &two, 4, 0, 100),
        ];
        store.put_cache_turns(&turns).await.unwrap();
        let mine = store.cache_turns(&a, &one).await.unwrap();
        assert_eq!(mine, vec![turns[1].clone(), turns[0].clone()]);
        // Another tenant's session of the same name is not seen; an admin sees both.
        assert_eq!(
            store.cache_turns(&b, &one).await.unwrap(),
            vec![turns[2].clone()]
        );
        let all = store
            .cache_turns(&Tenant::named("ops").reading_all(), &one)
            .await
            .unwrap();
        assert_eq!(all.len(), 3);
        let listed = store.cache_sessions(&a).await.unwrap();
        let first = listed.iter().find(|s| s.session == one).unwrap();
        assert_eq!((first.turns, first.cached_tokens), (2, 900));
        assert_eq!(
            (first.first_at, first.last_at, first.output_tokens),
            (1, 2, 14)
        );
        assert!(listed.iter().all(|s| s.tenant == a));
        let everyone = store
            .cache_sessions(&Tenant::named("ops").reading_all())
            .await
            .unwrap();
        assert!(everyone.iter().any(|s| s.tenant == b && s.session == one));
        assert!(store.purge_cache_turns(500).await.unwrap() >= 1);
        assert!(store.cache_turns(&a, &two).await.unwrap().is_empty());
        assert_eq!(store.cache_turns(&a, &one).await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn turns_are_kept_by_tenant_and_session_and_purged_at_expiry_on_sqlite() {
        let path = std::env::temp_dir().join(format!(
            "toolbridge-cache-turns-{}-{}.db",
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
    async fn turns_are_kept_by_tenant_and_session_and_purged_at_expiry_on_postgres() {
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
