//! A native Responses upstream: its answer relayed to the client (streamed or whole) with the
//! gateway's identity, diagnostics and storage, and nothing translated. The emit stage comes
//! here when `Dialect::passes_through` says so (earlier stages ask it too: prepare keeps the
//! client's own JSON for it, route turns repair off); every other dialect goes through the
//! decoders.

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;
use toolbridge_providers::dialect::Flow;
use toolbridge_wire::responses::Diagnostic;

use super::meter::Meter;
use super::sse;
use super::transport::{self, Framing, PumpLimits, Wake};
use crate::error::GatewayError;
use crate::http::responses::dispatch::chunks::{UpstreamSse, skipped_diagnostic};
use crate::http::responses::stored::persist::Persist;
use crate::upstream::{MAX_RESPONSE_BODY, read_capped};
use toolbridge_providers::responses::reasoning::Sealing;
use toolbridge_providers::responses::relay::{Relay, whole_restored};
use toolbridge_providers::responses::restore::Restorer;

/// What relaying one answer needs.
pub(super) struct Passthrough {
    /// The gateway's response object (`in_progress`), whose identity the answer takes.
    pub(super) skeleton: toolbridge_wire::responses::Response,
    pub(super) diagnostics: Vec<Diagnostic>,
    pub(super) persist: Option<Persist>,
    pub(super) meter: Meter,
    pub(super) request_id: String,
    /// The profile's `tolerate_unterminated`: a stream cut before its terminal event completes.
    pub(super) tolerate_unterminated: bool,
    /// The response's place among those in flight, left when the pump is dropped.
    pub(super) registration: Option<crate::platform::inflight::Registration>,
    /// The transport's framing of the relayed events.
    pub(super) framing: Framing,
    /// The plan's degraded calls, restored in the answer (`None`: every tool went as declared).
    pub(super) restorer: Option<Restorer>,
    /// The upstream's plaintext reasoning sealed for the client to carry back (`None`: the
    /// profile does not want it replayed).
    pub(super) sealing: Option<Sealing>,
}

impl Passthrough {
    /// The whole answer, made the gateway's and stored; a cancel (`cancel` turning true) ends it
    /// `cancelled` at once.
    pub(super) async fn whole(
        self,
        upstream: reqwest::Response,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<Response, GatewayError> {
        let body = tokio::select! {
            biased;
            () = transport::wait_for(&mut cancel) => None,
            body = read_capped(upstream, MAX_RESPONSE_BODY) => Some(body?),
        };
        let Some(body) = body else {
            let mut cancelled = self.skeleton.clone();
            cancelled.status = toolbridge_wire::responses::ResponseStatus::Cancelled;
            let mut cancelled = serde_json::to_value(&cancelled).unwrap_or_default();
            if let Some(persist) = self.persist
                && let Err(unsaved) = persist.save(&cancelled, &self.request_id).await
            {
                unsaved.mark_value(&mut cancelled);
            }
            self.meter.finish(&cancelled).await;
            return Ok(axum::Json(cancelled).into_response());
        };
        let answer: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
            GatewayError::Upstream(toolbridge_providers::Error::Decode {
                message: format!("not a Responses response: {e}"),
            })
        })?;
        let skeleton = serde_json::to_value(&self.skeleton).unwrap_or_default();
        let response = whole_restored(
            answer,
            &skeleton,
            &self.diagnostics,
            self.tolerate_unterminated,
            self.restorer,
            self.sealing,
        )
        .map_err(GatewayError::Upstream)?;
        let mut response = response;
        if let Some(persist) = self.persist
            && let Err(unsaved) = persist.save(&response, &self.request_id).await
        {
            unsaved.mark_value(&mut response);
        }
        self.meter.finish(&response).await;
        let body = serde_json::to_vec(&response).unwrap_or_default();
        Ok(super::json_ok(body))
    }

    /// The stream, relayed event by event.
    pub(super) async fn stream(
        mut self,
        upstream: UpstreamSse,
        limits: PumpLimits,
        detach: Option<super::detach::Detach>,
    ) -> Response {
        if let Some(persist) = &mut self.persist {
            persist.save_started_beside(&self.skeleton, &self.request_id);
        }
        let skeleton = serde_json::to_value(&self.skeleton).unwrap_or_default();
        let mut relay = Relay::new(skeleton, self.diagnostics)
            .restoring(self.restorer)
            .sealing(self.sealing);
        let mut start = Vec::new();
        relay.start(&mut start);
        let pump = RelayPump {
            upstream,
            relay,
            limits,
            framing: self.framing,
            persist: self.persist,
            meter: Some(self.meter),
            request_id: self.request_id,
            tolerate_unterminated: self.tolerate_unterminated,
            _registration: self.registration,
        };
        sse::sse_answer(
            self.framing,
            value_frames(self.framing, &start),
            super::detach::Detachable::new(pump, detach),
        )
    }
}

