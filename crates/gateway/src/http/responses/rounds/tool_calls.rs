//! A tool round's gateway calls run: concurrently, in the caller's task, each resolved by the
//! typed source's model transport before it runs (a call that does not resolve gets the
//! transport's typed error as its result), within its timeout and the loop's time budget, each
//! reported on the meter. Not here: showing the calls and their items, and the next round
//! (`tool_loop`).

use std::time::Duration;

use toolbridge_core::assemble::GatewayCall;
use toolbridge_tools::ToolError;

use super::tool_loop::{CallOutcome, ToolRounds};
use crate::http::responses::meter::ToolTimer;
use crate::tools::images::{self, Partial};
use crate::tools::{Action, GatewayTools, error_result};

impl ToolRounds {
    /// Runs the round's calls concurrently (in the caller's task: the future is polled by the
    /// pump or the whole-answer path, never spawned), each within the tool timeout (an image
    /// within the images backend's) and what is left of the time budget; `ids` are the calls'
    /// item ids. Each partial image goes to the side channel and to `partials` (the pump shows
    /// it at once; a full channel drops it with a log line). The loop's state comes back with
    /// the outcomes.
    pub(super) async fn run(
        mut self,
        calls: Vec<GatewayCall>,
        ids: Vec<String>,
        partials: Option<tokio::sync::mpsc::Sender<(usize, Partial)>>,
    ) -> (Self, Vec<CallOutcome>) {
        self.step += 1;
        self.meter.tool_step();
        let timers: Vec<_> = calls
            .iter()
            .map(|c| {
                self.meter
                    .tool_started(&c.call_id, &c.server, &c.name, &c.arguments, self.step)
            })
            .collect();
        // Searches past the response's bound are answered with an error, not run.
        let searches: Vec<bool> = calls
            .iter()
            .map(|c| {
                let search = GatewayTools::is_tool_search(&c.server, &c.name);
                let allowed = search && self.searches_left > 0;
                self.searches_left -= u32::from(allowed);
                allowed || !search
            })
            .collect();
        let outcomes = self
            .run_calls(&calls, &ids, &timers, &searches, partials)
            .await;
        for ((timer, outcome), id) in timers.into_iter().zip(&outcomes).zip(&ids) {
            let media = outcome.image.as_ref().and_then(|image| {
                let b64 = image.result.as_deref()?;
                self.earlier.add(id, b64);
                Some(
                    self.meter
                        .media(id, image.output_format.as_deref(), None, None),
                )
            });
            self.meter.tool_finished(timer, &outcome.text, media);
        }
        (self, outcomes)
    }

    /// Runs `calls` together, each resolved by the transport first (`allowed` false: a search
    /// past the response's bound, answered with an error): a search, a tool, or an image whose
    /// partial images go to the meter and to `partials`; each within its timeout and what is
    /// left of the time budget.
    async fn run_calls(
        &self,
        calls: &[GatewayCall],
        ids: &[String],
        timers: &[ToolTimer],
        allowed: &[bool],
        partials: Option<tokio::sync::mpsc::Sender<(usize, Partial)>>,
    ) -> Vec<CallOutcome> {
        let left = self
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        let timeout = |limit: Duration| limit.min(left).max(Duration::from_millis(1));
        let partials = &partials;
        futures::future::join_all(calls.iter().zip(ids).zip(timers).enumerate().map(
            |(i, ((call, id), timer))| {
                let span = tracing::info_span!("tool", server = %call.server, tool = %call.name);
                let allowed = allowed[i];
                let run = async move {
                    let resolved = self
                        .transport
                        .resolve_text(&call.call_id, &call.provider_name, &call.arguments)
                        .map(|(_, action)| action);
                    if GatewayTools::is_tool_search(&call.server, &call.name) {
                        let args = match resolved {
                            Ok(Action::ToolSearch(args)) => Ok(args),
                            other => Err(refusal(call, other)),
                        };
                        return self.search(args, allowed).await;
                    }
                    if !GatewayTools::is_image(&call.server, &call.name) {
                        let text = match resolved {
                            Ok(Action::Run { server, name, arguments }) => {
                                let limit = timeout(self.tools.limits.tool_timeout);
                                self.tools
                                    .execute(&server, &name, arguments, limit, &self.listed)
                                    .await
                            }
                            other => Err(refusal(call, other)),
                        };
                        return CallOutcome {
                            text,
                            image: None,
                            found: None,
                        };
                    }
                    let args = match resolved {
                        Ok(Action::Image(args)) => Ok(args),
                        Ok(_) => Err(mismatch(call)),
                        Err(e) => Err(e),
                    };
                    let backend = self.tools.images.as_ref().map(|(b, _)| b.as_ref());
                    let limit = backend.map_or(self.tools.limits.tool_timeout, |b| b.timeout);
                    let progress = |partial: Partial| {
                        let media = self.meter.media(id, None, Some(partial.index), Some(&partial.b64));
                        self.meter.tool_progress(timer, format!("partial image {}", partial.index), media);
                        if let Some(tx) = partials
                            && tx.try_send((i, partial)).is_err()
                        {
                            tracing::info!(item = %id, "a partial image was not shown: the stream is behind");
                        }
                    };
                    let ran = images::run(
                        backend,
                        id,
                        args.as_ref(),
                        &self.image_options,
                        &self.earlier,
                        timeout(limit),
                        &progress,
                    )
                    .await;
                    CallOutcome {
                        text: ran.text,
                        image: Some(ran.item),
                        found: None,
                    }
                };
                tracing::Instrument::instrument(run, span)
            },
        ))
        .await
    }
}

/// A call the typed source did not resolve to the action its tool runs: the structured error
/// the model reads (the transport's typed error, with the JSON pointer of a bad argument).
fn refusal(call: &GatewayCall, resolved: Result<Action, ToolError>) -> String {
    let e = resolved.err().unwrap_or_else(|| mismatch(call));
    error_result(
        e.code(),
        &format!(
            "{e}; call `{}` again with arguments that fit its schema",
            call.provider_name
        ),
    )
}

/// A call whose tool resolved to another kind of action (not expected: ids are per tool).
fn mismatch(call: &GatewayCall) -> ToolError {
    ToolError::UnknownTool {
        name: call.provider_name.clone(),
        suggestions: Vec::new(),
    }
}
