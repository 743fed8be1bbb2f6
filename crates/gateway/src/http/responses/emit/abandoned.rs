//! Charging a stream that did not end normally: what it used so far, estimated, when it failed
//! without reporting usage or when its client went away (providers charge both). The reservation
//! made at admission is settled with it (see
//! [`crate::http::responses::admission::charge`]).
//!
//! Not here: the charge of a stream that ended normally ([`Meter::finish_response`]).

use toolbridge_core::assemble::Assembler;

use crate::http::responses::meter::Meter;

/// The client went away mid-stream (the body was dropped before the terminal event): `used`
/// is charged, as providers charge a cancelled stream. The charge is async and a drop is not,
/// so it runs on its own task (bounded by the store's own timeouts).
pub(super) fn charge_abandoned(meter: Meter, used: u64) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move { meter.abandoned(used).await });
    }
}

/// The tokens a stream used so far, estimated: the request as sent (`payload`, a Chat request,
/// when at hand) and everything the model produced.
pub(super) fn estimate_used(assembler: &Assembler, payload: Option<&[u8]>) -> u64 {
    super::usage::estimate(payload.unwrap_or_default(), &assembler.produced_text()).total_tokens
}
