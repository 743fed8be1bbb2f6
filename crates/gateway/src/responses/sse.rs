//! A streamed answer: the pump that pulls the upstream lazily into the state machine, with
//! keep-alives, a deadline, a forced stop and a cancel, and the SSE framing of events. The
//! dialect decoders and the first-event peek are in `decode`.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt, stream};
use tokio::sync::watch;
use toolbridge_core::assemble::{Assembler, codes};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_providers::dialect::Flow;
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::{Diagnostic, StreamEvent};

use super::abandoned::estimate_used;
use super::meter::Meter;
use super::persist::Persist;
use super::repair::record_repairs;
use super::rounds::{RoundEnd, Rounds};
use super::tool_loop::PendingTools;
use crate::error::GatewayError;
use crate::time;
use crate::upstream::StreamError;

pub(super) use super::chunks::UpstreamSse;
use super::chunks::{Chunk, skipped_diagnostic, upstream_sse};
use super::decode::restarted;
use toolbridge_providers::dialect::Decoder;
use toolbridge_wire::responses::EventKind;

/// Time limits and the forced-stop signal of one stream.
pub(super) struct PumpLimits {
    /// Silence after which a keep-alive comment goes to the client.
    pub(super) keepalive: Option<std::time::Duration>,
    /// When the stream must end, whatever the upstream does.
    pub(super) deadline: tokio::time::Instant,
    /// Turns true when the gateway must end open streams now.
    pub(super) shutdown: watch::Receiver<bool>,
    /// Turns true when the response is cancelled (`/cancel`, or its client left under
    /// `on_client_disconnect = "cancel"`).
    pub(super) cancel: watch::Receiver<bool>,
}

/// The SSE comment sent during long upstream silences; clients skip comments.
pub(super) const KEEPALIVE: &[u8] = b": keep-alive\n\n";

/// The per-response stream pump: pulls upstream events lazily (no task, no channel), feeds the
/// decoder and the assembler, and yields SSE frames.
pub(super) struct Pump {
    pub(super) upstream: UpstreamSse,
    pub(super) decoder: Decoder,
    pub(super) profile: Profile,
    pub(super) assembler: Option<Assembler>,
    pub(super) limits: PumpLimits,
    /// The request as sent upstream, for a usage estimate; `None` when the dialect does not
    /// need one.
    pub(super) usage_basis: Option<Bytes>,
    /// The rounds besides the first (echoes, the tool loop, re-asks).
    pub(super) rounds: Rounds,
    /// The provider and upstream model serving the response, for logs.
    pub(super) provider_name: String,
    pub(super) upstream_model: String,
    /// Gateway calls shown as started, to run at the next step.
    pub(super) pending_tools: Option<PendingTools>,
    /// Charges the tokens and reports the end on the session, at the end.
    pub(super) meter: Option<Meter>,
    /// Items the gateway shows before the model's output (MCP listings).
    pub(super) prelude: Vec<toolbridge_wire::responses::OutputItem>,
    /// Set when the response is stored at its end.
    pub(super) persist: Option<Persist>,
    /// The final response, between its terminal event and its storing.
    pub(super) final_response: Option<toolbridge_wire::responses::Response>,
    /// The terminal event, held back until the final response is stored (it says whether it
    /// was).
    pub(super) terminal: Option<StreamEvent>,
    /// What a failed stream used, estimated, for the charge when it reports no usage.
    pub(super) used: Option<u64>,
    pub(super) pending: Vec<UpstreamEvent>,
    pub(super) diagnostics: Vec<Diagnostic>,
    pub(super) request_id: String,
    /// The stream's one `reconstruct` span, opened at the first batch (not one per batch).
    pub(super) span: Option<tracing::Span>,
    /// The response's place among those in flight, left when the pump is dropped.
    pub(super) _registration: Option<crate::inflight::Registration>,
}

