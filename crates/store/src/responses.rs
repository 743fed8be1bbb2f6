//! The SQL of stored responses and their items: the write of one record and its items (in a
//! transaction of its own on PostgreSQL, in a batch of the `writer` on SQLite), the guarded
//! write that never overwrites a final response, cancel, reads, delete, the input-item pages
//! and the lookup of items by id.
//!
//! Every query here filters by tenant in its SQL (reads `(tenant = $n OR $all = 1)`, writes the
//! tenant's own name). Not here: the chain walk (`chain`) and the cross-tenant sweeps (`sweeps`).

use std::collections::HashMap;

use serde_json::Value;
use sqlx::{AnyConnection, Row};

use crate::sql::{PageSql, unfinished};
use crate::{ItemPage, Page, ResponseRecord, SqlStore, StoreError, StoredResponse, Tenant, parse};

const RESPONSE_INPUT_PAGES: PageSql = PageSql {
    position: "SELECT position FROM toolbridge_items WHERE response_id = $1 AND kind = 'input' AND item_id = $2 AND (tenant = $3 OR $4 = 1)",
    asc: "SELECT body FROM toolbridge_items WHERE response_id = $1 AND kind = 'input' AND position > $2 AND (tenant = $4 OR $5 = 1) ORDER BY position ASC LIMIT $3",
    desc: "SELECT body FROM toolbridge_items WHERE response_id = $1 AND kind = 'input' AND position < $2 AND (tenant = $4 OR $5 = 1) ORDER BY position DESC LIMIT $3",
};

/// The write of a response row, guarded: `$1`–`$9` are id, created_at, status, model,
/// previous_response_id, expires_at, body, owner and tenant. The update applies only while the
/// tenant's own stored response is unfinished (no row written otherwise).
pub(crate) const UPSERT_GUARDED: &str = "INSERT INTO toolbridge_responses (id, created_at, status, model, previous_response_id, expires_at, body, owner, tenant)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (id) DO UPDATE SET status = excluded.status, body = excluded.body,
       owner = excluded.owner, expires_at = excluded.expires_at
     WHERE toolbridge_responses.tenant = excluded.tenant
       AND toolbridge_responses.status IN ('queued', 'in_progress')";

/// [`UPSERT_GUARDED`] unguarded: the update applies to the tenant's own row, whatever its status.
pub(crate) const UPSERT: &str = "INSERT INTO toolbridge_responses (id, created_at, status, model, previous_response_id, expires_at, body, owner, tenant)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (id) DO UPDATE SET status = excluded.status, model = excluded.model,
       previous_response_id = excluded.previous_response_id, expires_at = excluded.expires_at,
       body = excluded.body, owner = excluded.owner
     WHERE toolbridge_responses.tenant = excluded.tenant";

/// The items of a response being rewritten: `$1` the response id, `$2` the tenant.
pub(crate) const DELETE_ITEMS: &str =
    "DELETE FROM toolbridge_items WHERE response_id = $1 AND tenant = $2";

/// Item rows in one `INSERT`, at most.
pub(crate) const ITEM_ROWS: usize = 16;

/// The `INSERT` of `rows` item rows (1 to [`ITEM_ROWS`]): `$1` the response id and `$2` the
/// tenant in every row, then kind, position, item id and body for each.
pub(crate) fn item_insert(rows: usize) -> &'static str {
    static INSERTS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        (1..=ITEM_ROWS)
            .map(|rows| {
                let values: Vec<String> = (0..rows)
                    .map(|row| {
                        let p = 3 + 4 * row;
                        format!("($1, ${p}, ${}, ${}, ${}, $2)", p + 1, p + 2, p + 3)
                    })
                    .collect();
                format!(
                    "INSERT INTO toolbridge_items (response_id, kind, position, item_id, body, tenant) VALUES {}",
                    values.join(", ")
                )
            })
            .collect()
    });
    INSERTS
        .get(rows.clamp(1, ITEM_ROWS) - 1)
        .map_or("", String::as_str)
}

