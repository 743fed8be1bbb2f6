//! What a response reports when it starts and ends, besides its own events: its tokens charged
//! to the gateway key and the provider's limits, and its progress on the session's side channel
//! (`GET /v1/sessions/{id}/events`, for requests that carry Codex's `session-id` header). The
//! side channel never slows the request: publishing does not wait.
//!
//! Beside the stages, not in one: emit starts and ends it, the tool loop (`rounds`) reports
//! its calls on it. It imports no stage (the charge is `admission`'s).

use std::sync::Arc;

use crate::platform::time;
use crate::state::AppState;

use std::time::Instant;

use crate::platform::auth::Authenticated;
use crate::platform::ops::genai::{Inference, InferenceEnd, InferenceStart, Tokens, ToolRun};
use crate::platform::ops::journal::{self, DiagnosticRow, ItemRow};
use crate::platform::sessions::{MediaRef, ResponseInfo, SessionEvent, ToolInfo};

/// What the end of a response reports: its status and tokens.
struct Ended<'a> {
    status: &'a str,
    input_tokens: u64,
    /// Of the input, what the provider's cache read and wrote.
    cached_tokens: u64,
    cache_write_tokens: u64,
    output_tokens: u64,
    reasoning_tokens: u64,
    /// `None` when the response reports no usage.
    total_tokens: Option<u64>,
}

/// One response's accounting and side channel.
#[derive(Clone)]
pub(in crate::http::responses) struct Meter {
    state: AppState,
    key: Option<Authenticated>,
    provider: String,
    session: Option<String>,
    /// The session whose cache ledger records this response (`platform::cache_ledger`), and
    /// its tenant.
    cache_session: Option<(toolbridge_store::Tenant, String)>,
    response_id: String,
    /// The model label (a route pattern, bounded).
    model: String,
    /// The request's observer, kept for the end of a stream (polled outside the handler).
    observed: Option<Arc<crate::platform::ops::observe::RequestCtx>>,
    /// The response's GenAI inference span (disabled unless spans are exported).
    inference: Inference,
}

impl Meter {
    /// Starts metering `response_id` (publishing `response.started` on the session).
    pub(super) fn start(
        state: &AppState,
        key: Option<Authenticated>,
        (provider, model): (&str, &str),
        (session, cache_session): (Option<String>, Option<(toolbridge_store::Tenant, String)>),
        response_id: &str,
        inference: &InferenceStart<'_>,
    ) -> Self {
        let model = crate::platform::ops::metrics::model_label(&state.config, model);
        let inference = Inference::start(inference);
        let observed = crate::platform::ops::observe::current();
        if let Some(ctx) = &observed {
            ctx.set_labels(provider, model.clone());
        }
        let meter = Self {
            model,
            observed,
            inference,
            state: state.clone(),
            key,
            provider: provider.to_owned(),
            session,
            cache_session: cache_session.filter(|_| state.cache_ledger.is_some()),
            response_id: response_id.to_owned(),
        };
        meter.publish(SessionEvent::ResponseStarted(ResponseInfo::new(
            &meter.response_id,
            time::now_ms(),
        )));
        meter
    }

    /// [`Self::finish`] for the gateway's own response and `text`, its one JSON serialisation,
    /// charging `used` (an estimate of what the upstream consumed) when the response reports no
    /// usage: a failed stream is charged as providers charge it.
    pub(super) async fn finish_response(
        &self,
        response: &toolbridge_wire::responses::Response,
        text: &str,
        used: Option<u64>,
    ) {
        let usage = response.usage.as_ref();
        let ended = Ended {
            status: response.status.as_str(),
            input_tokens: usage.map_or(0, |u| u.input_tokens),
            cached_tokens: usage.map_or(0, |u| u.input_tokens_details.cached_tokens),
            cache_write_tokens: usage.map_or(0, |u| u.input_tokens_details.cache_write_tokens),
            output_tokens: usage.map_or(0, |u| u.output_tokens),
            reasoning_tokens: usage.map_or(0, |u| u.output_tokens_details.reasoning_tokens),
            total_tokens: usage.map(|u| u.total_tokens),
        };
        self.end_inference(response, &ended);
        let error_code = response.error.as_ref().map(|e| e.code.as_str());
        self.journal_end(&ended, error_code, || {
            let diagnostics = response
                .toolbridge_diagnostics
                .iter()
                .map(DiagnosticRow::from)
                .collect();
            (
                response.output.iter().map(item_row).collect(),
                Some(diagnostics),
            )
        });
        self.end(ended, used, Some(text.as_bytes())).await;
    }

