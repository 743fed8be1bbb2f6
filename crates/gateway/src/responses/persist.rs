//! Storing a response: its `in_progress` record when a stream starts, and the final response
//! (with this turn's items, and the conversation it extends) before the terminal event goes out.

use super::*;

/// What storing one response needs, kept until its end.
pub(super) struct Persist {
    pub(super) store: Arc<dyn toolbridge_store::ResponseStore>,
    /// The tenant owning what is stored (the caller's).
    pub(super) tenant: toolbridge_store::Tenant,
    /// This turn's input items, with ids.
    pub(super) input_items: Vec<serde_json::Value>,
    pub(super) expires_at: i64,
    /// A background run: its writes never undo a cancel.
    pub(super) guarded: bool,
    /// The largest response stored; a larger one is not kept (and its `in_progress` record is
    /// removed), so it is never half-visible.
    pub(super) max_bytes: usize,
    /// Whether the response itself is stored (`store`); a conversation keeps its items either way.
    pub(super) keep_response: bool,
    /// The conversation this turn's items and output are appended to.
    pub(super) conversation: Option<String>,
}

impl Persist {
    /// Stores the final response with this turn's items. It runs before the terminal event is
    /// sent, so a client that sees `response.completed` can fetch the response at once. A failure
    /// is logged: the answer itself already went out.
    /// Records a stream's response as `in_progress` when it starts: if the process dies before
    /// the end, the next start marks it failed (never a half-written response, never a ghost).
    pub(super) async fn save_started(
        &self,
        response: &toolbridge_wire::responses::Response,
        request_id: &str,
    ) {
        if !self.keep_response {
            return;
        }
        let response = serde_json::to_value(response).unwrap_or_default();
        let stored = self.record(&response, Vec::new());
        self.write(&stored, request_id).await;
    }

    /// Writes a record (guarded for background runs); a failure is logged.
    pub(super) async fn write(&self, stored: &toolbridge_store::StoredResponse, request_id: &str) {
        let span = tracing::info_span!("store", what = "response");
        let result = tracing::Instrument::instrument(
            async {
                if self.guarded {
                    self.store
                        .put_unless_final(&self.tenant, stored)
                        .await
                        .map(|_| ())
                } else {
                    self.store.put(&self.tenant, stored).await
                }
            },
            span,
        )
        .await;
        if let Err(e) = result {
            tracing::error!(
                request_id,
                code = e.code(),
                "storing the response failed: {e}"
            );
        }
    }

    /// The store's record of `response` (a response object as JSON: the gateway's own, or a
    /// native Responses upstream's with unknown fields kept).
    pub(super) fn record(
        &self,
        response: &serde_json::Value,
        input_items: Vec<serde_json::Value>,
    ) -> toolbridge_store::StoredResponse {
        let text = |key: &str| response[key].as_str().map(str::to_owned);
        toolbridge_store::StoredResponse {
            id: text("id").unwrap_or_default(),
            created_at: response["created_at"].as_i64().unwrap_or_default(),
            status: text("status").unwrap_or_default(),
            model: text("model").unwrap_or_default(),
            previous_response_id: text("previous_response_id"),
            expires_at: Some(self.expires_at),
            response: response.clone(),
            input_items,
            output_items: response["output"].as_array().cloned().unwrap_or_default(),
        }
    }

    pub(super) async fn save(mut self, response: &serde_json::Value, request_id: &str) {
        let input_items = std::mem::take(&mut self.input_items);
        let stored = self.record(response, input_items);
        if let Some(conversation) = &self.conversation {
            // The turn's input and what the model produced join the conversation.
            let items: Vec<serde_json::Value> = stored
                .input_items
                .iter()
                .chain(&stored.output_items)
                .cloned()
                .collect();
            match self
                .store
                .append_conversation_items(&self.tenant, conversation, &items)
                .await
            {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    request_id,
                    conversation,
                    "the conversation was deleted during the response"
                ),
                Err(e) => tracing::error!(
                    request_id,
                    code = e.code(),
                    "extending the conversation failed: {e}"
                ),
            }
        }
        if !self.keep_response {
            return;
        }
        let size = stored.response.to_string().len()
            + stored
                .input_items
                .iter()
                .chain(&stored.output_items)
                .map(|i| i.to_string().len())
                .sum::<usize>();
        if size > self.max_bytes {
            tracing::warn!(
                request_id,
                size,
                limit = self.max_bytes,
                "the response is larger than store_max_response_bytes and was not stored"
            );
            if let Err(e) = self.store.delete(&self.tenant, &stored.id).await {
                tracing::error!(
                    request_id,
                    code = e.code(),
                    "removing the unstored response failed: {e}"
                );
            }
            return;
        }
        self.write(&stored, request_id).await;
    }
}