/// What the pump does after an upstream round ended.
pub(super) enum After {
    /// The response ends here.
    Finish,
    /// The next round's stream is in place.
    Continue,
    /// Gateway calls were shown as started: send what is ready, then run them.
    Flush,
    /// A call stayed invalid under the `fail` policy: the response fails with this message.
    Fail(String),
}

pub(super) enum Step {
    Item(Option<Result<Chunk, sse_stream::Error>>),
    Silence,
    Deadline,
    Shutdown,
    Cancelled,
}

impl Pump {
    /// The next batch of frames; `None` after the terminal event. A stored response is written
    /// before its terminal event goes out.
    pub(super) async fn next(&mut self) -> Option<Vec<Bytes>> {
        let mut frames = self.step().await?;
        if let Some(mut response) = self.final_response.take() {
            let mut value = serde_json::to_value(&response).unwrap_or_default();
            let unsaved = match self.persist.take() {
                Some(persist) => persist.save(&value, &self.request_id).await.err(),
                None => None,
            };
            if let Some(unsaved) = &unsaved {
                unsaved.mark(&mut response);
                value = serde_json::to_value(&response).unwrap_or_default();
            }
            if let Some(mut terminal) = self.terminal.take() {
                // The durability rule: the terminal event says what was kept.
                if let Some(unsaved) = &unsaved {
                    match &mut terminal.kind {
                        EventKind::Completed { response }
                        | EventKind::Incomplete { response }
                        | EventKind::Failed { response } => unsaved.mark(response),
                        _ => {}
                    }
                }
                frames.push(frame(&terminal));
            }
            if let Some(meter) = self.meter.take() {
                meter.finish_using(&value, self.used.take()).await;
            }
        }
        Some(frames)
    }

    pub(super) async fn step(&mut self) -> Option<Vec<Bytes>> {
        let mut out = Vec::new();
        loop {
            self.assembler.as_ref()?;
            if let Some(pending) = self.pending_tools.take()
                && let Some(batch) = self.run_pending(pending, &mut out).await
            {
                return Some(batch);
            }
            let keepalive = self.limits.keepalive;
            let step = tokio::select! {
                biased;
                () = wait_for(&mut self.limits.shutdown) => Step::Shutdown,
                () = wait_for(&mut self.limits.cancel) => Step::Cancelled,
                () = tokio::time::sleep_until(self.limits.deadline) => Step::Deadline,
                item = next_or_silence(&mut self.upstream, keepalive) => item,
            };
            match step {
                Step::Item(Some(Ok(Chunk::Skipped))) => {
                    self.assembler
                        .as_mut()?
                        .add_diagnostic(skipped_diagnostic());
                    continue;
                }
                Step::Item(Some(Ok(Chunk::Event(event)))) => {
                    let Some(data) = event.data else { continue };
                    let flow = self.decoder.on_event(
                        &self.profile,
                        event.event.as_deref(),
                        &data,
                        &mut self.pending,
                        &mut self.diagnostics,
                    );
                    let assembler = self.assembler.as_mut()?;
                    for d in self.diagnostics.drain(..) {
                        assembler.add_diagnostic(d);
                    }
                    for ev in self.pending.drain(..) {
                        assembler.on_event(ev, &mut out);
                    }
                    match flow {
                        Ok(Flow::Continue) if out.is_empty() => continue,
                        Ok(Flow::Continue) => return Some(frames(&out)),
                        Ok(Flow::Done) => match self.next_round(&mut out).await {
                            Ok(After::Continue) => continue,
                            Ok(After::Flush) => return Some(frames(&out)),
                            Ok(After::Finish) => return Some(self.finish(out, true)),
                            Ok(After::Fail(message)) => {
                                return Some(self.fail(codes::INVALID_TOOL_CALL, message, out));
                            }
                            Err(e) => return Some(self.fail(e.code(), e.to_string(), out)),
                        },
                        Err(e) => return Some(self.fail(e.code(), e.to_string(), out)),
                    }
                }
                Step::Item(Some(Err(e))) => {
                    let (code, message) = stream_failure(&e);
                    return Some(self.fail(code, message, out));
                }
                // The body ended without `[DONE]`.
                Step::Item(None) => match self.next_round(&mut out).await {
                    Ok(After::Continue) => continue,
                    Ok(After::Flush) => return Some(frames(&out)),
                    Ok(After::Finish) => return Some(self.finish(out, false)),
                    Ok(After::Fail(message)) => {
                        return Some(self.fail(codes::INVALID_TOOL_CALL, message, out));
                    }
                    Err(e) => return Some(self.fail(e.code(), e.to_string(), out)),
                },
                Step::Silence => {
                    let mut batch = frames(&out);
                    batch.push(Bytes::from_static(KEEPALIVE));
                    return Some(batch);
                }
                Step::Deadline => {
                    return Some(
                        self.fail(
                            "server_error",
                            "the upstream stream went on past its deadline (stream_timeout_secs)"
                                .to_owned(),
                            out,
                        ),
                    );
                }
                Step::Shutdown => {
                    return Some(self.fail(
                        "server_shutting_down",
                        "the gateway is shutting down; retry the request".to_owned(),
                        out,
                    ));
                }
                Step::Cancelled => return Some(self.cancel(out)),
            }
        }
    }

