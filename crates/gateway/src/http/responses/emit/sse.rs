//! A streamed answer: the pump that pulls the upstream lazily into the state machine and yields
//! framed events. It waits in the shared transport loop (`transport`: keep-alives, the deadline,
//! the forced stop, the cancel, their terminal messages, the framing); the dialect decoders and
//! the first-event peek are in `decode`, what a round's end leads to in `rounds`, how the answer
//! ends (finished, cancelled or failed, then stored and metered) in `sse_end`.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt, stream};
use toolbridge_core::assemble::{Assembler, codes};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_providers::dialect::Flow;
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::{Diagnostic, StreamEvent};

use super::tools_pump::Running;
use super::transport::{self, PumpLimits, Wake};
use crate::error::GatewayError;
use crate::http::responses::framing::Framing;
use crate::http::responses::meter::Meter;
use crate::http::responses::rounds::tool_loop::PendingTools;
use crate::http::responses::rounds::{RoundEnd, Rounds};
use crate::http::responses::stored::persist::Persist;

use crate::http::responses::dispatch::chunks::{UpstreamSse, skipped_diagnostic, upstream_sse};
use crate::http::responses::dispatch::decode::restarted;
use toolbridge_providers::dialect::Decoder;

/// The per-response stream pump: pulls upstream events lazily (no task, no channel), feeds the
/// decoder and the assembler, and yields SSE frames.
pub(in crate::http::responses) struct Pump {
    pub(super) upstream: UpstreamSse,
    pub(super) decoder: Decoder,
    pub(super) profile: Profile,
    pub(in crate::http::responses) assembler: Option<Assembler>,
    pub(in crate::http::responses) limits: PumpLimits,
    /// How events become the transport's messages.
    pub(in crate::http::responses) framing: Framing,
    /// The request as sent upstream, for a usage estimate; `None` when the dialect does not
    /// need one.
    pub(super) usage_basis: Option<Bytes>,
    /// The rounds besides the first (echoes, the tool loop, re-asks).
    pub(in crate::http::responses) rounds: Rounds,
    /// The provider and upstream model serving the response, for logs.
    pub(super) provider_name: String,
    pub(super) upstream_model: String,
    /// Gateway calls shown as started, to run at the next step.
    pub(super) pending_tools: Option<PendingTools>,
    /// Gateway calls running, polled step by step.
    pub(in crate::http::responses) running: Option<Running>,
    /// Charges the tokens and reports the end on the session, at the end.
    pub(super) meter: Option<Meter>,
    /// Items the gateway shows before the model's output (MCP listings).
    pub(super) prelude: Vec<toolbridge_wire::responses::OutputItem>,
    /// Set when the response is stored at its end.
    pub(super) persist: Option<Persist>,
    /// Where the response's provider state is kept, before its terminal event goes out.
    pub(super) states: Option<crate::http::responses::stored::provider_state::StateSink>,
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
    pub(super) _registration: Option<crate::platform::inflight::Registration>,
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

impl Pump {
    /// The next batch of frames; `None` after the terminal event. A stored response is written
    /// before its terminal event goes out.
    pub(super) async fn next(&mut self) -> Option<Vec<Bytes>> {
        let mut frames = self.step().await?;
        if let Some(response) = self.final_response.take() {
            self.store_final(response, &mut frames).await;
        }
        Some(frames)
    }

    /// One batch of frames: what the upstream events read in this step produced. A step waits
    /// only for its first event; it takes more while the upstream has them ready (a burst read
    /// in one socket read; [`transport::batched`]), so a burst goes out in one write.
    pub(super) async fn step(&mut self) -> Option<Vec<Bytes>> {
        let mut out = Vec::new();
        let mut read = 0;
        loop {
            self.assembler.as_ref()?;
            if let Some(pending) = self.pending_tools.take()
                && let Some(batch) = self.start_tools(pending, &mut out)
            {
                return Some(batch);
            }
            if let Some(running) = self.running.take()
                && let Some(batch) = self.poll_tools(running, &mut out).await
            {
                return Some(batch);
            }
            let Some(wake) = transport::batched(
                &mut self.upstream,
                &mut self.limits,
                !out.is_empty(),
                &mut read,
            )
            .await
            else {
                return Some(self.frames(&out));
            };
            match wake {
                Wake::Skipped => {
                    self.assembler
                        .as_mut()?
                        .add_diagnostic(skipped_diagnostic());
                }
                Wake::Event(event) => {
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
                        Ok(Flow::Continue) => {}
                        Ok(Flow::Done) => {
                            if let Some(batch) = self.round_ended(true, &mut out).await {
                                return Some(batch);
                            }
                        }
                        Err(e) => return Some(self.fail(e.code(), e.to_string(), out)),
                    }
                }
                // The body ended without the dialect's end marker (`[DONE]`, `message_stop`).
                Wake::Ended => {
                    if let Some(batch) = self.round_ended(false, &mut out).await {
                        return Some(batch);
                    }
                }
                Wake::Broken(code, message) => return Some(self.fail(code, message, out)),
                Wake::Silence => {
                    let mut batch = self.frames(&out);
                    batch.push(self.framing.keepalive());
                    return Some(batch);
                }
                Wake::Stop(stop) => return Some(self.stop(stop, out)),
            }
        }
    }

