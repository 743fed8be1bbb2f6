//! The provider-neutral request: what the client asked for, validated, with Responses-specific
//! shapes (items, parts, roles) reduced to turns every dialect can be built from.

use serde_json::{Map, Value};
use toolbridge_wire::responses::{Diagnostic, Tool};

use crate::contract::OutputContract;
use crate::plan::Identity;

/// A validated request, ready for a dialect's translator.
#[derive(Debug, Clone)]
pub struct CanonicalRequest {
    /// The model name the client asked for.
    pub model: String,
    /// The conversation in order; `instructions` come first as a system turn.
    pub turns: Vec<Turn>,
    /// The declared tools, as sent; planning decides what becomes of them.
    pub tools: Vec<Tool>,
    /// `tool_choice` as the client sent it.
    pub tool_choice: Option<Value>,
    pub params: Params,
    pub output: OutputContract,
    pub stream: bool,
    /// Decisions made while normalising.
    pub diagnostics: Vec<Diagnostic>,
}

/// Sampling and limit parameters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub max_output_tokens: Option<u64>,
    pub stop: Vec<String>,
    /// `safety_identifier`, or the legacy `user` when it is absent.
    pub end_user: Option<String>,
    pub prompt_cache_key: Option<String>,
    pub parallel_tool_calls: Option<bool>,
    pub top_logprobs: Option<u32>,
    pub reasoning_effort: Option<String>,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Instructions: `instructions`, or a `system`/`developer` message.
    System {
        text: String,
        developer: bool,
    },
    User {
        parts: Vec<UserPart>,
    },
    Assistant(AssistantTurn),
    ToolResult {
        call_id: String,
        output: String,
    },
}

/// One part of a user turn.
#[derive(Debug, Clone, PartialEq)]
pub enum UserPart {
    Text(String),
    /// An image by URL (including `data:` URLs) with the optional detail level.
    Image {
        url: String,
        detail: Option<String>,
    },
}

/// An assistant turn: everything the model produced between two user or tool turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssistantTurn {
    pub text: Option<String>,
    /// The turn's reasoning text, for providers that need it replayed.
    pub reasoning: Option<String>,
    /// The provider's signature over that reasoning (Anthropic's `thinking`, Gemini's
    /// `thoughtSignature`), recovered from its sealed blob or the gateway's provider-state
    /// store; a provider that checks signatures gets the reasoning back only with it.
    pub reasoning_signature: Option<String>,
    /// Reasoning the provider returned encrypted (Anthropic's `redacted_thinking` `data`),
    /// recovered the same way, replayed unchanged.
    pub redacted_reasoning: Vec<String>,
    /// `encrypted_content` blobs of the turn's reasoning items that had no plain text; opened by
    /// [`crate::reasoning::open_sealed`].
    pub sealed_reasoning: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
}

/// A tool call made by the model in an earlier turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub call_id: String,
    pub kind: CallKind,
}

/// What an earlier call was, as the client echoed it.
#[derive(Debug, Clone, PartialEq)]
pub enum CallKind {
    Function {
        namespace: Option<String>,
        name: String,
        arguments: String,
    },
    Custom {
        namespace: Option<String>,
        name: String,
        input: String,
    },
    LocalShell {
        action: Value,
    },
    Shell {
        action: Value,
    },
    ApplyPatch {
        operation: Value,
    },
    /// A call the gateway ran (an `mcp_call` item echoed back).
    Gateway {
        server: String,
        name: String,
        arguments: String,
    },
}

impl CallKind {
    /// The identity of the tool this call was made to.
    pub fn identity(&self) -> Identity {
        match self {
            Self::Function {
                namespace, name, ..
            } => Identity::Function {
                namespace: namespace.clone(),
                name: name.clone(),
            },
            Self::Custom {
                namespace, name, ..
            } => Identity::Custom {
                namespace: namespace.clone(),
                name: name.clone(),
            },
            Self::LocalShell { .. } => Identity::LocalShell,
            Self::Shell { .. } => Identity::Shell,
            Self::ApplyPatch { .. } => Identity::ApplyPatch,
            Self::Gateway { server, name, .. } => Identity::Gateway {
                server: server.clone(),
                name: name.clone(),
            },
        }
    }
}

/// Extra keys of an object, for passing unknown data along.
pub type Extra = Map<String, Value>;
