//! Storing a response: its `in_progress` record when a stream starts, and the final response
//! (with this turn's items, and the conversation it extends) before the terminal event goes out.
//!
//! *Durability rule:* a response says `store: true` in its terminal event or JSON body only once
//! it is durable. When the final write fails (the store is down, slow past its timeout, or its
//! circuit is open), the answer still goes out, saying `store: false` with a `store_unavailable`
//! diagnostic: the client was not told it can fetch or continue it, and the tokens it paid for
//! are not thrown away. (`response.created` at a stream's start says what was asked; the
//! terminal event says what was done.) A request that needs the store to start at all
//! (`previous_response_id`, a conversation, `background`) fails before it starts with 503
//! `store_unavailable`.

use std::sync::Arc;

use toolbridge_wire::responses::Diagnostic;

/// What storing one response needs, kept until its end.
pub(in crate::http::responses) struct Persist {
    pub(in crate::http::responses) store: Arc<dyn toolbridge_store::ResponseStore>,
    /// The tenant owning what is stored (the caller's).
    pub(in crate::http::responses) tenant: toolbridge_store::Tenant,
    /// This turn's input items, with ids.
    pub(in crate::http::responses) input_items: Vec<serde_json::Value>,
    pub(in crate::http::responses) expires_at: i64,
    /// A background run: its writes never undo a cancel.
    pub(in crate::http::responses) guarded: bool,
    /// The largest response stored; a larger one is not kept (and its `in_progress` record is
    /// removed), so it is never half-visible.
    pub(in crate::http::responses) max_bytes: usize,
    /// Whether the response itself is stored (`store`); a conversation keeps its items either way.
    pub(in crate::http::responses) keep_response: bool,
    /// The conversation this turn's items and output are appended to.
    pub(in crate::http::responses) conversation: Option<String>,
    /// A stream's `in_progress` write, running beside the stream
    /// ([`Self::save_started_text`]); only a removal of the response waits for it.
    pub(in crate::http::responses) started: Option<tokio::task::JoinHandle<()>>,
    /// Where a final record the store refused while down waits to be written again.
    pub(in crate::http::responses) late: Arc<super::late::LateFinals>,
    /// Where the chain ending at this response is held once it is written (`None`: not held).
    pub(in crate::http::responses) chain: Option<super::recent::ChainSink>,
}

/// What a final write could not keep.
#[derive(Debug)]
pub(in crate::http::responses) struct Unsaved {
    /// The response itself is not stored (its `store` becomes false).
    pub(super) response: bool,
    pub(super) message: String,
}

impl Unsaved {
    fn diagnostic(&self) -> Diagnostic {
        toolbridge_core::diagnostics::diag(
            toolbridge_core::diagnostics::STORE_UNAVAILABLE,
            Some(if self.response {
                "store"
            } else {
                "conversation"
            }),
            self.message.clone(),
        )
    }

    /// Applies the durability rule to the response object about to go out.
    pub(in crate::http::responses) fn mark(
        &self,
        response: &mut toolbridge_wire::responses::Response,
    ) {
        if self.response {
            response.store = false;
        }
        response.toolbridge_diagnostics.push(self.diagnostic());
    }
}

