//! The request's parameters in Anthropic's terms: the thinking budget a reasoning effort buys,
//! `max_tokens` around it, temperature and `top_p` clamped to what Anthropic accepts with
//! thinking on or off, `metadata.user_id`, and a diagnostic for each parameter not sent.
//!
//! Not here: the turns and the tools (the parent, `tools`).

use serde_json::Map;
use toolbridge_core::canonical::CanonicalRequest;
use toolbridge_core::diagnostics::{PARAM_CLAMPED, PARAM_DROPPED, PARAM_RENAMED, diag};
use toolbridge_wire::anthropic::{MessagesRequest, Metadata, Thinking};
use toolbridge_wire::responses::Diagnostic;

use super::{DEFAULT_MAX_TOKENS, MIN_THINKING_BUDGET};
use crate::profile::{CacheAffinity, Profile};

/// The thinking budget `profile` gives a Responses `reasoning.effort` (its effort table: `none`
/// and `minimal` turn thinking off with a budget of 0); `None` with thinking off. An effort
/// the table does not name is dropped with a diagnostic; the row's other fields go into the
/// request as written.
fn thinking_budget(
    profile: &Profile,
    effort: &str,
    out: &mut MessagesRequest,
    dropped: &mut Vec<&str>,
) -> Option<u64> {
    let Some(say) = profile.effort(effort) else {
        dropped.push("reasoning.effort");
        return None;
    };
    for (key, value) in &say.fields {
        out.extra.insert(key.clone(), value.clone());
    }
    say.budget.filter(|b| *b > 0)
}

/// `metadata.user_id`: the end user when the client names one, else the session's
/// `prompt_cache_key` where the profile keeps sessions by it (one account, and so one cache,
/// behind pooled relays); a key that goes nowhere is dropped.
fn user_id(
    p: &toolbridge_core::canonical::Params,
    profile: &Profile,
    out: &mut MessagesRequest,
    dropped: &mut Vec<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let affinity = profile.cache.affinity == CacheAffinity::MetadataUserId;
    if p.prompt_cache_key.is_some() && (p.end_user.is_some() || !affinity) {
        dropped.push("prompt_cache_key");
    }
    let user = match (&p.end_user, &p.prompt_cache_key) {
        (Some(user), _) => user,
        (None, Some(key)) if affinity => {
            diagnostics.push(diag(
                PARAM_RENAMED,
                Some("prompt_cache_key"),
                "Anthropic keeps a session on one cache by `metadata.user_id`; the key was sent there",
            ));
            key
        }
        _ => return,
    };
    out.metadata = Some(Metadata {
        user_id: Some(user.clone()),
        extra: Map::new(),
    });
}

/// Writes `req`'s parameters into `out` in Anthropic's terms, with a diagnostic for each one
/// changed or not sent.
pub(super) fn params(
    req: &CanonicalRequest,
    profile: &Profile,
    out: &mut MessagesRequest,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let p = &req.params;
    let mut dropped: Vec<&str> = Vec::new();
    if p.presence_penalty.is_some() {
        dropped.push("presence_penalty");
    }
    if p.frequency_penalty.is_some() {
        dropped.push("frequency_penalty");
    }
    if p.top_logprobs.is_some_and(|n| n > 0) {
        dropped.push("top_logprobs");
    }
    if !p.stop.is_empty() {
        out.stop_sequences = Some(p.stop.clone());
    }
    user_id(p, profile, out, &mut dropped, diagnostics);
    let budget = p
        .reasoning_effort
        .as_deref()
        .and_then(|effort| thinking_budget(profile, effort, out, &mut dropped));
    out.max_tokens = match (p.max_output_tokens, budget) {
        (Some(max), _) => max,
        (None, Some(budget)) => DEFAULT_MAX_TOKENS + budget,
        (None, None) => DEFAULT_MAX_TOKENS,
    };
    if let Some(budget) = budget {
        enable_thinking(budget, out, diagnostics);
    }
    let thinking = out.thinking.is_some();
    if let Some(t) = p.temperature {
        fit_temperature(t, thinking, profile, out, &mut dropped, diagnostics);
    }
    if let Some(top_p) = p.top_p {
        fit_top_p(top_p, thinking, out, diagnostics);
    }
    if p.end_user.is_some() {
        diagnostics.push(diag(
            PARAM_RENAMED,
            Some("safety_identifier"),
            "the end-user id was sent as Anthropic's metadata.user_id",
        ));
    }
    for param in dropped {
        diagnostics.push(diag(
            PARAM_DROPPED,
            Some(param),
            format!("Anthropic does not accept `{param}` here; it was not sent"),
        ));
    }
}

/// Turns thinking on with `budget`, fitted below `out.max_tokens`, or leaves it off with a
/// diagnostic when what fits is below Anthropic's minimum.
fn enable_thinking(budget: u64, out: &mut MessagesRequest, diagnostics: &mut Vec<Diagnostic>) {
    // The budget must stay below `max_tokens` (half of it is kept for the answer when the
    // client's limit is smaller), and at least Anthropic's minimum.
    let fitted = if budget < out.max_tokens {
        budget
    } else {
        out.max_tokens / 2
    };
    if fitted < MIN_THINKING_BUDGET {
        diagnostics.push(diag(
            PARAM_DROPPED,
            Some("reasoning.effort"),
            format!(
                "max_output_tokens {} leaves no room for Anthropic's minimum thinking budget of {MIN_THINKING_BUDGET}; thinking was not enabled",
                out.max_tokens
            ),
        ));
        return;
    }
    if fitted != budget {
        diagnostics.push(diag(
            PARAM_CLAMPED,
            Some("reasoning.effort"),
            format!(
                "the thinking budget {budget} was lowered to {fitted} to fit max_output_tokens {}",
                out.max_tokens
            ),
        ));
    }
    out.thinking = Some(Thinking {
        kind: "enabled".to_owned(),
        budget_tokens: Some(fitted),
        extra: Map::new(),
    });
}

/// The temperature `t`, clamped to the profile's range within Anthropic's [0, 1]; dropped with
/// thinking on.
fn fit_temperature(
    t: f64,
    thinking: bool,
    profile: &Profile,
    out: &mut MessagesRequest,
    dropped: &mut Vec<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if thinking {
        // Anthropic rejects a temperature other than the default with thinking on.
        dropped.push("temperature");
        return;
    }
    let [lo, hi] = profile.temperature_range;
    let [lo, hi] = [lo.max(0.0), hi.min(1.0)];
    let clamped = t.clamp(lo, hi);
    out.temperature = Some(clamped);
    if clamped != t {
        diagnostics.push(diag(
            PARAM_CLAMPED,
            Some("temperature"),
            format!("temperature {t} was clamped to {clamped}, Anthropic's range is [{lo}, {hi}]"),
        ));
    }
}

/// `top_p`, raised to the least Anthropic accepts when thinking is on.
fn fit_top_p(
    top_p: f64,
    thinking: bool,
    out: &mut MessagesRequest,
    diagnostics: &mut Vec<Diagnostic>,
) {
    // With thinking on, Anthropic accepts top_p only in [0.95, 1].
    let clamped = if thinking { top_p.max(0.95) } else { top_p };
    out.top_p = Some(clamped);
    if clamped != top_p {
        diagnostics.push(diag(
            PARAM_CLAMPED,
            Some("top_p"),
            format!("top_p {top_p} was raised to {clamped}, the least Anthropic accepts with thinking on"),
        ));
    }
}