    /// Records the gateway's own response on the inference span (its output as JSON only when
    /// content is captured).
    fn end_inference(&self, response: &toolbridge_wire::responses::Response, ended: &Ended<'_>) {
        use toolbridge_wire::responses::OutputItem;
        let output = self
            .inference
            .captures_content()
            .then(|| serde_json::to_value(&response.output).unwrap_or_default());
        self.inference.end(&InferenceEnd {
            response_id: &response.id,
            status: ended.status,
            incomplete_reason: response
                .incomplete_details
                .as_ref()
                .map(|d| d.reason.as_str()),
            error_code: response.error.as_ref().map(|e| e.code.as_str()),
            tool_calls: response.output.iter().any(|item| {
                matches!(
                    item,
                    OutputItem::FunctionCall(_) | OutputItem::CustomToolCall(_)
                )
            }),
            usage: ended.total_tokens.map(|_| tokens_of(ended)),
            output: output.as_ref(),
        });
    }

    /// What the console's journal keeps of the end: status, tokens, the restored items and
    /// (for the gateway's own response) every diagnostic it carried. `rows` runs only when the
    /// console is on.
    fn journal_end(
        &self,
        ended: &Ended<'_>,
        error_code: Option<&str>,
        rows: impl FnOnce() -> (Vec<ItemRow>, Option<Vec<DiagnosticRow>>),
    ) {
        let Some(ctx) = &self.observed else {
            return;
        };
        ctx.note(|entry| {
            entry.status = Some(ended.status.to_owned());
            entry.error_code = error_code.map(str::to_owned);
            entry.tokens = ended.total_tokens.map(|_| journal::Tokens {
                input: ended.input_tokens,
                output: ended.output_tokens,
                cached: ended.cached_tokens,
                cache_write: ended.cache_write_tokens,
            });
            let (output, diagnostics) = rows();
            entry.output = output;
            if let Some(diagnostics) = diagnostics {
                entry.diagnostics = diagnostics;
            }
        });
    }

    async fn end(&self, ended: Ended<'_>, used: Option<u64>, text: Option<&[u8]>) {
        let tokens = ended.total_tokens.or(used).unwrap_or(0);
        crate::platform::ops::metrics::tokens(
            &self.provider,
            &self.model,
            crate::platform::ops::metrics::TokenCounts {
                input: ended.input_tokens,
                cached: ended.cached_tokens,
                cache_write: ended.cache_write_tokens,
                output: ended.output_tokens,
            },
        );
        if let (Some((tenant, session)), Some(ledger), Some(_)) = (
            &self.cache_session,
            &self.state.cache_ledger,
            ended.total_tokens,
        ) {
            ledger.record(toolbridge_store::CacheTurn {
                tenant: tenant.clone(),
                session: session.clone(),
                at: i64::try_from(time::now_ms()).unwrap_or(i64::MAX),
                provider: self.provider.clone(),
                model: self.model.clone(),
                input_tokens: ended.input_tokens,
                cached_tokens: ended.cached_tokens,
                cache_write_tokens: ended.cache_write_tokens,
                output_tokens: ended.output_tokens,
                expires_at: time::now() + crate::platform::cache_ledger::KEPT.as_secs() as i64,
            });
        }
        if ended.total_tokens.is_some() && ended.status != "failed" {
            // What the route's answers use, for the next reservations (`budget`).
            self.state
                .observed_output
                .observe(&self.model, ended.output_tokens);
        }
        if let Some(ctx) = &self.observed {
            ctx.write_capture_json(text, 200).await;
        }
        super::admission::charge(&self.state, self.key.as_ref(), &self.provider, tokens).await;
        self.publish(SessionEvent::ResponseCompleted(
            ResponseInfo::new(&self.response_id, time::now_ms()).status(ended.status),
        ));
    }

    /// The client went away before the end: the tokens used so far (an estimate) are charged,
    /// and the session hears that the response ended `cancelled`.
    pub(super) async fn abandoned(&self, used: u64) {
        super::admission::charge(&self.state, self.key.as_ref(), &self.provider, used).await;
        self.publish(SessionEvent::ResponseCompleted(
            ResponseInfo::new(&self.response_id, time::now_ms()).status("cancelled"),
        ));
    }

