//! The dispatch stage: the targets in order, each routed (`route`), checked against the provider's
//! own limits, sent, and a stream's first event peeked; a target that cannot take the request
//! passes it to the next. Beside it: the upstream's body read as events (`chunks`) and decoded
//! (`decode`, with the first-event peek). Not here: what happens with the answer (`emit`).

pub(super) mod chunks;
pub(super) mod decode;

use toolbridge_providers::dialect::Raw;

use super::route::route;
use super::{Answer, Caller, Dispatched, Prepared, Routed};
use crate::error::GatewayError;
use crate::state::AppState;

/// Sends the request to the first target that takes it. The primary's refusal of the plan is
/// the client's answer; a fallback that cannot take the request is passed over, and the one
/// that serves it says so in a diagnostic.
pub(super) async fn dispatch<'a>(
    state: &AppState,
    prepared: &Prepared<'a>,
    raw: Option<Raw>,
    caller: &Caller,
    request_id: &str,
) -> Result<Dispatched<'a>, GatewayError> {
    let targets = &prepared.targets;
    crate::platform::ops::observe::note(|entry| {
        entry.model.clone_from(&prepared.canonical.model);
        entry.stream = prepared.canonical.stream;
    });
    let mut schemas: Option<super::route::ToolChecks> = None;
    let mut failures: Vec<String> = Vec::new();
    let mut last_error = None;
    for (i, target) in targets.iter().enumerate() {
        let provider = target.provider;
        let routed = match route(state, prepared, raw.as_ref(), caller, target, &mut schemas) {
            Ok(routed) => routed,
            Err(e) if i == 0 => return Err(e.into()),
            Err(e) => {
                failures.push(format!("`{}` cannot take the request ({e})", provider.name));
                continue;
            }
        };
        tracing::info!(
            request_id,
            model = prepared.canonical.model,
            provider = provider.name,
            upstream_model = routed.upstream_model,
            stream = prepared.canonical.stream,
            diagnostics = routed.diagnostics.len(),
            "forwarding"
        );
        let is_last = i + 1 == targets.len();
        // The provider's own request and token limits: a provider at its limit passes the
        // request to the route's fallbacks.
        if let Err(e) = state.limits.check_upstream(&provider.name).await {
            if !is_last {
                failures.push(format!("`{}` is at its rate limit", provider.name));
                last_error = Some(e);
                continue;
            }
            return Err(e);
        }
        let answer = match send(state, &routed).await {
            Ok(answer) => answer,
            Err(e) if e.allows_fallback() && !is_last => {
                tracing::warn!(
                    request_id,
                    provider = provider.name,
                    code = e.code(),
                    "falling back: {e}"
                );
                failures.push(format!("`{}` failed ({e})", provider.name));
                last_error = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        return Ok(served(routed, answer, &failures, request_id));
    }
    Err(last_error.unwrap_or_else(|| {
        GatewayError::UpstreamUnreachable(format!(
            "no provider could take the request: {}",
            failures.join("; ")
        ))
    }))
}

/// Sends the routed request. A stream is peeked before committing: an error as its first
/// event is still an HTTP error, and can still fall back.
async fn send(state: &AppState, routed: &Routed<'_>) -> Result<Answer, GatewayError> {
    let provider = routed.provider;
    let stream = routed.outgoing.stream();
    let upstream = state
        .upstreams
        .send(
            provider,
            &routed.upstream_model,
            &routed.payload,
            stream,
            routed.affinity,
        )
        .await?;
    if stream {
        decode::peek(upstream, provider.dialect, &routed.profile)
            .await
            .map(Answer::Stream)
    } else {
        Ok(Answer::Whole(upstream))
    }
}

/// The hand-off of a target that took the request: the fallback diagnostic when earlier
/// targets failed, and every diagnostic logged.
fn served<'a>(
    mut routed: Routed<'a>,
    answer: Answer,
    failures: &[String],
    request_id: &str,
) -> Dispatched<'a> {
    if !failures.is_empty() {
        routed.diagnostics.push(toolbridge_core::diagnostics::diag(
            toolbridge_core::diagnostics::UPSTREAM_FALLBACK,
            Some("model"),
            format!(
                "{}; the request was served by `{}` as `{}`",
                failures.join("; "),
                routed.provider.name,
                routed.upstream_model
            ),
        ));
    }
    crate::platform::ops::observe::note(|entry| journal_routed(entry, &routed, failures));
    for d in &routed.diagnostics {
        // The request's one `info` line is "forwarding" (with the count); each decision is a
        // `debug` line, and the client sees them all on the response.
        tracing::debug!(request_id, code = d.code, param = d.param, "{}", d.message);
    }
    Dispatched {
        routed: Box::new(routed),
        answer,
    }
}

/// What the console's journal keeps of the target that took the request: the provider, the
/// plan's decision for every declared tool, the diagnostics so far and the translated body.
fn journal_routed(
    entry: &mut crate::platform::ops::journal::Entry,
    routed: &Routed<'_>,
    failures: &[String],
) {
    use crate::platform::ops::journal::{DiagnosticRow, MAX_BODY, PlanRow};
    entry.provider = Some(routed.provider.name.clone());
    entry.upstream_model = Some(routed.upstream_model.clone());
    entry.fallback = !failures.is_empty();
    entry.plan = routed
        .plan
        .entries
        .iter()
        .map(|p| PlanRow {
            param: p.param.clone(),
            kind: p.kind.clone(),
            name: p.name.clone(),
            decision: p.decision.as_str(),
            reason: p.reason,
            upstream_name: p.provider_name.clone(),
        })
        .collect();
    entry.diagnostics = routed.diagnostics.iter().map(DiagnosticRow::from).collect();
    let body = &routed.payload;
    entry.upstream_body = Some(body.slice(..body.len().min(MAX_BODY)));
}
