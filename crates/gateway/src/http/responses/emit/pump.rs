//! The stream pump's state, in parts that exist only while they are needed: the upstream round
//! being read ([`Round`]), what the pump is doing ([`Phase`]: reading, gateway calls pending or
//! running, the final response waiting to be stored), how the response ends ([`Ending`]) and
//! who serves it ([`Identity`]). The response being assembled lives in the phase, boxed once
//! when it was built: a phase change moves the box, not the assembler, and an event only
//! matches the phase.
//!
//! Not here: what the pump does with them (`sse` reads, `tools_pump` runs the gateway's calls,
//! `sse_end` ends and stores).

use axum::body::Bytes;
use toolbridge_core::assemble::Assembler;
use toolbridge_core::events::UpstreamEvent;
use toolbridge_providers::dialect::Decoder;
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::{Diagnostic, StreamEvent};

use super::tools_pump::Running;
use super::transport::PumpLimits;
use crate::http::responses::dispatch::chunks::{UpstreamSse, upstream_sse};
use crate::http::responses::dispatch::decode::restarted;
use crate::http::responses::framing::Framing;
use crate::http::responses::meter::Meter;
use crate::http::responses::rounds::Rounds;
use crate::http::responses::rounds::tool_loop::PendingTools;
use crate::http::responses::stored::persist::Persist;
use crate::http::responses::stored::provider_state::StateSink;

/// The per-response stream pump: pulls upstream events lazily (no task, no channel), feeds the
/// decoder and the assembler, and yields framed events. The fields drop in order, its place in
/// flight (`identity`) last.
pub(super) struct Pump {
    pub(super) round: Round,
    pub(super) phase: Phase,
    /// The rounds besides the first (echoes, the tool loop, re-asks).
    pub(super) rounds: Rounds,
    pub(super) limits: PumpLimits,
    /// How events become the transport's messages.
    pub(super) framing: Framing,
    pub(super) ending: Ending,
    pub(super) identity: Identity,
}

/// The upstream round being read, and what its decoder hands the assembler.
pub(super) struct Round {
    pub(super) upstream: UpstreamSse,
    pub(super) decoder: Decoder,
    pub(super) profile: Profile,
    /// The request as sent upstream, for a usage estimate; `None` when the dialect does not
    /// need one.
    pub(super) usage_basis: Option<Bytes>,
    /// The decoder's events and diagnostics of one upstream event, drained into the assembler
    /// at once (the buffers are kept for the next).
    pub(super) pending: Vec<UpstreamEvent>,
    pub(super) diagnostics: Vec<Diagnostic>,
}

impl Round {
    /// Reads the next round's stream from here on (`payload`, the request sent, is the usage
    /// basis from now on, where there is one).
    pub(super) fn switch_to(&mut self, response: reqwest::Response, payload: Bytes) {
        self.upstream = upstream_sse(response);
        self.decoder = restarted(&self.decoder, &self.profile);
        if self.usage_basis.is_some() {
            self.usage_basis = Some(payload);
        }
    }
}

/// What the pump is doing.
pub(super) enum Phase {
    /// Reading upstream rounds into the response being assembled.
    Reading(Box<Assembler>),
    /// Gateway calls were shown as started: they start at the next step.
    ToolsPending(Box<Assembler>, PendingTools),
    /// Gateway calls running, polled step by step.
    ToolsRunning(Box<Assembler>, Running),
    /// The final response, between its end and its storing, with its terminal event held back
    /// (it says whether the response was stored); a cancel's went out with the last frames.
    /// Boxed once, at the end: unboxed, this one state would make every phase change move
    /// kilobytes.
    Storing(
        Box<toolbridge_wire::responses::Response>,
        Option<StreamEvent>,
    ),
    /// Stored and sent: nothing more comes.
    Ended,
}

impl Phase {
    /// The response being assembled; `None` once it ended.
    pub(super) fn assembler(&self) -> Option<&Assembler> {
        match self {
            Self::Reading(a) | Self::ToolsPending(a, _) | Self::ToolsRunning(a, _) => Some(a),
            Self::Storing(..) | Self::Ended => None,
        }
    }

    pub(super) fn assembler_mut(&mut self) -> Option<&mut Assembler> {
        match self {
            Self::Reading(a) | Self::ToolsPending(a, _) | Self::ToolsRunning(a, _) => Some(a),
            Self::Storing(..) | Self::Ended => None,
        }
    }

    /// Takes the response being assembled, to end it: the phase is [`Phase::Ended`] until the
    /// final response is set.
    pub(super) fn take_assembler(&mut self) -> Option<Box<Assembler>> {
        self.assembler()?;
        match std::mem::replace(self, Self::Ended) {
            Self::Reading(a) | Self::ToolsPending(a, _) | Self::ToolsRunning(a, _) => Some(a),
            ended => {
                *self = ended;
                None
            }
        }
    }

    /// The phase `next` makes of the response being assembled; none while it is not.
    pub(super) fn then(&mut self, next: impl FnOnce(Box<Assembler>) -> Self) {
        if let Some(assembler) = self.take_assembler() {
            *self = next(assembler);
        }
    }

    /// The gateway calls shown at the last step, to start now; the phase is reading again.
    pub(super) fn take_pending(&mut self) -> Option<PendingTools> {
        if !matches!(self, Self::ToolsPending(..)) {
            return None;
        }
        match std::mem::replace(self, Self::Ended) {
            Self::ToolsPending(assembler, pending) => {
                *self = Self::Reading(assembler);
                Some(pending)
            }
            other => {
                *self = other;
                None
            }
        }
    }

    /// The gateway calls running, to poll now; the phase is reading again (the poll puts them
    /// back when they go on).
    pub(super) fn take_running(&mut self) -> Option<Running> {
        if !matches!(self, Self::ToolsRunning(..)) {
            return None;
        }
        match std::mem::replace(self, Self::Ended) {
            Self::ToolsRunning(assembler, running) => {
                *self = Self::Reading(assembler);
                Some(running)
            }
            other => {
                *self = other;
                None
            }
        }
    }

    /// The final response and its terminal event, to store and send; the phase has ended.
    pub(super) fn take_final(
        &mut self,
    ) -> Option<(
        Box<toolbridge_wire::responses::Response>,
        Option<StreamEvent>,
    )> {
        if !matches!(self, Self::Storing(..)) {
            return None;
        }
        match std::mem::replace(self, Self::Ended) {
            Self::Storing(response, terminal) => Some((response, terminal)),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// What the response's end does besides its events: store it, keep its provider state, charge
/// it. Each part is taken when it has run; a pump dropped with its meter charges what was used.
pub(super) struct Ending {
    /// Charges the tokens and reports the end on the session.
    pub(super) meter: Option<Meter>,
    /// Set when the response is stored at its end.
    pub(super) persist: Option<Persist>,
    /// Where the response's provider state is kept, before its terminal event goes out.
    pub(super) states: Option<StateSink>,
    /// What a failed stream used, estimated, for the charge when it reports no usage.
    pub(super) used: Option<u64>,
}

/// Who serves the response (for logs), its span and its place in flight.
pub(super) struct Identity {
    pub(super) provider_name: String,
    pub(super) upstream_model: String,
    pub(super) request_id: String,
    /// The stream's one `reconstruct` span, opened at the first batch (not one per batch).
    pub(super) span: Option<tracing::Span>,
    /// The response's place among those in flight, left when the pump is dropped.
    pub(super) _registration: Option<crate::platform::inflight::Registration>,
}
