//! A non-streamed answer: the whole upstream response through the same state machine.

use axum::body::Bytes;
use toolbridge_core::assemble::Assembler;
use toolbridge_providers::dialect::Dialect;
use toolbridge_providers::profile::Profile;

use super::echo::EchoRounds;
use super::repair::{RepairRounds, Review};
use super::sse::estimate_missing_usage;
use super::tool_loop::{Continuation, OUT_OF_STEPS, ToolRounds};
use crate::error::GatewayError;
use crate::time;
use crate::upstream::{MAX_RESPONSE_BODY, read_capped};

use super::decode::decode_whole;

/// The rounds a whole answer may go through besides the first.
pub(super) struct Rounds {
    pub(super) echo: Option<EchoRounds>,
    pub(super) tools: Option<ToolRounds>,
    pub(super) continuation: Option<Continuation>,
    pub(super) repair: Option<RepairRounds>,
}

/// A whole answer, round after round; a call still invalid under the `fail` policy is an
/// `invalid_tool_call` error (HTTP 502: nothing was sent yet).
pub(super) async fn sync_response(
    upstream: reqwest::Response,
    mut assembler: Assembler,
    dialect: Dialect,
    profile: &Profile,
    mut usage_basis: Option<Bytes>,
    rounds: Rounds,
) -> Result<toolbridge_wire::responses::Response, GatewayError> {
    let Rounds {
        mut echo,
        mut tools,
        mut continuation,
        mut repair,
    } = rounds;
    let mut upstream = upstream;
    let mut sink = Vec::new();
    loop {
        let body = read_capped(upstream, MAX_RESPONSE_BODY).await?;
        tracing::info_span!("reconstruct", stream = false).in_scope(|| {
            let mut diagnostics = Vec::new();
            let events = decode_whole(dialect, profile, &body, &mut diagnostics)?;
            for d in diagnostics {
                assembler.add_diagnostic(d);
            }
            for event in events {
                assembler.on_event(event, &mut sink);
                sink.clear();
            }
            Ok::<(), GatewayError>(())
        })?;
        if let (Some(rounds), Some(continuation)) = (tools.as_mut(), continuation.as_mut()) {
            // Client calls beside gateway calls are shown before the gateway's run, and the
            // round cannot be asked again: the after-re-ask policy applies to them now.
            if let Some(repair) = repair.as_mut()
                && assembler.has_gateway_calls()
                && let Review::Fail(message) = repair.review(&mut assembler, false, &mut sink)
            {
                return Err(GatewayError::InvalidToolCall(message));
            }
            let (calls, round) = assembler.take_gateway_calls(&mut sink);
            if !calls.is_empty() {
                if !rounds.allows(calls.len()) {
                    assembler.stop_incomplete(OUT_OF_STEPS);
                    break;
                }
                let mut pending = rounds.start(calls, round, &mut assembler, &mut sink);
                let results = rounds.run(&pending.calls).await;
                ToolRounds::finish_items(&mut pending, &results, &mut assembler, &mut sink);
                sink.clear();
                if assembler.has_client_calls() || pending.ends {
                    // The gateway's calls ran beside the client's: this round cannot be asked
                    // again, so an invalid client call follows the after-re-ask policy.
                    if let Some(repair) = repair.as_mut()
                        && let Review::Fail(message) =
                            repair.review(&mut assembler, false, &mut sink)
                    {
                        return Err(GatewayError::InvalidToolCall(message));
                    }
                    break;
                }
                let payload;
                (upstream, payload) = rounds.send_next(continuation, pending, results).await?;
                if usage_basis.is_some() {
                    usage_basis = Some(payload);
                }
                assembler.next_round();
                continue;
            }
        }
        if let Some(rounds) = echo.as_mut().filter(|r| r.left > 0)
            && let Some(echoes) = assembler.take_echoes(&mut sink)
        {
            sink.clear();
            let payload;
            (upstream, payload) = rounds.send(echoes).await?;
            usage_basis = Some(payload);
            continue;
        }
        let Some(repair) = repair.as_mut() else {
            break;
        };
        match repair.review(&mut assembler, continuation.is_some(), &mut sink) {
            Review::Pass => break,
            Review::Fail(message) => return Err(GatewayError::InvalidToolCall(message)),
            Review::Reask(reask) => {
                sink.clear();
                let Some(continuation) = continuation.as_mut() else {
                    break;
                };
                let payload;
                (upstream, payload) = continuation.send(reask.turn, reask.results).await?;
                if usage_basis.is_some() {
                    usage_basis = Some(payload);
                }
                assembler.next_round();
            }
        }
    }
    estimate_missing_usage(&mut assembler, usage_basis.as_deref(), &mut sink);
    // A whole answer without a finish reason was cut off, as a stream without one is.
    Ok(assembler.finish_unterminated(time::now(), &mut sink, profile.tolerate_unterminated))
}