    /// A gateway call starting at `step`; the returned handle reports its end.
    pub(in crate::http::responses) fn tool_started(
        &self,
        call_id: &str,
        server: &str,
        tool: &str,
        arguments: &str,
        step: u32,
    ) -> ToolTimer {
        let info = ToolInfo::new(&self.response_id, call_id, tool, step, time::now_ms())
            .server_label(server);
        self.publish(SessionEvent::ToolStarted(info.clone()));
        let capture = self.inference.captures_content();
        ToolTimer {
            info,
            started: Instant::now(),
            span: ToolRun::start(tool, call_id, server, Some(arguments), capture),
        }
    }

    /// Media of this response's item `item_id` (`format`: `png`, `webp`…; a partial's index
    /// and base64 for progress).
    pub(in crate::http::responses) fn media(
        &self,
        item_id: &str,
        format: Option<&str>,
        partial: Option<u32>,
        b64: Option<&str>,
    ) -> MediaRef {
        MediaRef {
            kind: "image".to_owned(),
            item_id: item_id.to_owned(),
            url: format!("/v1/responses/{}", self.response_id),
            mime_type: Some(format!("image/{}", format.unwrap_or("png"))),
            partial_image_index: partial,
            b64: b64
                .filter(|b| b.len() <= crate::platform::sessions::MAX_MEDIA_B64)
                .map(str::to_owned),
        }
    }

    /// A gateway call's progress: `tool.progress` with a note and the media made so far.
    pub(in crate::http::responses) fn tool_progress(
        &self,
        timer: &ToolTimer,
        detail: String,
        media: MediaRef,
    ) {
        let elapsed = u64::try_from(timer.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let info = timer.info.clone().at(time::now_ms(), elapsed);
        self.publish(SessionEvent::ToolProgress(
            info.detail(detail).media(Some(media)),
        ));
    }

    /// A gateway call's end: `tool.completed` with a short summary (and the media it made), or
    /// `tool.failed`.
    pub(in crate::http::responses) fn tool_finished(
        &self,
        timer: ToolTimer,
        result: &Result<String, String>,
        media: Option<MediaRef>,
    ) {
        crate::platform::ops::metrics::tool_call(
            timer.info.server_label.as_deref().unwrap_or(""),
            result.is_ok(),
        );
        let elapsed = u64::try_from(timer.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        timer.span.end(result);
        let info = timer.info.at(time::now_ms(), elapsed);
        self.publish(match result {
            Ok(output) => SessionEvent::ToolCompleted(info.detail(summary(output)).media(media)),
            Err(error) => SessionEvent::ToolFailed(info.error(summary(error))),
        });
    }

    /// One step of the gateway's tool loop.
    pub(in crate::http::responses) fn tool_step(&self) {
        crate::platform::ops::metrics::tool_loop_step(&self.provider);
    }

    fn publish(&self, event: SessionEvent) {
        if let Some(session) = &self.session {
            let tenant = crate::platform::auth::tenant_of(self.key.as_ref());
            self.state.sessions.publish(&tenant, session, event);
        }
    }
}

/// A gateway call in progress, for its end event.
pub(in crate::http::responses) struct ToolTimer {
    info: ToolInfo,
    started: Instant,
    span: ToolRun,
}

/// An output item as the journal lists it.
fn item_row(item: &toolbridge_wire::responses::OutputItem) -> ItemRow {
    use toolbridge_wire::responses::OutputItem;
    let text = |key: &str| match item {
        OutputItem::Other(map) => map.get(key).and_then(serde_json::Value::as_str),
        _ => None,
    };
    let (name, call_id) = match item {
        OutputItem::FunctionCall(c) => (Some(c.name.as_str()), Some(c.call_id.as_str())),
        OutputItem::CustomToolCall(c) => (Some(c.name.as_str()), Some(c.call_id.as_str())),
        OutputItem::McpCall(c) => (Some(c.name.as_str()), None),
        OutputItem::Other(_) => (text("name"), text("call_id")),
        _ => (None, None),
    };
    ItemRow {
        kind: item.kind().to_owned(),
        name: name.map(str::to_owned),
        call_id: call_id.map(str::to_owned),
    }
}

/// The conventions' token counts of a response's end.
fn tokens_of(ended: &Ended<'_>) -> Tokens {
    Tokens {
        input: ended.input_tokens,
        output: ended.output_tokens,
        cache_read: ended.cached_tokens,
        cache_write: ended.cache_write_tokens,
        reasoning: ended.reasoning_tokens,
    }
}

/// The start of a result, for a side-channel event (the bus bounds it again).
fn summary(text: &str) -> String {
    let mut out: String = text.chars().take(200).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}