impl Persist {
    /// Records a response as `in_progress` when it starts and waits for the write (a
    /// background run, answered `queued` only once that is stored): if the process dies before
    /// the end, the next start marks it failed (never a half-written response, never a ghost).
    /// A failure is logged and returned.
    pub(in crate::http::responses) async fn save_started(
        &self,
        response: &toolbridge_wire::responses::Response,
        request_id: &str,
    ) -> Result<(), toolbridge_store::StoreError> {
        if !self.keep_response {
            return Ok(());
        }
        let text = toolbridge_store::ResponseText::serialize(response, true);
        match self.started_record(text)? {
            Some(record) => self.write(record, request_id).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// A stream's `in_progress` record, written beside the stream rather than before it: the
    /// stream's first events do not wait for the store. Until the record lands, `GET` and
    /// cancel find the response in this process's in-flight registry (`platform::inflight`),
    /// which the stream joined before it started. If the process dies before this write lands
    /// the response is not found, rather than found failed. A failure is logged; the final
    /// write decides what the client is told.
    ///
    /// The write is guarded (never over a final response), so the two writes may land in
    /// either order on every store and the final one ([`Self::save_text`]) does not wait for
    /// this one: landing second, this one is refused. On the SQLite writer a stream that ended
    /// quickly has both in one batch, and the batch writes only the final one.
    ///
    /// The response is given serialised already (`text`, its outline noted when the response is
    /// kept): the stream's start events carry the same text.
    pub(in crate::http::responses) fn save_started_text(
        &mut self,
        text: toolbridge_store::ResponseText,
        request_id: &str,
    ) {
        let record = match self.started_record(text) {
            Ok(Some(record)) => record,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(
                    request_id,
                    code = e.code(),
                    "the response's start cannot be stored: {e}"
                );
                return;
            }
        };
        let (store, tenant) = (Arc::clone(&self.store), self.tenant.clone());
        let request_id = request_id.to_owned();
        let write = async move {
            let _ = write_record(store.as_ref(), &tenant, true, record, &request_id).await;
        };
        self.started = Some(tokio::spawn(tracing::Instrument::instrument(
            write,
            tracing::Span::current(),
        )));
    }

    /// The `in_progress` record of a response serialised as `text`; `None` when the response
    /// itself is not kept.
    fn started_record(
        &self,
        text: toolbridge_store::ResponseText,
    ) -> Result<Option<toolbridge_store::ResponseRecord>, toolbridge_store::StoreError> {
        if !self.keep_response {
            return Ok(None);
        }
        // A noted text is not read back.
        toolbridge_store::ResponseRecord::from_text(text, &[], Some(self.expires_at)).map(Some)
    }

    /// Waits for the `in_progress` write started beside the stream, if any (before the
    /// response is removed: landing after the removal, it would leave an unfinished record).
    async fn started_written(&mut self) {
        if let Some(started) = self.started.take() {
            let _ = started.await;
        }
    }

    /// Writes a record (guarded: never over a final response); whether it was written (false:
    /// a cancel got there first). A failure is logged and returned.
    pub(super) async fn write(
        &self,
        record: toolbridge_store::ResponseRecord,
        request_id: &str,
    ) -> Result<bool, toolbridge_store::StoreError> {
        write_record(
            self.store.as_ref(),
            &self.tenant,
            self.guarded,
            record,
            request_id,
        )
        .await
    }

    /// [`Self::save_text`] of a response object given only as JSON (serialised here, once).
    pub(in crate::http::responses) async fn save(
        self,
        response: &serde_json::Value,
        request_id: &str,
    ) -> Result<(), Unsaved> {
        let text = serde_json::to_string(response).unwrap_or_default();
        let output = || response["output"].as_array().cloned().unwrap_or_default();
        self.save_text(output, text.into(), request_id).await
    }

    /// Stores the final response with this turn's items (and extends its conversation). It runs
    /// before the terminal event or JSON body is sent, so a client told `store: true` can fetch
    /// the response at once; what could not be kept is returned for [`Unsaved::mark`].
    ///
    /// `text` is the response object's JSON (the gateway's own, or a native Responses
    /// upstream's with unknown fields kept): the store keeps `text` itself, its output items as
    /// slices of it, so a caller that sends the same text serialises the response once.
    /// `output` gives the output items as JSON, asked only when a conversation is extended.
    pub(in crate::http::responses) async fn save_text(
        mut self,
        output: impl FnOnce() -> Vec<serde_json::Value>,
        text: toolbridge_store::ResponseText,
        request_id: &str,
    ) -> Result<(), Unsaved> {
        let mut unsaved = None;
        let input_items = std::mem::take(&mut self.input_items);
        if let Some(conversation) = &self.conversation {
            // The turn's input and what the model produced join the conversation.
            let items: Vec<serde_json::Value> =
                input_items.iter().cloned().chain(output()).collect();
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
                Err(e) => {
                    tracing::error!(
                        request_id,
                        code = e.code(),
                        "extending the conversation failed: {e}"
                    );
                    unsaved = Some(Unsaved {
                        response: false,
                        message: format!(
                            "this turn was not added to conversation `{conversation}`: {e}"
                        ),
                    });
                }
            }
        }
        if !self.keep_response {
            return unsaved.map_or(Ok(()), Err);
        }
        let record = match toolbridge_store::ResponseRecord::from_text(
            text,
            &input_items,
            Some(self.expires_at),
        ) {
            Ok(record) => record,
            Err(e) => {
                tracing::error!(
                    request_id,
                    code = e.code(),
                    "the response cannot be stored: {e}"
                );
                return Err(Unsaved {
                    response: true,
                    message: format!("the response was not stored ({e})"),
                });
            }
        };
        // What the store would keep, counted from lengths already known.
        let size = record.size();
        if size > self.max_bytes {
            tracing::warn!(
                request_id,
                size,
                limit = self.max_bytes,
                "the response is larger than store_max_response_bytes and was not stored"
            );
            self.started_written().await;
            if let Err(e) = self.store.delete(&self.tenant, record.id()).await {
                tracing::error!(
                    request_id,
                    code = e.code(),
                    "removing the unstored response failed: {e}"
                );
            }
            return unsaved.map_or(Ok(()), Err);
        }
        // Kept for a retry should the store refuse it while down (the body is shared, not
        // copied; the record is rebuilt from it only then).
        let body = Arc::clone(record.body());
        let held = self.chain.take().map(|sink| sink.link(&record));
        match self.write(record, request_id).await {
            Ok(written) => {
                // Held only as the store keeps it (not when a cancel was kept instead).
                if let Some(held) = held.filter(|_| written) {
                    held.written(&self.tenant);
                }
                unsaved.map_or(Ok(()), Err)
            }
            Err(e) => Err(self.keep_for_later(e, body, &input_items, request_id)),
        }
    }

