//! The request's parameters as Gemini's `generationConfig`: temperature clamped to the profile's
//! range, penalties and stop sequences where the profile takes them, the thinking budget a
//! reasoning effort buys, the output format as a MIME type and schema, and a diagnostic for
//! each parameter not sent.
//!
//! Not here: the contents and the tools (the parent, `tools`).

use serde_json::json;
use toolbridge_core::canonical::CanonicalRequest;
use toolbridge_core::contract::OutputContract;
use toolbridge_core::diagnostics::{OUTPUT_CONTRACT_DEGRADED, PARAM_CLAMPED, PARAM_DROPPED, diag};
use toolbridge_core::plan::ToolPlan;
use toolbridge_wire::gemini::{GenerationConfig, ThinkingConfig};
use toolbridge_wire::responses::Diagnostic;

use crate::gemini::schema;
use crate::profile::Profile;

/// The most stop sequences Gemini accepts.
const MAX_STOP_SEQUENCES: usize = 5;

pub(super) fn generation_config(
    req: &CanonicalRequest,
    plan: &ToolPlan,
    profile: &Profile,
    diagnostics: &mut Vec<Diagnostic>,
) -> GenerationConfig {
    let p = &req.params;
    let mut config = GenerationConfig::default();
    let mut dropped: Vec<&str> = Vec::new();
    if let Some(t) = p.temperature {
        let [lo, hi] = profile.temperature_range;
        let clamped = t.clamp(lo, hi);
        config.temperature = Some(clamped);
        if clamped != t {
            diagnostics.push(diag(
                PARAM_CLAMPED,
                Some("temperature"),
                format!(
                    "temperature {t} was clamped to {clamped}, the provider's range is [{lo}, {hi}]"
                ),
            ));
        }
    }
    config.top_p = p.top_p;
    config.max_output_tokens = p.max_output_tokens;
    if profile.penalties {
        for (key, value) in [
            ("presencePenalty", p.presence_penalty),
            ("frequencyPenalty", p.frequency_penalty),
        ] {
            if let Some(v) = value {
                config.extra.insert(key.to_owned(), json!(v));
            }
        }
    } else {
        if p.presence_penalty.is_some() {
            dropped.push("presence_penalty");
        }
        if p.frequency_penalty.is_some() {
            dropped.push("frequency_penalty");
        }
    }
    if !p.stop.is_empty() {
        if !profile.stop {
            dropped.push("stop");
        } else {
            config.stop_sequences = p.stop.iter().take(MAX_STOP_SEQUENCES).cloned().collect();
            if p.stop.len() > MAX_STOP_SEQUENCES {
                diagnostics.push(diag(
                    PARAM_CLAMPED,
                    Some("stop"),
                    format!("Gemini takes at most {MAX_STOP_SEQUENCES} stop sequences; the rest were not sent"),
                ));
            }
        }
    }
    if p.top_logprobs.is_some_and(|n| n > 0) {
        dropped.push("top_logprobs");
    }
    if p.end_user.is_some() {
        dropped.push("safety_identifier");
    }
    if p.prompt_cache_key.is_some() {
        dropped.push("prompt_cache_key");
    }
    if p.parallel_tool_calls == Some(false) && plan.send_tools && !plan.upstream.is_empty() {
        dropped.push("parallel_tool_calls");
    }
    if let Some(effort) = &p.reasoning_effort {
        match profile.effort(effort) {
            Some(say) => {
                if let Some(budget) = say.budget {
                    let budget = i64::try_from(budget).unwrap_or(i64::MAX);
                    config.thinking_config = Some(ThinkingConfig {
                        thinking_budget: Some(budget),
                        include_thoughts: Some(budget != 0),
                    });
                }
                for (key, value) in &say.fields {
                    config.extra.insert(key.clone(), value.clone());
                }
            }
            None => dropped.push("reasoning.effort"),
        }
    }
    for param in dropped {
        diagnostics.push(diag(
            PARAM_DROPPED,
            Some(param),
            format!("Gemini does not accept `{param}` here; it was not sent"),
        ));
    }
    config
}

pub(super) fn output_contract(
    contract: &OutputContract,
    config: &mut GenerationConfig,
    diagnostics: &mut Vec<Diagnostic>,
) {
    match contract {
        OutputContract::Text => {}
        OutputContract::JsonObject => {
            config.response_mime_type = Some("application/json".to_owned());
        }
        OutputContract::JsonSchema(contract) => {
            config.response_mime_type = Some("application/json".to_owned());
            config.response_schema = Some(schema::sanitize(
                &contract.schema,
                "text.format.schema",
                OUTPUT_CONTRACT_DEGRADED,
                diagnostics,
            ));
        }
    }
}
