//! A fresh PostgreSQL database per test, on the server at 127.0.0.1:5432 (or the admin URL in
//! `TOOLBRIDGE_TEST_POSTGRES_URL`). Without a reachable server the caller skips and says so,
//! except on CI (`CI` set), where that is a failure: CI must test PostgreSQL.

/// A database made for one test.
#[derive(Debug, Clone)]
pub struct Database {
    /// The database's name.
    pub name: String,
    /// Its connection URL.
    pub url: String,
    /// The server part of the URL (`postgres://user@host:port`), for building other URLs.
    pub server: String,
    admin: String,
}

impl Database {
    /// Drops the database (its connections closed by force); failures are ignored.
    pub async fn remove(self) {
        if let Ok(mut conn) = <sqlx::AnyConnection as sqlx::Connection>::connect(&self.admin).await
        {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&mut conn)
            .await;
        }
    }
}

/// Drops and creates `toolbridge_{tag}_{pid}`; `None` when PostgreSQL is not reachable outside
/// CI (the skip is said on stderr, naming `tag`).
pub async fn fresh_database(tag: &str) -> Option<Database> {
    let admin = std::env::var("TOOLBRIDGE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    sqlx::any::install_default_drivers();
    let mut conn = match <sqlx::AnyConnection as sqlx::Connection>::connect(&admin).await {
        Ok(c) => c,
        Err(e) if std::env::var("CI").is_ok_and(|v| !v.is_empty()) => {
            panic!("PostgreSQL is not reachable at {admin} on CI: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED {tag} on PostgreSQL: {admin} is not reachable ({e})");
            return None;
        }
    };
    let name = format!("toolbridge_{tag}_{}", std::process::id());
    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create the test database");
    let server = admin
        .rsplit_once('/')
        .map_or(admin.as_str(), |(server, _)| server)
        .to_owned();
    Some(Database {
        url: format!("{server}/{name}"),
        name,
        server,
        admin,
    })
}