/// Writes one response record and its items inside the caller's transaction (or savepoint).
///
/// Plain (`unless_final` false): inserts or replaces the tenant's own response; an id of
/// another tenant's is [`StoreError::Conflict`] (ids are random, so this is a forged or
/// colliding id), with nothing written. Guarded: the update applies only while the stored
/// response is unfinished, so a background run finishing after a cancel never undoes it; false
/// (nothing written) when it is final already or another tenant's. On anything but `Ok(true)`
/// the caller rolls back.
pub(crate) async fn write_record(
    conn: &mut AnyConnection,
    instance: &str,
    t: &Tenant,
    r: &ResponseRecord,
    unless_final: bool,
) -> Result<bool, StoreError> {
    let owner = unfinished(&r.status).then_some(instance);
    // One statement either way. Guarded, the update applies only while the stored response is
    // unfinished: on a conflict the row is locked (PostgreSQL) or the database is (SQLite)
    // before that is read, so a cancel lands before it (and wins) or after it.
    let upsert = if unless_final { UPSERT_GUARDED } else { UPSERT };
    let written = sqlx::query(upsert)
        .bind(&r.id)
        .bind(r.created_at)
        .bind(&r.status)
        .bind(&r.model)
        .bind(r.previous_response_id.as_deref())
        .bind(r.expires_at)
        .bind(r.stored_body())
        .bind(owner)
        .bind(t.name())
        .execute(&mut *conn)
        .await?
        .rows_affected();
    match (written, unless_final) {
        (0, true) => return Ok(false),
        (0, false) => return Err(StoreError::Conflict(r.id.clone())),
        _ => {}
    }
    sqlx::query(DELETE_ITEMS)
        .bind(&r.id)
        .bind(t.name())
        .execute(&mut *conn)
        .await?;
    // A few statements whatever the item count: rows go in chunks of `ITEM_ROWS`, each chunk
    // size one statement text, prepared once per connection and reused.
    let items: Vec<_> = r.items().collect();
    for chunk in items.chunks(ITEM_ROWS) {
        let mut insert = sqlx::query(item_insert(chunk.len()))
            .bind(&r.id)
            .bind(t.name());
        for &(kind, position, item_id, body) in chunk {
            insert = insert.bind(kind).bind(position).bind(item_id).bind(body);
        }
        insert.execute(&mut *conn).await?;
    }
    Ok(true)
}

impl SqlStore {
    /// Writes a record in its own transaction (PostgreSQL, where concurrent writers run in
    /// parallel and the server groups their commits itself; SQLite goes through `writer`).
    /// `unless_final`: [`write_record`]'s guarded mode.
    pub(crate) async fn put_direct(
        &self,
        t: &Tenant,
        r: &ResponseRecord,
        unless_final: bool,
    ) -> Result<bool, StoreError> {
        let mut turn = self.write_turn().await?;
        let mut tx = turn.begin().await?;
        match write_record(&mut tx, &self.instance, t, r, unless_final).await {
            Ok(true) => {
                tx.commit().await?;
                Ok(true)
            }
            outcome => {
                tx.rollback().await?;
                outcome
            }
        }
    }

    pub(crate) async fn cancel_inner(
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
        let mut stored = response.response.clone();
        if let Value::Object(map) = &mut stored {
            map.insert("status".to_owned(), Value::String("cancelled".to_owned()));
        }
        // Results kept in their item rows stay there.
        crate::once::lift_value(&mut stored);
        let body =
            serde_json::to_string(&stored).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        sqlx::query(
            "UPDATE toolbridge_responses SET status = 'cancelled', owner = NULL, body = $2
             WHERE id = $1 AND tenant = $3 AND status IN ('queued', 'in_progress')",
        )
        .bind(id)
        .bind(body)
        .bind(own.name())
        .execute(&mut *self.write_turn().await?)
        .await?;
        self.get_inner(&own, id).await
    }

    pub(crate) async fn get_inner(
        &self,
        t: &Tenant,
        id: &str,
    ) -> Result<Option<StoredResponse>, StoreError> {
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
        crate::once::restore(&mut response);
        Ok(Some(response))
    }

    pub(crate) async fn delete_inner(&self, t: &Tenant, id: &str) -> Result<bool, StoreError> {
        self.delete_owned(
            "DELETE FROM toolbridge_items WHERE response_id = $1 AND tenant = $2",
            "DELETE FROM toolbridge_responses WHERE id = $1 AND tenant = $2",
            t,
            id,
        )
        .await
    }

    pub(crate) async fn input_items_inner(
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

    pub(crate) async fn items_by_id_inner(
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
}

/// A response row (`id` … `body`) without its items.
pub(crate) fn response_from_row(row: &sqlx::any::AnyRow) -> Result<StoredResponse, StoreError> {
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
pub(crate) fn push_item(
    response: &mut StoredResponse,
    row: &sqlx::any::AnyRow,
) -> Result<(), StoreError> {
    let kind: String = row.try_get("kind")?;
    let item = parse(&row.try_get::<String, _>("body")?)?;
    if kind == "input" {
        response.input_items.push(item);
    } else {
        response.output_items.push(item);
    }
    Ok(())
}
