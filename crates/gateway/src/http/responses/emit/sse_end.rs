//! The end of a streamed answer: the pump's response finished, cancelled, failed or stopped from
//! outside, with its terminal event held back until the final response is stored; then stored,
//! metered and the terminal event sent with the text that was kept. A pump dropped before its
//! end (the client went away) charges what was used. Not here: reading the upstream and the
//! rounds (`sse`).

use std::sync::Arc;

use axum::body::Bytes;
use toolbridge_store::ResponseText;
use toolbridge_wire::responses::StreamEvent;

use super::abandoned::{charge_abandoned, estimate_used};
use super::pump::{Phase, Pump};
use super::transport::Stop;
use super::usage::estimate_missing_usage;
use crate::http::responses::rounds::repair::record_repairs;
use crate::platform::time;

impl Pump {
    /// Stores the final `response` (its provider state, then the response itself) and meters
    /// it; the `terminal` event held back goes into `frames`, carrying the text that was kept.
    pub(super) async fn store_final(
        &mut self,
        mut response: Box<toolbridge_wire::responses::Response>,
        terminal: Option<StreamEvent>,
        frames: &mut Vec<Bytes>,
    ) {
        let request_id = &self.identity.request_id;
        if let Some(states) = self.ending.states.take() {
            states.save(&response, request_id).await;
        }
        // The one serialisation: the store keeps this text (its record noted while it is
        // written), the terminal event carries it, the capture reads it.
        let persist = self.ending.persist.take();
        let serialized =
            ResponseText::serialize(&response, persist.as_ref().is_some_and(|p| p.keep_response));
        let mut text = Arc::clone(serialized.text());
        let unsaved = match persist {
            Some(persist) => persist
                .save_text(|| super::output_json(&response), serialized, request_id)
                .await
                .err(),
            None => None,
        };
        if let Some(unsaved) = &unsaved {
            unsaved.mark(&mut response);
            text = serde_json::to_string(&response).unwrap_or_default().into();
        }
        if let Some(terminal) = terminal {
            // The terminal event's response is the final response (the durability rule: it
            // says what was kept), so its frame carries the same text.
            frames.push(self.framing.with_response(&terminal, &text));
        }
        if let Some(meter) = self.ending.meter.take() {
            meter
                .finish_response(&response, &text, self.ending.used.take())
                .await;
        }
    }

    /// Ends a stream stopped from outside: `cancelled`, or failed with the stop's terminal code.
    pub(super) fn stop(&mut self, stop: Stop, out: Vec<StreamEvent>) -> Vec<Bytes> {
        match stop.failure() {
            None => self.cancel(out),
            Some((code, message)) => self.fail(code, message, out),
        }
    }

    /// Ends the response; `done` says whether the upstream sent its end marker (`[DONE]`,
    /// `message_stop`). Without it and without a finish reason, the answer was cut off
    /// (the assembler's [`finish_unterminated`]).
    ///
    /// [`finish_unterminated`]: toolbridge_core::assemble::Assembler::finish_unterminated
    pub(super) fn finish(&mut self, mut out: Vec<StreamEvent>, done: bool) -> Vec<Bytes> {
        if let Some(mut assembler) = self.phase.take_assembler() {
            let round = &mut self.round;
            round.decoder.finish(&mut round.pending);
            for ev in round.pending.drain(..) {
                assembler.on_event(ev, &mut out);
            }
            estimate_missing_usage(&mut assembler, round.usage_basis.as_deref(), &mut out);
            let response = if done {
                assembler.finish(time::now(), &mut out)
            } else {
                assembler.finish_unterminated(
                    time::now(),
                    &mut out,
                    round.profile.tolerate_unterminated,
                )
            };
            record_repairs(
                &self.identity.provider_name,
                &self.identity.upstream_model,
                &response.toolbridge_diagnostics,
            );
            let status = response.status;
            self.hold_terminal(response, &mut out);
            tracing::debug!(request_id = self.identity.request_id, status = ?status, "stream ended");
        }
        self.frames(&out)
    }

    /// Ends the response `cancelled`; the upstream is dropped with the pump.
    pub(super) fn cancel(&mut self, mut out: Vec<StreamEvent>) -> Vec<Bytes> {
        if let Some(assembler) = self.phase.take_assembler() {
            tracing::info!(request_id = self.identity.request_id, "stream cancelled");
            // Its terminal event is not held back: it goes out with these frames.
            self.phase = Phase::Storing(Box::new(assembler.cancel(time::now(), &mut out)), None);
        }
        self.frames(&out)
    }

    /// Ends the response failed with `code` and `message`; what it used is estimated for the
    /// charge, should the upstream have reported no usage.
    pub(super) fn fail(
        &mut self,
        code: &str,
        message: String,
        mut out: Vec<StreamEvent>,
    ) -> Vec<Bytes> {
        if let Some(assembler) = self.phase.take_assembler() {
            tracing::warn!(
                request_id = self.identity.request_id,
                code,
                "stream failed: {message}"
            );
            self.ending.used = Some(estimate_used(&assembler, self.round.usage_basis.as_deref()));
            let response = assembler.fail(code, message, time::now(), &mut out);
            record_repairs(
                &self.identity.provider_name,
                &self.identity.upstream_model,
                &response.toolbridge_diagnostics,
            );
            self.hold_terminal(response, &mut out);
        }
        self.frames(&out)
    }

    /// The final `response` waits to be stored, with the terminal event (the last one) taken
    /// out of `out`, for [`Self::next`] to send once the response is stored.
    fn hold_terminal(
        &mut self,
        response: toolbridge_wire::responses::Response,
        out: &mut Vec<StreamEvent>,
    ) {
        let terminal = if out.last().is_some_and(|e| e.kind.is_terminal()) {
            out.pop()
        } else {
            None
        };
        self.phase = Phase::Storing(Box::new(response), terminal);
    }
}

/// The client went away mid-stream (the body was dropped before the terminal event): what was
/// used so far is charged, as providers charge a cancelled stream.
impl Drop for Pump {
    fn drop(&mut self) {
        let Some(meter) = self.ending.meter.take() else {
            return;
        };
        let used = match self.phase.assembler() {
            Some(assembler) => estimate_used(assembler, self.round.usage_basis.as_deref()),
            None => self.ending.used.unwrap_or(0),
        };
        charge_abandoned(meter, used);
    }
}
