//! The stream pump's side of a gateway step: the round's calls started as one future the pump
//! polls step by step, so what they stream while they run (an image call's partial images)
//! goes out at once and a silence gets a keep-alive; their end goes to the round driver.
//! Not here: running the calls (`rounds/tool_loop`), what a round's end leads to (`rounds`).

use axum::body::Bytes;
use toolbridge_core::assemble::codes;
use toolbridge_wire::responses::StreamEvent;

use super::pump::{Phase, Pump};
use super::transport;
use crate::http::responses::rounds::RoundEnd;
use crate::http::responses::rounds::tool_loop::{CallOutcome, PendingTools, ToolRounds, ToolRun};
use crate::tools::images::Partial;

/// Gateway calls running: their run (it owns the loop's state) and the partial images it
/// streams, for the item shown as started.
pub(super) struct Running {
    pub(super) pending: PendingTools,
    pub(super) run: ToolRun,
    pub(super) partials: tokio::sync::mpsc::Receiver<(usize, Partial)>,
}

/// Partial images waiting to be shown, at most (each call streams at most three).
const PARTIALS_BUFFER: usize = 16;

/// What woke a pump waiting on running gateway calls.
enum Progress {
    Partial(usize, Partial),
    Done(Box<(ToolRounds, Vec<CallOutcome>)>),
    Silence,
}

/// Ends after `keepalive`, or never.
async fn silence(keepalive: Option<std::time::Duration>) {
    match keepalive {
        Some(after) => tokio::time::sleep(after).await,
        None => std::future::pending().await,
    }
}

impl Pump {
    /// Starts the gateway calls shown as started at the last step: their run is polled by
    /// [`Self::poll_tools`]. `Some` when the response ends instead (no loop to run them).
    pub(super) fn start_tools(
        &mut self,
        pending: PendingTools,
        out: &mut Vec<StreamEvent>,
    ) -> Option<Vec<Bytes>> {
        if self.phase.assembler().is_none() || !self.rounds.runs_tools() {
            return Some(self.finish(std::mem::take(out), true));
        }
        let (tx, partials) = tokio::sync::mpsc::channel(PARTIALS_BUFFER);
        match self.rounds.run_tools(&pending, Some(tx)) {
            Some(run) => {
                let running = Running {
                    pending,
                    run,
                    partials,
                };
                self.phase
                    .then(|assembler| Phase::ToolsRunning(assembler, running));
                None
            }
            None => Some(self.finish(std::mem::take(out), true)),
        }
    }

    /// Waits on the running gateway calls (a shutdown or a cancel stops them): a partial image
    /// is shown at once and a silence gets a keep-alive, the run going on; when the calls are
    /// done, they go to the round driver. `Some` when the step ends with these frames; `None`
    /// when the next round's stream is in place and nothing is to be sent yet.
    pub(super) async fn poll_tools(
        &mut self,
        mut running: Running,
        out: &mut Vec<StreamEvent>,
    ) -> Option<Vec<Bytes>> {
        let keepalive = self.limits.keepalive;
        let next = transport::interruptible(&mut self.limits, async {
            tokio::select! {
                biased;
                Some((i, partial)) = running.partials.recv() => Progress::Partial(i, partial),
                ran = &mut running.run => Progress::Done(Box::new(ran)),
                () = silence(keepalive) => Progress::Silence,
            }
        })
        .await;
        let ran = match next {
            Err(stop) => return Some(self.stop(stop, std::mem::take(out))),
            Ok(Progress::Partial(i, partial)) => {
                let assembler = self.phase.assembler_mut()?;
                ToolRounds::show_partial(&running.pending, i, partial, assembler, out);
                self.phase
                    .then(|assembler| Phase::ToolsRunning(assembler, running));
                return Some(self.frames(out));
            }
            Ok(Progress::Silence) => {
                self.phase
                    .then(|assembler| Phase::ToolsRunning(assembler, running));
                let mut batch = self.frames(out);
                batch.push(self.framing.keepalive());
                return Some(batch);
            }
            Ok(Progress::Done(ran)) => *ran,
        };
        let Running {
            pending,
            mut partials,
            ..
        } = running;
        let assembler = self.phase.assembler_mut()?;
        // Partials sent in the run's last poll come before the item's end.
        while let Ok((i, partial)) = partials.try_recv() {
            ToolRounds::show_partial(&pending, i, partial, assembler, out);
        }
        match self.rounds.after_tools(pending, ran, assembler, out).await {
            Ok(RoundEnd::Next(response, payload)) => {
                self.round.switch_to(response, payload);
                (!out.is_empty()).then(|| self.frames(out))
            }
            Ok(RoundEnd::Fail(message)) => {
                Some(self.fail(codes::INVALID_TOOL_CALL, message, std::mem::take(out)))
            }
            Ok(RoundEnd::Finish | RoundEnd::Tools(_)) => {
                Some(self.finish(std::mem::take(out), true))
            }
            Err(e) => Some(self.fail(e.code(), e.to_string(), std::mem::take(out))),
        }
    }
}
