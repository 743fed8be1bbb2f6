//! The request-wide checks: sampling parameters in their ranges, `stop` within its limit, and
//! `text.format` compiled to an [`OutputContract`].
//!
//! Not here: the checks of items (`turns`) and of the tools' schemas (`parameters`).

use toolbridge_wire::responses::{CreateResponse, Stop, TextFormat};

use super::Limits;
use crate::Error;
use crate::canonical::Params;
use crate::contract::{OutputContract, SchemaContract};

pub(super) fn params(req: &CreateResponse, limits: &Limits) -> Result<Params, Error> {
    check_range("temperature", req.temperature, 0.0, 2.0)?;
    check_range("top_p", req.top_p, 0.0, 1.0)?;
    check_range("presence_penalty", req.presence_penalty, -2.0, 2.0)?;
    check_range("frequency_penalty", req.frequency_penalty, -2.0, 2.0)?;
    if req.max_output_tokens == Some(0) {
        return Err(Error::invalid("max_output_tokens", "must be at least 1"));
    }
    let stop = match &req.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s.clone()],
        Some(Stop::Many(v)) => v.clone(),
    };
    if stop.len() > limits.max_stop_sequences {
        return Err(Error::invalid(
            "stop",
            format!(
                "at most {} sequences are allowed",
                limits.max_stop_sequences
            ),
        ));
    }
    Ok(Params {
        temperature: req.temperature,
        top_p: req.top_p,
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        max_output_tokens: req.max_output_tokens,
        stop,
        end_user: req.safety_identifier.clone().or_else(|| req.user.clone()),
        prompt_cache_key: req.prompt_cache_key.clone(),
        parallel_tool_calls: req.parallel_tool_calls,
        top_logprobs: req.top_logprobs,
        reasoning_effort: req.reasoning.as_ref().and_then(|r| r.effort.clone()),
    })
}

fn check_range(param: &str, value: Option<f64>, min: f64, max: f64) -> Result<(), Error> {
    match value {
        Some(v) if !(min..=max).contains(&v) => Err(Error::invalid(
            param,
            format!("{v} is outside the allowed range [{min}, {max}]"),
        )),
        _ => Ok(()),
    }
}

pub(super) fn output_contract(req: &CreateResponse) -> Result<OutputContract, Error> {
    let format = req.text.as_ref().and_then(|t| t.format.as_ref());
    Ok(match format {
        None | Some(TextFormat::Text) => OutputContract::Text,
        Some(TextFormat::JsonObject) => OutputContract::JsonObject,
        Some(TextFormat::JsonSchema(f)) => {
            if f.name.is_empty() {
                return Err(Error::invalid("text.format.name", "must not be empty"));
            }
            if !f.schema.is_object() {
                return Err(Error::InvalidSchema {
                    param: "text.format.schema".into(),
                    message: "must be a JSON object".into(),
                });
            }
            OutputContract::JsonSchema(SchemaContract::new(
                f.name.clone(),
                f.description.clone(),
                f.schema.clone(),
                f.strict.unwrap_or(false),
            )?)
        }
    })
}
