//! The round driver: what happens when an upstream round ends, for the streamed (`sse`) and
//! the whole-answer (`sync`) paths alike. Gateway calls are shown and run (the tool loop, within
//! its step limit), provider builtins echoed back, a client call still invalid after repair
//! re-asked, passed or failed by the provider's policy; else the response ends. Not here: how a
//! round's events are read (the transports), and what a tool round or a re-ask sends
//! (`tool_loop`'s `Continuation`, `echo`).

pub(super) mod echo;
mod found;
pub(super) mod repair;
mod tool_calls;
pub(super) mod tool_loop;

use axum::body::Bytes;
use toolbridge_core::assemble::Assembler;
use toolbridge_wire::responses::StreamEvent;

use self::echo::EchoRounds;
use self::repair::{RepairRounds, Review};
use self::tool_loop::{CallOutcome, Continuation, OUT_OF_STEPS, PendingTools, ToolRounds, ToolRun};
use crate::error::GatewayError;
use crate::tools::images::Partial;

/// The rounds a response may go through besides the first. Each part is boxed: the value
/// travels by move through every stage's future, where an unboxed part would be kilobytes
/// copied each time.
pub(super) struct Rounds {
    /// Set when provider builtin calls are answered by the gateway.
    pub(super) echo: Option<Box<EchoRounds>>,
    /// Set when the gateway runs tools itself.
    pub(super) tools: Option<Box<ToolRounds>>,
    /// Set when the gateway may send rounds of its own (its tool loop, a repair re-ask).
    pub(super) continuation: Option<Box<Continuation>>,
    /// Set when calls are repaired: the policy for invalid ones.
    pub(super) repair: Option<RepairRounds>,
}

/// How an upstream round ended.
pub(super) enum RoundEnd {
    /// The response ends here.
    Finish,
    /// The next round was sent: its answer, and the request sent (the usage basis from now on,
    /// where there is one).
    Next(reqwest::Response, Bytes),
    /// Gateway calls were shown as started: the transport runs them ([`Rounds::run_tools`]),
    /// then hands them back ([`Rounds::after_tools`]).
    Tools(PendingTools),
    /// A call stayed invalid under the `fail` policy: the response fails with this message.
    Fail(String),
}

impl Rounds {
    /// At the end of an upstream round, its events all in the assembler: gateway calls are
    /// shown ([`RoundEnd::Tools`]), or stop the response when the loop is out of steps; when
    /// the round's only calls are provider builtins to echo, the next round is sent; when a
    /// client call is still invalid after repair, the provider's policy applies (a hidden
    /// re-ask sends the next round too); else the response ends. `streamed`: a stream cut off in
    /// the middle of a call fails at its end; it is not re-asked.
    pub(super) async fn end_round(
        &mut self,
        assembler: &mut Assembler,
        streamed: bool,
        out: &mut Vec<StreamEvent>,
    ) -> Result<RoundEnd, GatewayError> {
        if let Some(rounds) = self.tools.as_ref() {
            // Client calls beside gateway calls are shown before the gateway's run, and the
            // round cannot be asked again: the after-re-ask policy applies to them now.
            if let Some(repair) = self.repair.as_mut()
                && assembler.has_gateway_calls()
                && let Review::Fail(message) = repair.review(assembler, false, out)
            {
                return Ok(RoundEnd::Fail(message));
            }
            let (calls, round) = assembler.take_gateway_calls(out);
            if !calls.is_empty() {
                if !rounds.allows(calls.len()) {
                    assembler.stop_incomplete(OUT_OF_STEPS);
                    return Ok(RoundEnd::Finish);
                }
                return Ok(RoundEnd::Tools(rounds.start(calls, round, assembler, out)));
            }
        }
        if let Some(rounds) = self.echo.as_mut().filter(|r| r.left > 0)
            && let Some(echoes) = assembler.take_echoes(out)
        {
            let (response, payload) = rounds.send(echoes).await?;
            return Ok(RoundEnd::Next(response, payload));
        }
        let Some(repair) = self
            .repair
            .as_mut()
            .filter(|_| !(streamed && assembler.ends_cut_off()))
        else {
            return Ok(RoundEnd::Finish);
        };
        match repair.review(assembler, self.continuation.is_some(), out) {
            Review::Pass => Ok(RoundEnd::Finish),
            Review::Fail(message) => Ok(RoundEnd::Fail(message)),
            Review::Reask(reask) => {
                let Some(continuation) = self.continuation.as_mut() else {
                    return Ok(RoundEnd::Finish);
                };
                let (response, payload) = continuation.send(reask.turn, reask.results).await?;
                assembler.next_round();
                Ok(RoundEnd::Next(response, payload))
            }
        }
    }

    /// Whether gateway calls shown as started can run (the tool loop and its conversation are
    /// in place).
    pub(super) fn runs_tools(&self) -> bool {
        self.tools.is_some() && self.continuation.is_some()
    }

    /// The run of the calls shown as started (concurrently when they are parallel), for the
    /// transport to poll: it holds the loop's state until [`Self::after_tools`] takes it back.
    /// Partial images go to `partials` as they come. `None` when the loop is not in place.
    pub(super) fn run_tools(
        &mut self,
        pending: &PendingTools,
        partials: Option<tokio::sync::mpsc::Sender<(usize, Partial)>>,
    ) -> Option<ToolRun> {
        let rounds = self.tools.take()?;
        let ids = pending
            .calls
            .iter()
            .zip(&pending.slots)
            .map(|(call, slot)| {
                slot.as_ref()
                    .map_or(call.call_id.clone(), |s| s.id().to_owned())
            })
            .collect();
        Some(Box::pin(rounds.run(pending.calls.clone(), ids, partials)))
    }

    /// After the gateway's calls ran (the loop's state back from their run): their items finished; the response ends when client
    /// calls stand beside them (or a call waits for approval), else the next round is sent.
    pub(super) async fn after_tools(
        &mut self,
        mut pending: PendingTools,
        (rounds, outcomes): (ToolRounds, Vec<CallOutcome>),
        assembler: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> Result<RoundEnd, GatewayError> {
        self.tools = Some(Box::new(rounds));
        ToolRounds::finish_items(&mut pending, &outcomes, assembler, out);
        if assembler.has_client_calls() || pending.ends {
            // The gateway's calls ran beside the client's: this round cannot be asked
            // again, so an invalid client call follows the after-re-ask policy.
            if let Some(repair) = self.repair.as_mut()
                && let Review::Fail(message) = repair.review(assembler, false, out)
            {
                return Ok(RoundEnd::Fail(message));
            }
            return Ok(RoundEnd::Finish);
        }
        let (Some(rounds), Some(continuation)) = (self.tools.as_mut(), self.continuation.as_mut())
        else {
            return Ok(RoundEnd::Finish);
        };
        let (response, payload, names) = rounds.send_next(continuation, pending, outcomes).await?;
        if let Some(names) = names {
            assembler.replace_names(names);
        }
        assembler.next_round();
        Ok(RoundEnd::Next(response, payload))
    }
}