    /// An upstream round ended (`done`: with its end marker): `None` when the next round's
    /// stream is in place and the step goes on, else the frames the step ends with.
    async fn round_ended(&mut self, done: bool, out: &mut Vec<StreamEvent>) -> Option<Vec<Bytes>> {
        match self.next_round(out).await {
            Ok(After::Continue) => None,
            Ok(After::Flush) => Some(self.frames(out)),
            Ok(After::Finish) => Some(self.finish(std::mem::take(out), done)),
            Ok(After::Fail(message)) => {
                Some(self.fail(codes::INVALID_TOOL_CALL, message, std::mem::take(out)))
            }
            Err(e) => Some(self.fail(e.code(), e.to_string(), std::mem::take(out))),
        }
    }

    /// `events` in the pump's framing.
    pub(in crate::http::responses) fn frames(&self, events: &[StreamEvent]) -> Vec<Bytes> {
        framed(self.framing, events)
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
    pub(in crate::http::responses) fn switch_to(
        &mut self,
        response: reqwest::Response,
        payload: Bytes,
    ) {
        self.upstream = upstream_sse(response);
        self.decoder = restarted(&self.decoder, &self.profile);
        if self.usage_basis.is_some() {
            self.usage_basis = Some(payload);
        }
    }
}

impl super::detach::Pumped for Pump {
    async fn next_frames(&mut self) -> Option<Vec<Bytes>> {
        let span = self
            .span
            .get_or_insert_with(|| {
                crate::platform::ops::telemetry::stage_span!("reconstruct", stream = true)
            })
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
/// yields. `skeleton` is the response as it starts, serialised (the text its `in_progress`
/// record keeps): the two start events carry it as it is, not serialised twice more.
/// `detach` ends a stored response whose client left.
pub(super) fn stream_response(
    mut pump: Pump,
    skeleton: &str,
    detach: Option<super::detach::Detach>,
) -> Response {
    let mut start = Vec::new();
    if let Some(assembler) = pump.assembler.as_mut() {
        assembler.start(&mut start);
        for item in std::mem::take(&mut pump.prelude) {
            assembler.gateway_item(item, &mut start);
        }
    }
    sse_answer(
        pump.framing,
        framed_with(pump.framing, &start, Some(skeleton)),
        super::detach::Detachable::new(pump, detach),
    )
}

/// A streamed answer in `framing`: the `start` frames at once, then each batch as a pump yields
/// it. In SSE each batch is one piece of the body (one chunk on the wire, not one per event);
/// for a message transport (WebSocket), which reads one event per body frame, each frame is
/// its own.
pub(super) fn sse_answer(
    framing: Framing,
    start: Vec<Bytes>,
    batches: impl Stream<Item = Vec<Bytes>> + Send + 'static,
) -> Response {
    let batches = stream::iter([start]).chain(batches);
    let body = match framing {
        Framing::Sse => Body::from_stream(
            batches
                .filter_map(|batch| std::future::ready(joined(batch)))
                .map(Ok::<Bytes, std::convert::Infallible>),
        ),
        Framing::Json => Body::from_stream(
            batches
                .flat_map(stream::iter)
                .map(Ok::<Bytes, std::convert::Infallible>),
        ),
    };
    sse_response(body)
}

/// A batch's frames as one piece; `None` for an empty batch.
fn joined(mut frames: Vec<Bytes>) -> Option<Bytes> {
    match frames.len() {
        0 => None,
        1 => frames.pop(),
        _ => {
            let mut piece = Vec::with_capacity(frames.iter().map(Bytes::len).sum());
            for frame in &frames {
                piece.extend_from_slice(frame);
            }
            Some(Bytes::from(piece))
        }
    }
}

/// An SSE answer with `body`: never cached or buffered by a proxy.
pub(in crate::http::responses) fn sse_response(body: Body) -> Response {
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

/// The frames of `events` in `framing`: one message per event for a message transport, one
/// piece of all of them for SSE.
pub(super) fn framed(framing: Framing, events: &[StreamEvent]) -> Vec<Bytes> {
    framed_with(framing, events, None)
}

/// [`framed`], each event carrying a response written with `response` (that response's JSON
/// text) when it is given.
fn framed_with(framing: Framing, events: &[StreamEvent], response: Option<&str>) -> Vec<Bytes> {
    let write = |buf: &mut Vec<u8>, event: &StreamEvent| match response {
        Some(text) => framing.with_response_into(buf, event, text),
        None => framing.stream_event_into(buf, event),
    };
    match framing {
        // A batch's SSE frames written into one piece, which goes out as it is.
        Framing::Sse if !events.is_empty() => {
            let extra = response.map_or(0, str::len);
            let mut piece = Vec::with_capacity(events.len() * (320 + extra));
            for event in events {
                write(&mut piece, event);
            }
            vec![Bytes::from(piece)]
        }
        _ => events
            .iter()
            .map(|event| {
                let mut buf = Vec::with_capacity(256);
                write(&mut buf, event);
                Bytes::from(buf)
            })
            .collect(),
    }
}

/// Encodes one event as an SSE frame (`event:` and `data:` lines, LF endings).
pub fn frame(event: &StreamEvent) -> Bytes {
    Framing::Sse.stream_event(event)
}
