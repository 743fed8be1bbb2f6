//! [`ToolCapabilities`]: what a provider accepts of tools, as data in its profile, and the
//! native forms of the hosted tools it can run itself.
//!
//! Not here: how the planner reads them (`mod.rs`, `candidates`, `hosted`) and the per-type
//! decisions of client-run tool types (`tool_types`).

use serde::{Deserialize, Serialize};

use super::{ToolTypeDecision, ToolTypes, tool_types};

/// What a provider accepts of tools, as data. Part of a provider profile, written in TOML by
/// presets and config (`"none"` turns an optional field off).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCapabilities {
    /// The most tools one request may declare upstream; `"none"` for no limit.
    #[serde(default, with = "tool_types::none_word")]
    pub max_tools: Option<usize>,
    /// The longest tool name.
    pub name_max_len: usize,
    /// Characters allowed in tool names besides ASCII letters and digits.
    pub name_punctuation: String,
    /// Accepts `strict` on functions.
    pub strict: bool,
    /// Accepts `tool_choice: "none"`.
    pub choice_none: bool,
    /// Accepts `tool_choice: "required"`.
    pub choice_required: bool,
    /// Accepts a named function in `tool_choice`.
    pub choice_named: bool,
    /// Accepts `tool_choice: {"type":"allowed_tools",…}`.
    pub choice_allowed_tools: bool,
    /// How `web_search` goes upstream natively, if it can.
    #[serde(default, with = "tool_types::none_word")]
    pub web_search: Option<NativeWebSearch>,
    /// How `file_search` goes upstream natively, if it can.
    #[serde(default, with = "tool_types::none_word")]
    pub file_search: Option<NativeFileSearch>,
    /// How `mcp` goes upstream natively, if it can.
    #[serde(default, with = "tool_types::none_word")]
    pub mcp: Option<NativeMcp>,
    /// What happens to a tool the provider cannot take in any form.
    pub unsupported: UnsupportedPolicy,
    /// What is decided for each tool type the client runs itself (`custom`, `local_shell`,
    /// `shell`, `apply_patch`).
    #[serde(default)]
    pub tool_types: ToolTypes,
    /// How the tools a client-run `tool_search` found reach the model: declared beside the
    /// others, or called through one function declared from the first round (the tool list,
    /// which providers cache before the conversation, then never changes mid-session).
    #[serde(default)]
    pub found_tools: FoundTools,
    /// The provider speaks the Responses API itself: every declared tool goes upstream as
    /// declared (native, names unchanged), and `tool_choice` is passed as is. Set for the
    /// `responses` dialect only (the gateway's config enforces it).
    #[serde(default)]
    pub responses_native: bool,
    /// For a native Responses upstream (`responses_native`): what the endpoint takes as
    /// declared, per tool type; everything else is planned as for a translating dialect.
    #[serde(default)]
    pub responses: ResponsesTools,
}

/// What a native Responses endpoint takes as declared, per tool type (data, read only when
/// `responses_native`). The defaults are OpenAI's own endpoint: everything as declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResponsesTools {
    pub custom: ToolTypeDecision,
    pub local_shell: ToolTypeDecision,
    pub shell: ToolTypeDecision,
    pub apply_patch: ToolTypeDecision,
    /// `namespace` tools: `native`, or `degraded` (flattened into `namespace__name` functions,
    /// calls restored with `namespace` + `name`), `ignored`, `rejected`.
    pub namespace: ToolTypeDecision,
    /// Hosted tool types the endpoint runs itself, sent as declared (`"*"`: every one). Any
    /// other hosted tool is planned as for a translating dialect (`tool_search` degraded where
    /// the planner can, else left out or refused per `unsupported`).
    pub server_tools: Vec<String>,
    /// Tool types toolbridge does not know: `native` (passed as declared) or `ignored`.
    pub unknown: ToolTypeDecision,
}

impl Default for ResponsesTools {
    fn default() -> Self {
        Self {
            custom: ToolTypeDecision::Native,
            local_shell: ToolTypeDecision::Native,
            shell: ToolTypeDecision::Native,
            apply_patch: ToolTypeDecision::Native,
            namespace: ToolTypeDecision::Native,
            server_tools: vec!["*".to_owned()],
            unknown: ToolTypeDecision::Native,
        }
    }
}

impl ResponsesTools {
    /// The client-run types' decisions, as the translating planner reads them.
    pub fn tool_types(&self) -> ToolTypes {
        ToolTypes {
            custom: self.custom,
            local_shell: self.local_shell,
            shell: self.shell,
            apply_patch: self.apply_patch,
            // Not among `server_tools`: the client-run form goes as the translating planner's
            // function, its calls restored as `tool_search_call`.
            tool_search: ToolTypeDecision::Degraded,
        }
    }

    /// Whether the endpoint runs the hosted tool type `kind` itself.
    pub fn runs(&self, kind: &str) -> bool {
        self.server_tools
            .iter()
            .any(|t| t == "*" || t == kind || (t == "web_search" && kind.starts_with("web_search")))
    }
}

impl Default for ToolCapabilities {
    fn default() -> Self {
        Self {
            max_tools: Some(128),
            name_max_len: 64,
            name_punctuation: "_-".to_owned(),
            strict: true,
            choice_none: true,
            choice_required: true,
            choice_named: true,
            choice_allowed_tools: false,
            web_search: None,
            file_search: None,
            mcp: None,
            unsupported: UnsupportedPolicy::Ignore,
            tool_types: ToolTypes::default(),
            found_tools: FoundTools::default(),
            responses_native: false,
            responses: ResponsesTools::default(),
        }
    }
}

/// How the tools found by a client-run `tool_search` (sent as a function) reach the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundTools {
    /// Declared as functions once found: the tool list changes, and with it every cached
    /// prefix that begins with the tools.
    Declared,
    /// Called through one function (`call_found_tool`, declared whenever `tool_search` is):
    /// their schemas arrive in the search's result, their calls are restored as the real
    /// tools'. The tool list stays the same for the whole session. One design for every
    /// translating dialect rather than Anthropic's `defer_loading` with tool references: those
    /// exist on Anthropic's own endpoint only, and the dispatcher costs the same there.
    #[default]
    Dispatched,
}

/// Native forms of `web_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NativeWebSearch {
    /// Zhipu GLM: `{"type":"web_search","web_search":{…}}`.
    GlmTool,
    /// Qwen (DashScope): the request flag `enable_search: true`.
    QwenFlag,
    /// Moonshot Kimi: the builtin `$web_search` function, whose calls the caller echoes back as
    /// their own result so that Kimi runs the search (see
    /// [`ToolPlan::echo_tools`](super::ToolPlan::echo_tools)).
    KimiBuiltin,
    /// Anthropic: the server tool `{"type":"web_search_20250305","name":"web_search"}`, run by
    /// Anthropic within the turn (allowed domains and the user's location carried over).
    AnthropicServerTool,
    /// Gemini: the `googleSearch` tool (grounding with Google Search), run by Gemini.
    GeminiGoogleSearch,
}

/// Native forms of `file_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NativeFileSearch {
    /// Zhipu GLM: `{"type":"retrieval","retrieval":{"knowledge_id":…}}` per vector store.
    GlmRetrieval,
}

/// Native forms of `mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NativeMcp {
    /// Zhipu GLM: `{"type":"mcp","mcp":{server_label, server_url, transport_type, …}}`.
    GlmMcp,
}

/// What happens to a tool a provider cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnsupportedPolicy {
    /// Leave it out, with a diagnostic.
    Ignore,
    /// Refuse the request with `unsupported_tool`.
    Reject,
}
