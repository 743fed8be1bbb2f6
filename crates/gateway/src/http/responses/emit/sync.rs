//! A non-streamed answer: the whole upstream response through the same state machine.

use axum::body::Bytes;
use toolbridge_core::assemble::Assembler;
use toolbridge_providers::dialect::Provenance;
use toolbridge_providers::profile::Profile;

use super::usage::estimate_missing_usage;
use crate::error::GatewayError;
use crate::http::responses::dispatch::decode::decode_whole;
use crate::http::responses::rounds::{RoundEnd, Rounds};
use crate::platform::time;
use crate::upstream::Upstreams;

/// What sending a round's request again needs, when its whole answer broke off mid-body.
pub(super) struct Resend<'a> {
    pub(super) upstreams: &'a Upstreams,
    /// Sent to again; its dialect decodes every round.
    pub(super) provider: &'a crate::config::Provider,
    pub(super) model: &'a str,
    /// The round's request as sent.
    pub(super) payload: Bytes,
    pub(super) affinity: crate::upstream::Affinity,
}

/// A whole answer, round after round (each round's body read to its end, a cut one sent again:
/// `Upstreams::read_whole`); a call still invalid under the `fail` policy is an
/// `invalid_tool_call` error (HTTP 502: nothing was sent yet).
pub(super) async fn sync_response(
    upstream: reqwest::Response,
    mut assembler: Box<Assembler>,
    profile: &Profile,
    mut usage_basis: Option<Bytes>,
    rounds: Rounds,
    mut resend: Resend<'_>,
    sealer: &std::sync::Arc<dyn toolbridge_core::reasoning::Sealer>,
) -> Result<toolbridge_wire::responses::Response, GatewayError> {
    let mut rounds = rounds;
    let mut upstream = upstream;
    let mut sink = Vec::new();
    loop {
        let body = resend
            .upstreams
            .read_whole(
                upstream,
                resend.provider,
                resend.model,
                &resend.payload,
                resend.affinity,
            )
            .await?;
        crate::platform::ops::telemetry::stage_span!("reconstruct", stream = false).in_scope(
            || {
                let mut diagnostics = Vec::new();
                let provenance = Provenance {
                    origin: &resend.provider.name,
                    sealer,
                };
                let events = decode_whole(
                    resend.provider.dialect,
                    profile,
                    &body,
                    Some(provenance),
                    &mut diagnostics,
                )?;
                for d in diagnostics {
                    assembler.add_diagnostic(d);
                }
                for event in events {
                    assembler.on_event(event, &mut sink);
                    sink.clear();
                }
                Ok::<(), GatewayError>(())
            },
        )?;
        // Nothing is shown before the whole answer: the round's events are dropped as they come.
        let mut end = rounds.end_round(&mut assembler, false, &mut sink).await?;
        sink.clear();
        if let RoundEnd::Tools(pending) = end {
            if !rounds.runs_tools() {
                break;
            }
            // A whole answer shows no partial images (the side channel still gets them).
            let Some(run) = rounds.run_tools(&pending, None) else {
                break;
            };
            let ran = run.await;
            // Boxed: only a response whose gateway tools ran comes here, and the next round's
            // future would otherwise weigh on every whole answer's.
            end = Box::pin(rounds.after_tools(pending, ran, &mut assembler, &mut sink)).await?;
            sink.clear();
        }
        match end {
            RoundEnd::Next(next, payload) => {
                upstream = next;
                if usage_basis.is_some() {
                    usage_basis = Some(payload.clone());
                }
                resend.payload = payload;
            }
            RoundEnd::Fail(message) => return Err(GatewayError::InvalidToolCall(message)),
            RoundEnd::Finish | RoundEnd::Tools(_) => break,
        }
    }
    estimate_missing_usage(&mut assembler, usage_basis.as_deref(), &mut sink);
    // A whole answer without a finish reason was cut off, as a stream without one is.
    Ok(assembler.finish_unterminated(time::now(), &mut sink, profile.tolerate_unterminated))
}
