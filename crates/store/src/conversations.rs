//! The SQL of conversations and their items: create, read, delete, append and page.
//!
//! Every query here filters by tenant in its SQL; writes, deletes and appends use the tenant's
//! own name even for an admin.

use serde_json::Value;
use sqlx::Row;

use crate::sql::PageSql;
use crate::{Conversation, ItemPage, Page, SqlStore, StoreError, Tenant, parse};

const CONVERSATION_PAGES: PageSql = PageSql {
    position: "SELECT position FROM toolbridge_conversation_items WHERE conversation_id = $1 AND item_id = $2 AND (tenant = $3 OR $4 = 1)",
    asc: "SELECT body FROM toolbridge_conversation_items WHERE conversation_id = $1 AND position > $2 AND (tenant = $4 OR $5 = 1) ORDER BY position ASC LIMIT $3",
    desc: "SELECT body FROM toolbridge_conversation_items WHERE conversation_id = $1 AND position < $2 AND (tenant = $4 OR $5 = 1) ORDER BY position DESC LIMIT $3",
};

impl SqlStore {
    pub(crate) async fn create_conversation_inner(
        &self,
        tenant: &Tenant,
        conversation: &Conversation,
        items: &[Value],
    ) -> Result<(), StoreError> {
        let metadata = serde_json::to_string(&conversation.metadata)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut turn = self.write_turn().await?;
        let mut tx = turn.begin().await?;
        sqlx::query(
            "INSERT INTO toolbridge_conversations (id, created_at, metadata, tenant) VALUES ($1, $2, $3, $4)",
        )
        .bind(&conversation.id)
        .bind(conversation.created_at)
        .bind(metadata)
        .bind(tenant.name())
        .execute(&mut *tx)
        .await?;
        Self::insert_conversation_items(&mut tx, tenant, &conversation.id, items).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn delete_conversation_inner(
        &self,
        tenant: &Tenant,
        id: &str,
    ) -> Result<bool, StoreError> {
        self.delete_owned(
            "DELETE FROM toolbridge_conversation_items WHERE conversation_id = $1 AND tenant = $2",
            "DELETE FROM toolbridge_conversations WHERE id = $1 AND tenant = $2",
            tenant,
            id,
        )
        .await
    }

    pub(crate) async fn append_conversation_items_inner(
        &self,
        tenant: &Tenant,
        id: &str,
        items: &[Value],
    ) -> Result<bool, StoreError> {
        let mut turn = self.write_turn().await?;
        let mut tx = turn.begin().await?;
        // Writes first (see `insert_conversation_items`); the existence check then runs
        // under the write lock, and a missing conversation (or another tenant's) rolls the
        // items back.
        Self::insert_conversation_items(&mut tx, tenant, id, items).await?;
        let exists =
            sqlx::query("SELECT id FROM toolbridge_conversations WHERE id = $1 AND tenant = $2")
                .bind(id)
                .bind(tenant.name())
                .fetch_optional(&mut *tx)
                .await?
                .is_some();
        if !exists {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn insert_conversation_items(
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        t: &Tenant,
        id: &str,
        items: &[Value],
    ) -> Result<(), StoreError> {
        // Each item's position is computed inside its INSERT, so the transaction's first
        // statement is a write: on SQLite (WAL) a transaction that reads first and then writes
        // fails at once with SQLITE_BUSY_SNAPSHOT when another connection wrote in between,
        // busy timeout or not.
        for item in items {
            let body =
                serde_json::to_string(item).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            sqlx::query(
                "INSERT INTO toolbridge_conversation_items (conversation_id, position, item_id, body, tenant)
                 SELECT $1, COALESCE(MAX(position), -1) + 1, $2, $3, $4
                 FROM toolbridge_conversation_items WHERE conversation_id = $1",
            )
            .bind(id)
            .bind(item.get("id").and_then(Value::as_str))
            .bind(body)
            .bind(t.name())
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    pub(crate) async fn conversation_items_inner(
        &self,
        t: &Tenant,
        id: &str,
        page: &Page,
    ) -> Result<Option<ItemPage>, StoreError> {
        if self.get_conversation_inner(t, id).await?.is_none() {
            return Ok(None);
        }
        self.page(t, id, page, &CONVERSATION_PAGES).await.map(Some)
    }

    pub(crate) async fn get_conversation_inner(
        &self,
        t: &Tenant,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        let Some(row) = sqlx::query(
            "SELECT id, created_at, metadata FROM toolbridge_conversations
             WHERE id = $1 AND (tenant = $2 OR $3 = 1)",
        )
        .bind(id)
        .bind(t.name())
        .bind(t.all_flag())
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        Ok(Some(Conversation {
            id: row.try_get("id")?,
            created_at: row.try_get("created_at")?,
            metadata: parse(&row.try_get::<String, _>("metadata")?)?,
        }))
    }
}
