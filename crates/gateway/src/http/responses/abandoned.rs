//! Charging a stream that did not end normally: what it used so far, estimated, when it
//! failed without reporting usage or when its client went away (providers charge both). The
//! reservation made at admission is settled with it (see [`crate::http::responses::admission::charge`]).
//!
//! Not here: the charge of a stream that ended normally ([`super::meter::Meter::finish`]).

use toolbridge_core::assemble::Assembler;

use super::sse::Pump;

/// The client went away mid-stream (the body was dropped before the terminal event): what was
/// used so far is charged, as providers charge a cancelled stream. The charge is async and the
/// drop is not, so it runs on its own task (bounded by the store's own timeouts).
impl Drop for Pump {
    fn drop(&mut self) {
        let Some(meter) = self.meter.take() else {
            return;
        };
        let used = match &self.assembler {
            Some(assembler) => estimate_used(assembler, self.usage_basis.as_deref()),
            None => self.used.unwrap_or(0),
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { meter.abandoned(used).await });
        }
    }
}

/// The tokens a stream used so far, estimated: the request as sent (`payload`, a Chat request,
/// when at hand) and everything the model produced.
pub(super) fn estimate_used(assembler: &Assembler, payload: Option<&[u8]>) -> u64 {
    crate::http::responses::usage::estimate(payload.unwrap_or_default(), &assembler.produced_text()).total_tokens
}
