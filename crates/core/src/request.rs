//! Normalising a Responses request: validation with field paths, and the reduction of items to
//! [`Turn`]s.
//!
//! What is refused here is refused for every provider (a missing model, an unknown role, a
//! malformed item, a function's `parameters` that is not an object schema: `request/parameters.rs`).
//! What one provider cannot take is the dialect translator's business.//!
//! `normalize` here runs the stages: the request-wide checks and parameters (`request/validate.rs`),
//! the reduction of input items to turns (`request/turns.rs`, with the texts of contents and
//! outputs in `request/content.rs`) and the tools' schemas (`request/parameters.rs`).

mod content;
mod metadata;
mod parameters;
mod turns;
mod validate;

use toolbridge_wire::responses::{CreateResponse, Input};

use crate::Error;
use crate::canonical::{CanonicalRequest, Turn, UserPart};
pub use metadata::{MAX_KEY_CHARS, MAX_KEYS, MAX_VALUE_CHARS, check_metadata};
use turns::Reducer;
pub use turns::found_text;
use validate::{output_contract, params};

/// Limits on what one request may contain.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_input_items: usize,
    pub max_tools: usize,
    pub max_stop_sequences: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_items: 10_000,
            max_tools: 512,
            max_stop_sequences: 16,
        }
    }
}

/// Validates `req` and reduces it to a [`CanonicalRequest`].
pub fn normalize(req: &CreateResponse, limits: &Limits) -> Result<CanonicalRequest, Error> {
    let model = match req.model.as_deref() {
        None => {
            return Err(Error::MissingParameter {
                param: "model".into(),
            });
        }
        Some("") => return Err(Error::invalid("model", "must not be empty")),
        Some(m) => m.to_owned(),
    };
    let mut diagnostics = Vec::new();
    let mut turns = Vec::new();
    let mut context_tools = Vec::new();
    let mut cache_marks = Vec::new();
    if let Some(instructions) = &req.instructions
        && !instructions.is_empty()
    {
        turns.push(Turn::System {
            text: instructions.clone(),
            developer: false,
        });
    }
    match &req.input {
        None => {
            return Err(Error::MissingParameter {
                param: "input".into(),
            });
        }
        Some(Input::Text(text)) => turns.push(Turn::User {
            parts: vec![UserPart::Text(text.clone())],
        }),
        Some(Input::Items(items)) => {
            if items.len() > limits.max_input_items {
                return Err(Error::invalid(
                    "input",
                    format!(
                        "{} items is more than the limit of {}",
                        items.len(),
                        limits.max_input_items
                    ),
                ));
            }
            let mut reducer = Reducer::default();
            for (i, item) in items.iter().enumerate() {
                reducer.item(i, item)?;
            }
            let reduced = reducer.finish();
            let offset = turns.len();
            cache_marks = reduced.cache_marks.iter().map(|m| m + offset).collect();
            turns.extend(reduced.turns);
            diagnostics.extend(reduced.diagnostics);
            context_tools = reduced.context_tools;
        }
    }
    if !turns.iter().any(|t| !matches!(t, Turn::System { .. })) {
        return Err(Error::invalid(
            "input",
            "must contain at least one user, assistant or tool item",
        ));
    }

    let tools = req.tools.clone().unwrap_or_default();
    if tools.len() > limits.max_tools {
        return Err(Error::invalid(
            "tools",
            format!(
                "{} tools is more than the limit of {}",
                tools.len(),
                limits.max_tools
            ),
        ));
    }
    if tools.len() + context_tools.len() > limits.max_tools {
        return Err(Error::invalid(
            "input",
            format!(
                "{} declared tools and {} declared in the conversation (`additional_tools`, `tool_search_output`) are more than the limit of {}",
                tools.len(),
                context_tools.len(),
                limits.max_tools
            ),
        ));
    }
    parameters::check_tools(&tools)?;
    parameters::check_context_tools(&mut context_tools, &mut diagnostics);
    let params = params(req, limits)?;
    let output = output_contract(req)?;
    Ok(CanonicalRequest {
        model,
        turns,
        tools,
        context_tools,
        tool_choice: req.tool_choice.clone(),
        params,
        output,
        stream: req.stream.unwrap_or(false),
        diagnostics,
        cache_marks,
    })
}