    /// Runs the gateway calls shown as started at the last step (a shutdown or a cancel stops
    /// them), then hands them to the round driver. `Some` when the step ends with these frames;
    /// `None` when the next round's stream is in place and nothing is to be sent yet.
    async fn run_pending(
        &mut self,
        pending: PendingTools,
        out: &mut Vec<StreamEvent>,
    ) -> Option<Vec<Bytes>> {
        if self.assembler.is_none() || !self.rounds.runs_tools() {
            return Some(self.finish(std::mem::take(out), true));
        }
        let results = tokio::select! {
            biased;
            () = wait_for(&mut self.limits.shutdown) => Err(Step::Shutdown),
            () = wait_for(&mut self.limits.cancel) => Err(Step::Cancelled),
            results = self.rounds.run_tools(&pending) => Ok(results),
        };
        let results = match results {
            Ok(results) => results,
            Err(Step::Cancelled) => return Some(self.cancel(std::mem::take(out))),
            Err(_) => {
                return Some(self.fail(
                    "server_shutting_down",
                    "the gateway is shutting down; retry the request".to_owned(),
                    std::mem::take(out),
                ));
            }
        };
        let assembler = self.assembler.as_mut()?;
        match self
            .rounds
            .after_tools(pending, results, assembler, out)
            .await
        {
            Ok(RoundEnd::Next(response, payload)) => {
                self.switch_to(response, payload);
                (!out.is_empty()).then(|| frames(out))
            }
            Ok(RoundEnd::Fail(message)) => {
                Some(self.fail(codes::INVALID_TOOL_CALL, message, std::mem::take(out)))
            }
            Ok(RoundEnd::Finish | RoundEnd::Tools(_)) => {
                Some(self.finish(std::mem::take(out), true))
            }
            Err(e) => Some(self.fail(e.code(), e.to_string(), std::mem::take(out))),
        }
    }

    /// At the end of an upstream round: the decoder's last events into the assembler, then the
    /// round driver ([`Rounds::end_round`]) says what comes next — gateway calls shown are left
    /// for the next step ([`After::Flush`]), a next round's stream is switched to
    /// ([`After::Continue`]).
    pub(super) async fn next_round(
        &mut self,
        out: &mut Vec<StreamEvent>,
    ) -> Result<After, GatewayError> {
        let Some(assembler) = self.assembler.as_mut() else {
            return Ok(After::Finish);
        };
        self.decoder.finish(&mut self.pending);
        for ev in self.pending.drain(..) {
            assembler.on_event(ev, out);
        }
        Ok(match self.rounds.end_round(assembler, true, out).await? {
            RoundEnd::Finish => After::Finish,
            RoundEnd::Fail(message) => After::Fail(message),
            RoundEnd::Tools(pending) => {
                self.pending_tools = Some(pending);
                After::Flush
            }
            RoundEnd::Next(response, payload) => {
                self.switch_to(response, payload);
                After::Continue
            }
        })
    }

