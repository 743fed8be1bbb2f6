//! A streamed answer: the pump (its state in `pump`) that pulls the upstream lazily into the
//! state machine and yields framed events. It waits in the shared transport loop (`transport`:
//! keep-alives, the deadline, the forced stop, the cancel, their terminal messages); the
//! dialect decoders and the first-event peek are in `decode`, what a round's end leads to in
//! `rounds`, how the answer ends (finished, cancelled or failed, then stored and metered) in
//! `sse_end`.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt, stream};
use toolbridge_core::assemble::codes;
use toolbridge_providers::dialect::Flow;
use toolbridge_wire::responses::{OutputItem, StreamEvent};

use super::pump::{Phase, Pump};
use super::transport::{self, Wake};
use crate::error::GatewayError;
use crate::http::responses::dispatch::chunks::skipped_diagnostic;
use crate::http::responses::framing::Framing;
use crate::http::responses::rounds::RoundEnd;

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
        if let Some((response, terminal)) = self.phase.take_final() {
            self.store_final(response, terminal, &mut frames).await;
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
            self.phase.assembler()?;
            if let Some(pending) = self.phase.take_pending()
                && let Some(batch) = self.start_tools(pending, &mut out)
            {
                return Some(batch);
            }
            if let Some(running) = self.phase.take_running()
                && let Some(batch) = self.poll_tools(running, &mut out).await
            {
                return Some(batch);
            }
            let Some(wake) = transport::batched(
                &mut self.round.upstream,
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
                    self.phase
                        .assembler_mut()?
                        .add_diagnostic(skipped_diagnostic());
                }
                Wake::Event(event) => {
                    let Some(data) = event.data else { continue };
                    let round = &mut self.round;
                    let flow = round.decoder.on_event(
                        &round.profile,
                        event.event.as_deref(),
                        &data,
                        &mut round.pending,
                        &mut round.diagnostics,
                    );
                    let assembler = self.phase.assembler_mut()?;
                    for d in round.diagnostics.drain(..) {
                        assembler.add_diagnostic(d);
                    }
                    for ev in round.pending.drain(..) {
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
    pub(super) fn frames(&self, events: &[StreamEvent]) -> Vec<Bytes> {
        framed(self.framing, events)
    }

    /// At the end of an upstream round: the decoder's last events into the assembler, then the
    /// round driver ([`Rounds::end_round`]) says what comes next — gateway calls shown are left
    /// for the next step ([`After::Flush`]), a next round's stream is switched to
    /// ([`After::Continue`]).
    ///
    /// [`Rounds::end_round`]: crate::http::responses::rounds::Rounds::end_round
    pub(super) async fn next_round(
        &mut self,
        out: &mut Vec<StreamEvent>,
    ) -> Result<After, GatewayError> {
        let Some(assembler) = self.phase.assembler_mut() else {
            return Ok(After::Finish);
        };
        self.round.decoder.finish(&mut self.round.pending);
        for ev in self.round.pending.drain(..) {
            assembler.on_event(ev, out);
        }
        Ok(match self.rounds.end_round(assembler, true, out).await? {
            RoundEnd::Finish => After::Finish,
            RoundEnd::Fail(message) => After::Fail(message),
            RoundEnd::Tools(pending) => {
                self.phase
                    .then(|assembler| Phase::ToolsPending(assembler, pending));
                After::Flush
            }
            RoundEnd::Next(response, payload) => {
                self.round.switch_to(response, payload);
                After::Continue
            }
        })
    }
}

impl super::detach::Pumped for Pump {
    async fn next_frames(&mut self) -> Option<Vec<Bytes>> {
        let span = self
            .identity
            .span
            .get_or_insert_with(|| {
                crate::platform::ops::telemetry::stage_span!("reconstruct", stream = true)
            })
            .clone();
        tracing::Instrument::instrument(self.next(), span).await
    }

    fn needs_ending(&self) -> bool {
        self.phase.assembler().is_some()
    }

    fn request_id(&self) -> &str {
        &self.identity.request_id
    }
}

/// The SSE answer: `response.created` and `response.in_progress` at once, then what the pump
/// yields. `prelude`, the items the gateway shows before the model's output (MCP listings),
/// follows the start. `skeleton` is the response as it starts, serialised (the text its
/// `in_progress` record keeps): the two start events carry it as it is, not serialised twice
/// more. `detach` ends a stored response whose client left.
pub(super) fn stream_response(
    mut pump: Pump,
    prelude: Vec<OutputItem>,
    skeleton: &str,
    detach: Option<super::detach::Detach>,
) -> Response {
    let mut start = Vec::new();
    if let Some(assembler) = pump.phase.assembler_mut() {
        assembler.start(&mut start);
        for item in prelude {
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