/// Pulls the upstream lazily (no task, no channel) through the relay.
struct RelayPump {
    upstream: UpstreamSse,
    relay: Relay,
    limits: PumpLimits,
    framing: Framing,
    persist: Option<Persist>,
    meter: Option<Meter>,
    request_id: String,
    tolerate_unterminated: bool,
    _registration: Option<crate::platform::inflight::Registration>,
}

impl super::detach::Pumped for RelayPump {
    async fn next_frames(&mut self) -> Option<Vec<Bytes>> {
        self.next().await
    }

    fn needs_ending(&self) -> bool {
        !self.relay.is_done()
    }

    fn request_id(&self) -> &str {
        &self.request_id
    }
}

impl RelayPump {
    /// The next batch of frames; `None` after the terminal event. A stored response is written
    /// before its terminal event goes out.
    async fn next(&mut self) -> Option<Vec<Bytes>> {
        if self.relay.is_done() {
            return None;
        }
        let mut out = Vec::new();
        let mut read = 0;
        loop {
            // As the translated pump's step: a burst the upstream has ready is one batch.
            let Some(wake) = transport::batched(
                &mut self.upstream,
                &mut self.limits,
                !out.is_empty(),
                &mut read,
            )
            .await
            else {
                return Some(value_frames(self.framing, &out));
            };
            match wake {
                Wake::Skipped => self.relay.add_diagnostic(skipped_diagnostic()),
                Wake::Event(event) => {
                    let Some(data) = event.data else { continue };
                    match self.relay.on_event(event.event.as_deref(), &data, &mut out) {
                        Ok(Flow::Continue) => {}
                        Ok(Flow::Done) => break,
                        Err(e) => {
                            self.relay.fail("server_error", e.to_string(), &mut out);
                            break;
                        }
                    }
                }
                Wake::Ended => {
                    self.relay.finish(&mut out, self.tolerate_unterminated);
                    break;
                }
                Wake::Broken(code, message) => {
                    self.relay.fail(code, message, &mut out);
                    break;
                }
                Wake::Silence => {
                    let mut batch = value_frames(self.framing, &out);
                    batch.push(self.framing.keepalive());
                    return Some(batch);
                }
                Wake::Stop(stop) => {
                    match stop.failure() {
                        None => self.relay.cancel(&mut out),
                        Some((code, message)) => self.relay.fail(code, message, &mut out),
                    }
                    break;
                }
            }
        }
        if let Some(response) = self.relay.final_response() {
            tracing::debug!(request_id = self.request_id, status = %response["status"], "stream ended");
            let mut response = response.clone();
            if let Some(persist) = self.persist.take()
                && let Err(unsaved) = persist.save(&response, &self.request_id).await
            {
                // The durability rule: the terminal event (the last one) says what was kept.
                unsaved.mark_value(&mut response);
                if let Some(terminal) = out.last_mut()
                    && terminal.get("response").is_some()
                {
                    unsaved.mark_value(&mut terminal["response"]);
                }
            }
            if let Some(meter) = self.meter.take() {
                meter.finish(&response).await;
            }
        }
        Some(value_frames(self.framing, &out))
    }
}

/// One message per relayed event in `framing`, named by its `type`.
fn value_frames(framing: Framing, events: &[serde_json::Value]) -> Vec<Bytes> {
    events
        .iter()
        .map(|event| {
            // An upstream's event name never breaks the framing.
            let name = event["type"]
                .as_str()
                .filter(|t| !t.contains(['\n', '\r']))
                .unwrap_or("message");
            framing.event(name, event)
        })
        .collect()
}