    /// Reads the next round's stream from here on.
    fn switch_to(&mut self, response: reqwest::Response, payload: Bytes) {
        self.upstream = upstream_sse(response);
        self.decoder = restarted(&self.decoder, &self.profile);
        if self.usage_basis.is_some() {
            self.usage_basis = Some(payload);
        }
    }

    /// Ends the response; `done` says whether the upstream sent its end marker (`[DONE]`,
    /// `message_stop`). Without it and without a finish reason, the answer was cut off
    /// ([`Assembler::finish_unterminated`]).
    pub(super) fn finish(&mut self, mut out: Vec<StreamEvent>, done: bool) -> Vec<Bytes> {
        if let Some(mut assembler) = self.assembler.take() {
            self.decoder.finish(&mut self.pending);
            for ev in self.pending.drain(..) {
                assembler.on_event(ev, &mut out);
            }
            estimate_missing_usage(&mut assembler, self.usage_basis.as_deref(), &mut out);
            let response = if done {
                assembler.finish(time::now(), &mut out)
            } else {
                assembler.finish_unterminated(
                    time::now(),
                    &mut out,
                    self.profile.tolerate_unterminated,
                )
            };
            record_repairs(
                &self.provider_name,
                &self.upstream_model,
                &response.toolbridge_diagnostics,
            );
            self.final_response = Some(response.clone());
            self.hold_terminal(&mut out);
            tracing::debug!(request_id = self.request_id, status = ?response.status, "stream ended");
        }
        frames(&out)
    }

    /// Ends the response `cancelled`; the upstream is dropped with the pump.
    pub(super) fn cancel(&mut self, mut out: Vec<StreamEvent>) -> Vec<Bytes> {
        if let Some(assembler) = self.assembler.take() {
            tracing::info!(request_id = self.request_id, "stream cancelled");
            self.final_response = Some(assembler.cancel(time::now(), &mut out));
        }
        frames(&out)
    }

    pub(super) fn fail(
        &mut self,
        code: &str,
        message: String,
        mut out: Vec<StreamEvent>,
    ) -> Vec<Bytes> {
        if let Some(assembler) = self.assembler.take() {
            tracing::warn!(
                request_id = self.request_id,
                code,
                "stream failed: {message}"
            );
            self.used = Some(estimate_used(&assembler, self.usage_basis.as_deref()));
            let response = assembler.fail(code, message, time::now(), &mut out);
            record_repairs(
                &self.provider_name,
                &self.upstream_model,
                &response.toolbridge_diagnostics,
            );
            self.final_response = Some(response);
            self.hold_terminal(&mut out);
        }
        frames(&out)
    }

    /// Takes the terminal event (the last one) out of `out`, for [`Self::next`] to send once
    /// the response is stored.
    fn hold_terminal(&mut self, out: &mut Vec<StreamEvent>) {
        if out.last().is_some_and(|e| e.kind.is_terminal()) {
            self.terminal = out.pop();
        }
    }
}

/// Gives a response an estimated usage (marked as such) when the upstream reported none and
/// the request sent (`payload`, a Chat request) is at hand.
pub(super) fn estimate_missing_usage(
    assembler: &mut Assembler,
    payload: Option<&[u8]>,
    out: &mut Vec<StreamEvent>,
) {
    let Some(payload) = payload else {
        return;
    };
    if !assembler.needs_usage() {
        return;
    }
    let produced = assembler.produced_text();
    if produced.is_empty() {
        // Nothing was produced: the response fails, and a guess would only mislead.
        return;
    }
    let usage = crate::usage::estimate(payload, &produced);
    assembler.on_event(UpstreamEvent::Usage(usage), out);
    assembler.add_diagnostic(toolbridge_core::diagnostics::diag(
        toolbridge_core::diagnostics::USAGE_ESTIMATED,
        Some("usage"),
        "the upstream reported no token usage; the counts are o200k estimates",
    ));
}

