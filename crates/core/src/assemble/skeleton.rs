//! The response skeleton: the response object as it stands before any output, with every
//! required key present and every request default filled in (`tool_choice: "auto"`,
//! `truncation: "disabled"`, `top_p: 1`, …), and how `text.format` and the conversation are
//! echoed.
//!
//! Not here: anything that depends on the upstream's answer (that is the [`super::Assembler`]'s).

use serde_json::Value;
use toolbridge_wire::responses::{
    CreateResponse, JsonSchemaFormat, Response, ResponseStatus, TextConfig, TextFormat,
};

/// What the response echoes about the request and how it is identified.
#[derive(Debug, Clone)]
pub struct ResponseMeta {
    pub id: String,
    pub created_at: i64,
    /// Whether the response will be retrievable later.
    pub stored: bool,
}

/// Builds the response object as it stands before any output: every required key present and
/// every request default filled in.
pub fn skeleton(req: &CreateResponse, meta: &ResponseMeta) -> Response {
    Response {
        id: meta.id.clone(),
        object: "response".to_owned(),
        created_at: meta.created_at,
        completed_at: None,
        status: ResponseStatus::InProgress,
        incomplete_details: None,
        model: req.model.clone().unwrap_or_default(),
        previous_response_id: req.previous_response_id.clone(),
        instructions: req.instructions.clone(),
        output: Vec::new(),
        error: None,
        tools: req.tools.clone().unwrap_or_default().into(),
        tool_choice: req
            .tool_choice
            .clone()
            .unwrap_or_else(|| Value::String("auto".to_owned())),
        truncation: req
            .truncation
            .clone()
            .unwrap_or_else(|| "disabled".to_owned()),
        parallel_tool_calls: req.parallel_tool_calls.unwrap_or(true),
        text: TextConfig {
            format: Some(echoed_format(req)),
            verbosity: req.text.as_ref().and_then(|t| t.verbosity.clone()),
        },
        top_p: req.top_p.unwrap_or(1.0),
        presence_penalty: req.presence_penalty.unwrap_or(0.0),
        frequency_penalty: req.frequency_penalty.unwrap_or(0.0),
        top_logprobs: req.top_logprobs.unwrap_or(0),
        temperature: req.temperature.unwrap_or(1.0),
        reasoning: req.reasoning.clone(),
        usage: None,
        max_output_tokens: req.max_output_tokens,
        max_tool_calls: req.max_tool_calls,
        store: meta.stored,
        background: req.background.unwrap_or(false),
        service_tier: req
            .service_tier
            .clone()
            .filter(|t| t != "auto")
            .unwrap_or_else(|| "default".to_owned()),
        metadata: req.metadata.clone().unwrap_or_default(),
        safety_identifier: req.safety_identifier.clone(),
        prompt_cache_key: req.prompt_cache_key.clone(),
        conversation: conversation_id(req).map(|id| serde_json::json!({"id": id})),
        toolbridge_diagnostics: Vec::new(),
        provider_states: Vec::new(),
        extra: serde_json::Map::new(),
    }
}

/// The conversation a request names: `conversation: "conv_…"` or `{"id": "conv_…"}`.
pub fn conversation_id(req: &CreateResponse) -> Option<String> {
    match req.extra.get("conversation")? {
        Value::String(id) => Some(id.clone()),
        Value::Object(obj) => obj.get("id").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// `text.format` as the response echoes it: as the client sent it, schema included (OpenAI
/// echoes the schema, and the Python SDK's strict parsing refuses a `null` one), with `strict`
/// always a boolean.
fn echoed_format(req: &CreateResponse) -> TextFormat {
    match req.text.as_ref().and_then(|t| t.format.as_ref()) {
        None => TextFormat::Text,
        Some(TextFormat::JsonSchema(f)) => TextFormat::JsonSchema(JsonSchemaFormat {
            name: f.name.clone(),
            schema: f.schema.clone(),
            description: f.description.clone(),
            strict: Some(f.strict.unwrap_or(false)),
        }),
        Some(other) => other.clone(),
    }
}

/// A response with nothing in it, left behind when the machine hands its response out.
pub(super) fn empty_response() -> Response {
    skeleton(
        &CreateResponse::default(),
        &ResponseMeta {
            id: String::new(),
            created_at: 0,
            stored: false,
        },
    )
}