    /// After a refused final write: a record the store will take once it is back waits in
    /// [`super::late::LateFinals`] (else the `in_progress` record written at the start would
    /// stay for good); the client is told the response is not stored either way.
    fn keep_for_later(
        &self,
        e: toolbridge_store::StoreError,
        body: Arc<str>,
        input_items: &[serde_json::Value],
        request_id: &str,
    ) -> Unsaved {
        if e.is_outage() {
            match toolbridge_store::ResponseRecord::from_json(
                body,
                input_items,
                Some(self.expires_at),
            ) {
                Ok(record) => {
                    self.late
                        .keep(self.tenant.clone(), record, self.guarded, request_id);
                }
                Err(e) => tracing::error!(
                    request_id,
                    code = e.code(),
                    "the response's final record cannot be kept for a retry: {e}"
                ),
            }
        }
        Unsaved {
            response: true,
            message: format!(
                "the response was not stored ({e}); do not fetch it or continue it with previous_response_id (the gateway writes it later if the store comes back, but does not promise to)"
            ),
        }
    }
}

/// Writes `record` for `tenant` (guarded: never over a final response, and then false: a cancel
/// got there first); a failure is logged and returned.
async fn write_record(
    store: &dyn toolbridge_store::ResponseStore,
    tenant: &toolbridge_store::Tenant,
    guarded: bool,
    record: toolbridge_store::ResponseRecord,
    request_id: &str,
) -> Result<bool, toolbridge_store::StoreError> {
    let span = crate::platform::ops::telemetry::stage_span!("store", what = "response");
    let result = tracing::Instrument::instrument(
        async {
            if guarded {
                store.put_record_unless_final(tenant, record).await
            } else {
                store.put_record(tenant, record).await.map(|()| true)
            }
        },
        span,
    )
    .await;
    if let Err(e) = &result {
        tracing::error!(
            request_id,
            code = e.code(),
            "storing the response failed: {e}"
        );
    }
    result
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolbridge_core::assemble::{ResponseMeta, skeleton};
    use toolbridge_store::{ResponseRecord, ResponseText};
    use toolbridge_wire::responses::CreateResponse;

    /// The gateway's own response, with tools (raw schemas), calls and diagnostics, is noted
    /// while it is serialised: its record does not read the text back, and is the record that
    /// reading it back gives.
    #[test]
    fn a_gateway_response_is_noted_while_it_is_serialised() {
        let request: CreateResponse = serde_json::from_value(json!({
            "model": "m", "input": "hi", "previous_response_id": "resp_0",
            "tools": [
                {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}},
                {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: \"x\""}},
            ],
            "metadata": {"id": "not the id"},
        }))
        .unwrap();
        let meta = ResponseMeta {
            id: "resp_1".to_owned(),
            created_at: 1_700_000_000,
            stored: true,
        };
        let mut response = skeleton(&request, &meta);
        response.output = serde_json::from_value(json!([
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "a \"b\"\n", "annotations": [], "logprobs": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
             "arguments": "{\"id\":\"x\"}", "status": "completed"},
        ]))
        .unwrap();
        let text = ResponseText::serialize(&response, true);
        assert!(text.noted());
        assert_eq!(**text.text(), serde_json::to_string(&response).unwrap());
        let body = std::sync::Arc::clone(text.text());
        let noted = ResponseRecord::from_text(text, &[], None).unwrap();
        let read_back = ResponseRecord::from_json(body, &[], None).unwrap();
        assert_eq!(noted.id(), "resp_1");
        assert_eq!(format!("{noted:?}"), format!("{read_back:?}"));
    }
}
