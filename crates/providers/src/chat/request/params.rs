//! The request's parameters as the profile takes them: temperature clamped to its range,
//! `max_tokens` or `max_completion_tokens`, the end user's field, the cache key as it is sent or
//! renamed, the effort's fields, and a diagnostic for each parameter not sent.
//!
//! Not here: the messages, the output format and the tools (the parent, `tools`).

use toolbridge_core::canonical::{CanonicalRequest, Params};
use toolbridge_core::diagnostics::{PARAM_CLAMPED, PARAM_DROPPED, PARAM_RENAMED, diag};
use toolbridge_core::plan::ToolPlan;
use toolbridge_wire::chat::ChatRequest;
use toolbridge_wire::responses::Diagnostic;

use crate::chat::fields::{cache_hint, effort_fields};
use crate::profile::{EndUserField, MaxTokensField, Profile};

/// Writes `req`'s parameters into `out` as `profile` takes them, with a diagnostic for each one
/// changed or not sent.
pub(super) fn params(
    req: &CanonicalRequest,
    plan: &ToolPlan,
    profile: &Profile,
    out: &mut ChatRequest,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let p = &req.params;
    let mut dropped: Vec<&str> = Vec::new();
    let temperature_diag = p
        .temperature
        .and_then(|t| clamp_temperature(t, profile, out));
    sampling(p, profile, out, &mut dropped);
    user_and_cache_key(p, profile, out, &mut dropped, diagnostics);
    if let Some(effort) = &p.reasoning_effort
        && !effort_fields(effort, profile, &mut out.extra)
    {
        dropped.push("reasoning.effort");
    }
    if let Some(parallel) = p.parallel_tool_calls
        && plan.send_tools
        && !plan.upstream.is_empty()
    {
        if profile.parallel_tool_calls {
            out.parallel_tool_calls = Some(parallel);
        } else if !parallel {
            dropped.push("parallel_tool_calls");
        }
    }
    diagnostics.extend(temperature_diag);
    for param in dropped {
        diagnostics.push(diag(
            PARAM_DROPPED,
            Some(param),
            format!(
                "the `{}` profile does not accept `{param}`; it was not sent",
                profile.name
            ),
        ));
    }
}

/// Sets the temperature `t`, clamped to the profile's range; the diagnostic when it was clamped.
fn clamp_temperature(t: f64, profile: &Profile, out: &mut ChatRequest) -> Option<Diagnostic> {
    let [lo, hi] = profile.temperature_range;
    let clamped = t.clamp(lo, hi);
    out.temperature = Some(clamped);
    (clamped != t).then(|| {
        diag(
            PARAM_CLAMPED,
            Some("temperature"),
            format!(
                "temperature {t} was clamped to {clamped}, the provider's range is [{lo}, {hi}]"
            ),
        )
    })
}

/// Sets `top_p`, the penalties, the output limit, the stop sequences and the log probabilities
/// the profile accepts, and names the ones it does not in `dropped`.
fn sampling(p: &Params, profile: &Profile, out: &mut ChatRequest, dropped: &mut Vec<&str>) {
    out.top_p = p.top_p;
    if p.presence_penalty.is_some() || p.frequency_penalty.is_some() {
        if profile.penalties {
            out.presence_penalty = p.presence_penalty;
            out.frequency_penalty = p.frequency_penalty;
        } else {
            if p.presence_penalty.is_some() {
                dropped.push("presence_penalty");
            }
            if p.frequency_penalty.is_some() {
                dropped.push("frequency_penalty");
            }
        }
    }
    match profile.max_tokens_field {
        MaxTokensField::MaxTokens => out.max_tokens = p.max_output_tokens,
        MaxTokensField::MaxCompletionTokens => out.max_completion_tokens = p.max_output_tokens,
    }
    if !p.stop.is_empty() {
        if profile.stop {
            out.stop = Some(p.stop.clone());
        } else {
            dropped.push("stop");
        }
    }
    if let Some(top) = p.top_logprobs.filter(|n| *n > 0) {
        if profile.logprobs {
            out.logprobs = Some(true);
            out.top_logprobs = Some(top);
        } else {
            dropped.push("top_logprobs");
        }
    }
}

/// Sends the end user in the profile's field and the cache key as it is or renamed, and names
/// either in `dropped` when it goes nowhere.
fn user_and_cache_key(
    p: &Params,
    profile: &Profile,
    out: &mut ChatRequest,
    dropped: &mut Vec<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if let Some(user) = &p.end_user {
        match profile.end_user_field {
            EndUserField::User => out.user = Some(user.clone()),
            EndUserField::SafetyIdentifier => out.safety_identifier = Some(user.clone()),
            EndUserField::None => dropped.push("safety_identifier"),
        }
    }
    if let Some(key) = &p.prompt_cache_key {
        if profile.prompt_cache_key {
            out.prompt_cache_key = Some(key.clone());
        } else if let Some(field) = profile.fields.renamed("prompt_cache_key")
            && cache_hint(out, field, key)
        {
            diagnostics.push(diag(
                PARAM_RENAMED,
                Some("prompt_cache_key"),
                format!("the provider reads its cache hint from `{field}`; the key was sent there"),
            ));
        } else {
            dropped.push("prompt_cache_key");
        }
    }
}
