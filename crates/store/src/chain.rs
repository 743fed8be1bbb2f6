//! The `previous_response_id` chain: two recursive queries whatever its length, bounded by the
//! depth limit and filtered by tenant at every step.
//!
//! Not here: writing the responses the chain links (`responses`).

use std::collections::{HashMap, HashSet};

use sqlx::Row;

use crate::responses::{push_item, response_from_row};
use crate::{SqlStore, StoreError, StoredResponse, Tenant};

impl SqlStore {
    /// Two queries whatever the length: a recursive walk down `previous_response_id` (bounded by
    /// `max_depth`, so a cycle in stored data cannot loop; every step filtered by tenant, so a
    /// link to another tenant's response ends the walk and reads as not found), then every item
    /// of the walked responses. The rows are then checked in order for a cycle, a gap or too
    /// much depth.
    pub(crate) async fn chain_inner(
        &self,
        t: &Tenant,
        id: &str,
        max_depth: usize,
    ) -> Result<Vec<StoredResponse>, StoreError> {
        let rows = self.walk(CHAIN_RESPONSES, t, id, max_depth).await?;
        let mut chain = walked(id, max_depth, &rows, |row| {
            let response = response_from_row(row)?;
            let (id, previous) = (response.id.clone(), response.previous_response_id.clone());
            Ok((response, id, previous))
        })?;

        let items = self.walk(CHAIN_ITEMS, t, id, max_depth).await?;
        let index: HashMap<String, usize> = chain
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        for row in items {
            let owner: String = row.try_get("response_id")?;
            if let Some(response) = index.get(&owner).and_then(|&i| chain.get_mut(i)) {
                push_item(response, &row)?;
            }
        }
        chain.iter_mut().for_each(crate::once::restore);
        chain.reverse();
        Ok(chain)
    }
}

impl SqlStore {
    /// The links of the chain ending at `id`, oldest first: the same walk and checks as
    /// [`Self::chain_inner`] (tenant at every step, cycle, gap, depth), reading only ids and
    /// statuses, one query whatever the length.
    pub(crate) async fn chain_links_inner(
        &self,
        t: &Tenant,
        id: &str,
        max_depth: usize,
    ) -> Result<Vec<ChainLink>, StoreError> {
        let query = if self.sqlite {
            CHAIN_LINKS_SQLITE
        } else {
            CHAIN_LINKS
        };
        let rows = self.walk(query, t, id, max_depth).await?;
        let mut links = walked(id, max_depth, &rows, |row| {
            let link = ChainLink {
                id: row.try_get("id")?,
                status: row.try_get("status")?,
            };
            let id = link.id.clone();
            Ok((link, id, row.try_get("previous_response_id")?))
        })?;
        links.reverse();
        Ok(links)
    }
}

impl SqlStore {
    /// The rows of `query`, one of the walks below, from `id` for tenant `t`, at most
    /// `max_depth` links.
    async fn walk(
        &self,
        query: &'static str,
        t: &Tenant,
        id: &str,
        max_depth: usize,
    ) -> Result<Vec<sqlx::any::AnyRow>, StoreError> {
        let depth = i64::try_from(max_depth).unwrap_or(i64::MAX);
        Ok(sqlx::query(query)
            .bind(id)
            .bind(depth)
            .bind(t.name())
            .bind(t.all_flag())
            .fetch_all(&self.pool)
            .await?)
    }
}

/// The rows of a walk from `id` (newest first), checked in order: each is the response the
/// one before names (else the missing one is not found), none twice (a cycle), at most
/// `max_depth`. `read` gives a row's value, its id and the id it continues.
fn walked<T>(
    id: &str,
    max_depth: usize,
    rows: &[sqlx::any::AnyRow],
    read: impl Fn(&sqlx::any::AnyRow) -> Result<(T, String, Option<String>), StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::with_capacity(rows.len());
    let mut seen = HashSet::new();
    let mut rows = rows.iter();
    let mut next = Some(id.to_owned());
    while let Some(current) = next {
        if !seen.insert(current.clone()) {
            return Err(StoreError::Cycle(current));
        }
        if out.len() >= max_depth {
            return Err(StoreError::TooDeep(max_depth));
        }
        let Some(row) = rows.next() else {
            return Err(StoreError::NotFound(current));
        };
        let (value, id, previous) = read(row)?;
        if id != current {
            return Err(StoreError::NotFound(current));
        }
        next = previous;
        out.push(value);
    }
    Ok(out)
}

/// One response of a chain, as [`crate::ResponseStore::chain_links`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainLink {
    pub id: String,
    pub status: String,
}

/// The recursive walk from `$1` down `previous_response_id`, at most `$2` links below it, only
/// through responses of tenant `$3` (every tenant when `$4 = 1`), as the head of the two chain
/// queries.
macro_rules! chain_walk {
    () => {
        "WITH RECURSIVE walk (id, previous_response_id, depth) AS (\
         SELECT id, previous_response_id, 0 FROM toolbridge_responses \
         WHERE id = $1 AND (tenant = $3 OR $4 = 1) \
         UNION ALL \
         SELECT r.id, r.previous_response_id, w.depth + 1 FROM toolbridge_responses r \
         JOIN walk w ON r.id = w.previous_response_id \
         WHERE w.depth < $2 AND (r.tenant = $3 OR $4 = 1)) "
    };
}

/// The walked responses, newest first.
const CHAIN_RESPONSES: &str = concat!(
    chain_walk!(),
    "SELECT r.id, r.created_at, r.status, r.model, r.previous_response_id, r.expires_at, r.body \
     FROM walk w JOIN toolbridge_responses r ON r.id = w.id ORDER BY w.depth"
);

/// The walked responses' links only, newest first: the walk itself carries them, reading only
/// the `toolbridge_responses_links` index (SQLite is told to: its planner takes the primary
/// key's index, which reads each row, and `tenant` through the body's overflow pages).
macro_rules! chain_links {
    ($indexed:literal) => {
        concat!(
            "WITH RECURSIVE walk (id, previous_response_id, status, depth) AS (\
             SELECT id, previous_response_id, status, 0 FROM toolbridge_responses ",
            $indexed,
            " WHERE id = $1 AND (tenant = $3 OR $4 = 1) \
             UNION ALL \
             SELECT r.id, r.previous_response_id, r.status, w.depth + 1 FROM toolbridge_responses r ",
            $indexed,
            " JOIN walk w ON r.id = w.previous_response_id \
             WHERE w.depth < $2 AND (r.tenant = $3 OR $4 = 1)) \
             SELECT id, status, previous_response_id FROM walk ORDER BY depth"
        )
    };
}
const CHAIN_LINKS: &str = chain_links!("");
const CHAIN_LINKS_SQLITE: &str = chain_links!("INDEXED BY toolbridge_responses_links");

/// Every item of the walked responses.
const CHAIN_ITEMS: &str = concat!(
    chain_walk!(),
    "SELECT i.response_id, i.kind, i.body FROM toolbridge_items i \
     WHERE i.response_id IN (SELECT id FROM walk) AND (i.tenant = $3 OR $4 = 1) \
     ORDER BY i.response_id, i.kind, i.position"
);