pub(super) fn stream_failure(e: &sse_stream::Error) -> (&'static str, String) {
    if let sse_stream::Error::Body(inner) = e
        && let Some(inner) = inner.downcast_ref::<StreamError>()
    {
        return (
            "server_error",
            match inner {
                StreamError::Idle | StreamError::TooLong => inner.to_string(),
                StreamError::Http(_) => format!("the upstream stream broke: {inner}"),
            },
        );
    }
    (
        "server_error",
        format!("the upstream stream could not be read: {e}"),
    )
}

/// The next upstream event, or [`Step::Silence`] when none came within `keepalive`.
pub(super) async fn next_or_silence(
    upstream: &mut UpstreamSse,
    keepalive: Option<std::time::Duration>,
) -> Step {
    match keepalive {
        None => Step::Item(upstream.next().await),
        Some(limit) => match tokio::time::timeout(limit, upstream.next()).await {
            Ok(item) => Step::Item(item),
            Err(_) => Step::Silence,
        },
    }
}

pub(super) async fn wait_for(shutdown: &mut watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow_and_update() {
            return;
        }
        if shutdown.changed().await.is_err() {
            // The sender is gone: no forced stop will ever come.
            std::future::pending::<()>().await;
        }
    }
}

impl super::detach::Pumped for Pump {
    async fn next_frames(&mut self) -> Option<Vec<Bytes>> {
        let span = self
            .span
            .get_or_insert_with(|| tracing::info_span!("reconstruct", stream = true))
            .clone();
        tracing::Instrument::instrument(self.next(), span).await
    }

    fn needs_ending(&self) -> bool {
        self.assembler.is_some()
    }

    fn request_id(&self) -> &str {
        &self.request_id
    }
}

/// The SSE answer: `response.created` and `response.in_progress` at once, then what the pump
/// yields. `detach` ends a stored response whose client left.
pub(super) fn stream_response(mut pump: Pump, detach: Option<super::detach::Detach>) -> Response {
    let mut start = Vec::new();
    if let Some(assembler) = pump.assembler.as_mut() {
        assembler.start(&mut start);
        for item in std::mem::take(&mut pump.prelude) {
            assembler.gateway_item(item, &mut start);
        }
    }
    sse_answer(frames(&start), super::detach::Detachable::new(pump, detach))
}

/// An SSE answer: the `start` frames at once, then each batch as a pump yields it.
pub(super) fn sse_answer(
    start: Vec<Bytes>,
    batches: impl Stream<Item = Vec<Bytes>> + Send + 'static,
) -> Response {
    let body = stream::iter(start)
        .chain(batches.flat_map(stream::iter))
        .map(Ok::<Bytes, std::convert::Infallible>);
    sse_response(Body::from_stream(body))
}

/// An SSE answer with `body`: never cached or buffered by a proxy.
pub(super) fn sse_response(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        body,
    )
        .into_response()
}

/// One SSE frame per event: `event:` and `data:` lines, LF endings.
pub fn frames(events: &[StreamEvent]) -> Vec<Bytes> {
    events.iter().map(frame).collect()
}

/// Encodes one event as an SSE frame.
pub fn frame(event: &StreamEvent) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(event.name().as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    // Serialising our own types to a Vec cannot fail (string keys only).
    let _ = serde_json::to_writer(&mut buf, event);
    buf.extend_from_slice(b"\n\n");
    Bytes::from(buf)
}
