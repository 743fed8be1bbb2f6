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
    /// Tools the conversation itself declares: an `additional_tools` item's, and those a
    /// `tool_search_output` found. Planned after `tools`, like them.
    pub context_tools: Vec<ContextTool>,
    /// `tool_choice` as the client sent it.
    pub tool_choice: Option<Value>,
    pub params: Params,
    pub output: OutputContract,
    pub stream: bool,
    /// Decisions made while normalising.
    pub diagnostics: Vec<Diagnostic>,
    /// The user turns (indices into `turns`) the client ended with an explicit cache breakpoint
    /// (OpenAI's `prompt_cache_breakpoint`); dialects with breakpoints mark them first.
    pub cache_marks: Vec<usize>,
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
        output: ToolOutput,
    },
}

/// A tool's output: text, or content parts (MCP and search results come back as
/// `input_text` / `input_image` / `input_file` parts). Each dialect maps the parts as its profile
/// says (`tool_output`): content parts where the provider takes them, joined text otherwise.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    Text(String),
    Parts(Vec<OutputPart>),
}

/// One part of a tool output given as content parts.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputPart {
    Text(String),
    /// An image by URL (including `data:` URLs) with the optional detail level.
    Image {
        url: String,
        detail: Option<String>,
    },
    /// A file: inline (`data:` URL in `file_data`), by URL, or by an id only the client's
    /// platform knows.
    File {
        filename: Option<String>,
        data: Option<String>,
        url: Option<String>,
        file_id: Option<String>,
    },
}

impl ToolOutput {
    /// The output as text: a string as it came, content parts' texts joined (images and files
    /// left out; a dialect that cannot take them reports what it did with them).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Self::Text(text) => std::borrow::Cow::Borrowed(text),
            Self::Parts(parts) => std::borrow::Cow::Owned(
                parts
                    .iter()
                    .filter_map(|p| match p {
                        OutputPart::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(""),
            ),
        }
    }

    /// Whether the output carries images or files besides text.
    pub fn has_media(&self) -> bool {
        match self {
            Self::Text(_) => false,
            Self::Parts(parts) => parts.iter().any(|p| !matches!(p, OutputPart::Text(_))),
        }
    }

    /// Whether there is nothing in it.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Text(text) => text.is_empty(),
            Self::Parts(parts) => parts
                .iter()
                .all(|p| matches!(p, OutputPart::Text(t) if t.is_empty())),
        }
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
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
    /// A client-run `tool_search_call`: its arguments object (`{"query": …}`).
    ToolSearch {
        arguments: Value,
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
            Self::ToolSearch { .. } => Identity::ToolSearch,
            Self::Gateway { server, name, .. } => Identity::Gateway {
                server: server.clone(),
                name: name.clone(),
            },
        }
    }
}

/// A tool declared inside the conversation, with its request path (`input[3].tools[0]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ContextTool {
    pub param: String,
    pub tool: Tool,
    pub source: ContextSource,
}

/// Where a [`ContextTool`] was declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextSource {
    /// An `additional_tools` input item.
    Additional,
    /// A `tool_search_output` item: tools found by a search.
    Found,
}

impl CanonicalRequest {
    /// Every tool the plan covers: the declared ones, then the conversation's own (borrowed when
    /// there are none, the common case).
    pub fn planned_tools(&self) -> std::borrow::Cow<'_, [Tool]> {
        if self.context_tools.is_empty() {
            return std::borrow::Cow::Borrowed(&self.tools);
        }
        let mut all = self.tools.clone();
        all.extend(self.context_tools.iter().map(|c| c.tool.clone()));
        std::borrow::Cow::Owned(all)
    }
}

/// Extra keys of an object, for passing unknown data along.
pub type Extra = Map<String, Value>;
