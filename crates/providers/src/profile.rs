//! Provider profiles: what each Chat Completions provider accepts, as data.
//!
//! A preset is a named [`Profile`]. Configuration picks a preset per provider and may patch any
//! field, for the provider as a whole or per model, with a [`ProfilePatch`]. Translators and
//! decoders read only the profile: there is no `if provider == …` anywhere else.

use serde::{Deserialize, Serialize};
use toolbridge_core::plan::{
    NativeFileSearch, NativeMcp, NativeWebSearch, ToolCapabilities, UnsupportedPolicy,
};

/// Where the output-token limit goes in a Chat request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

/// Where the end-user identifier goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndUserField {
    User,
    SafetyIdentifier,
    /// The provider takes none: the identifier is dropped with a diagnostic.
    None,
}

/// How `reasoning.effort` (`none`, `minimal`, `low`, `medium`, `high`, `xhigh`) is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffortStyle {
    /// Not at all: the effort is dropped with a diagnostic.
    None,
    /// `reasoning_effort: <effort>` as the client sent it (OpenAI, vLLM).
    ReasoningEffort,
    /// `thinking: {type: enabled|disabled}` plus `reasoning_effort: high|max`.
    DeepSeek,
    /// `thinking: {type: enabled|disabled}` (GLM, MiMo).
    Glm,
    /// `enable_thinking: true|false`.
    Qwen,
    /// `thinking: {type: adaptive|disabled}`.
    MiniMax,
}

/// Which earlier assistant turns send their reasoning back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningReplay {
    Never,
    /// Turns that made tool calls (DeepSeek and Kimi answer 400 without it).
    ToolCallTurns,
    /// Every assistant turn (GLM with `clear_thinking: false`).
    All,
}

/// How a provider-specific finish reason maps to the neutral vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishKind {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    ContextLength,
    /// The provider failed (overloaded, network error, …).
    Error,
}

/// What one Chat Completions provider accepts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// The preset this profile came from.
    pub name: String,
    /// Accepts the `developer` role; otherwise developer messages are sent as `system`.
    pub developer_role: bool,
    /// Consecutive system messages must be merged into one.
    pub merge_system: bool,
    pub max_tokens_field: MaxTokensField,
    /// The accepted temperature range; values outside are clamped with a diagnostic.
    pub temperature_range: [f64; 2],
    /// Accepts `presence_penalty` and `frequency_penalty`.
    pub penalties: bool,
    /// Accepts `stop`.
    pub stop: bool,
    /// Accepts `logprobs`/`top_logprobs`.
    pub logprobs: bool,
    pub end_user_field: EndUserField,
    /// Accepts `prompt_cache_key`.
    pub prompt_cache_key: bool,
    /// Accepts `response_format: {type: "json_schema"}`.
    pub json_schema: bool,
    /// Accepts `response_format: {type: "json_object"}`.
    pub json_object: bool,
    /// JSON mode requires the word "json" somewhere in the prompt (DeepSeek).
    pub json_object_needs_json_word: bool,
    /// Accepts `stream_options: {include_usage: true}`.
    pub stream_usage: bool,
    /// Accepts `parallel_tool_calls`.
    pub parallel_tool_calls: bool,
    /// How `reasoning.effort` is said to this provider.
    pub effort: EffortStyle,
    /// Which earlier assistant turns carry their reasoning back (`reasoning_content`).
    pub reasoning_replay: ReasoningReplay,
    /// Reasoning arrives in the content inside a leading `<think>…</think>` block.
    pub think_tags: bool,
    /// Streamed requests with tools carry `tool_stream: true`, without which the provider sends
    /// each call whole in one chunk (GLM-5.x/4.7/4.6; patch it off per model for older ones).
    pub tool_stream: bool,
    /// Fields added to every request body (`clear_thinking`, `reasoning_split`, …).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Provider-specific finish reasons (the OpenAI ones are always known).
    pub finish_reasons: Vec<(String, FinishKind)>,
    /// Context windows of models this provider is known to serve, for `GET /v1/models`.
    pub context_windows: Vec<(String, u64)>,
    /// What the provider accepts of tools.
    pub tools: ToolCapabilities,
    /// The provider is known to end answers with neither a finish reason nor its dialect's end
    /// marker: such an answer completes (with an `upstream_unterminated` diagnostic) instead of
    /// ending `incomplete` as `upstream_truncated`. Off in every preset.
    #[serde(default)]
    pub tolerate_unterminated: bool,
}

impl Profile {
    /// The generic OpenAI-compatible profile: what OpenAI's own Chat Completions accepts.
    pub fn generic() -> Self {
        Self {
            name: "generic".to_owned(),
            developer_role: true,
            merge_system: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            temperature_range: [0.0, 2.0],
            penalties: true,
            stop: true,
            logprobs: true,
            end_user_field: EndUserField::User,
            prompt_cache_key: false,
            json_schema: true,
            json_object: true,
            json_object_needs_json_word: false,
            stream_usage: true,
            parallel_tool_calls: true,
            effort: EffortStyle::None,
            reasoning_replay: ReasoningReplay::Never,
            think_tags: false,
            tool_stream: false,
            extra_body: serde_json::Map::new(),
            finish_reasons: Vec::new(),
            context_windows: Vec::new(),
            tools: ToolCapabilities::default(),
            tolerate_unterminated: false,
        }
    }

    /// A preset by name; `None` for an unknown name.
    pub fn preset(name: &str) -> Option<Self> {
        let generic = Self::generic();
        let named = |n: &str| n.to_owned();
        let reasons = |list: &[(&str, FinishKind)]| {
            list.iter()
                .map(|(r, k)| ((*r).to_owned(), *k))
                .collect::<Vec<_>>()
        };
        let windows = |list: &[(&str, u64)]| {
            list.iter()
                .map(|(m, w)| ((*m).to_owned(), *w))
                .collect::<Vec<_>>()
        };
        Some(match name {
            "generic" => generic,
            "openai" => Self {
                name: named("openai"),
                max_tokens_field: MaxTokensField::MaxCompletionTokens,
                end_user_field: EndUserField::SafetyIdentifier,
                prompt_cache_key: true,
                effort: EffortStyle::ReasoningEffort,
                tools: ToolCapabilities {
                    choice_allowed_tools: true,
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            "deepseek" => Self {
                name: named("deepseek"),
                developer_role: false,
                json_schema: false,
                json_object_needs_json_word: true,
                logprobs: false,
                end_user_field: EndUserField::None,
                effort: EffortStyle::DeepSeek,
                reasoning_replay: ReasoningReplay::ToolCallTurns,
                finish_reasons: reasons(&[("insufficient_system_resource", FinishKind::Error)]),
                context_windows: windows(&[
                    ("deepseek-v4-flash", 1_000_000),
                    ("deepseek-v4-pro", 1_000_000),
                    ("deepseek-chat", 128_000),
                    ("deepseek-reasoner", 128_000),
                ]),
                tools: ToolCapabilities {
                    strict: false,
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            "glm" => Self {
                name: named("glm"),
                tool_stream: true,
                effort: EffortStyle::Glm,
                developer_role: false,
                merge_system: true,
                temperature_range: [0.0, 1.0],
                penalties: false,
                logprobs: false,
                json_schema: false,
                end_user_field: EndUserField::None,
                finish_reasons: reasons(&[
                    ("sensitive", FinishKind::ContentFilter),
                    ("network_error", FinishKind::Error),
                    ("model_context_window_exceeded", FinishKind::ContextLength),
                ]),
                context_windows: windows(&[
                    ("glm-5.1", 200_000),
                    ("glm-5", 200_000),
                    ("glm-4.7", 200_000),
                    ("glm-4.6", 200_000),
                    ("glm-4.5", 128_000),
                ]),
                tools: ToolCapabilities {
                    strict: false,
                    choice_none: false,
                    choice_required: false,
                    choice_named: false,
                    web_search: Some(NativeWebSearch::GlmTool),
                    file_search: Some(NativeFileSearch::GlmRetrieval),
                    mcp: Some(NativeMcp::GlmMcp),
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            "kimi" => Self {
                name: named("kimi"),
                reasoning_replay: ReasoningReplay::ToolCallTurns,
                developer_role: false,
                temperature_range: [0.0, 1.0],
                logprobs: false,
                json_schema: false,
                end_user_field: EndUserField::None,
                context_windows: windows(&[("kimi-k2", 256_000), ("kimi-k2-thinking", 256_000)]),
                tools: ToolCapabilities {
                    strict: false,
                    choice_required: false,
                    choice_named: false,
                    web_search: Some(NativeWebSearch::KimiBuiltin),
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            "qwen" => Self {
                name: named("qwen"),
                effort: EffortStyle::Qwen,
                developer_role: false,
                temperature_range: [0.0, 1.99],
                logprobs: false,
                end_user_field: EndUserField::None,
                tools: ToolCapabilities {
                    strict: false,
                    choice_required: false,
                    web_search: Some(NativeWebSearch::QwenFlag),
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            "minimax" => Self {
                name: named("minimax"),
                effort: EffortStyle::MiniMax,
                think_tags: true,
                extra_body: [("reasoning_split".to_owned(), serde_json::Value::Bool(true))]
                    .into_iter()
                    .collect(),
                developer_role: false,
                max_tokens_field: MaxTokensField::MaxCompletionTokens,
                temperature_range: [0.01, 1.0],
                penalties: false,
                logprobs: false,
                json_schema: false,
                json_object: false,
                end_user_field: EndUserField::None,
                tools: only_auto(),
                ..generic
            },
            "mimo" => Self {
                name: named("mimo"),
                effort: EffortStyle::Glm,
                developer_role: false,
                max_tokens_field: MaxTokensField::MaxCompletionTokens,
                temperature_range: [0.0, 1.5],
                logprobs: false,
                json_schema: false,
                end_user_field: EndUserField::None,
                finish_reasons: reasons(&[("repetition_truncation", FinishKind::Length)]),
                tools: only_auto(),
                ..generic
            },
            "ollama" => Self {
                name: named("ollama"),
                think_tags: true,
                developer_role: false,
                logprobs: false,
                end_user_field: EndUserField::None,
                tools: only_auto(),
                ..generic
            },
            "vllm" => Self {
                name: named("vllm"),
                think_tags: true,
                effort: EffortStyle::ReasoningEffort,
                developer_role: false,
                end_user_field: EndUserField::User,
                tools: ToolCapabilities {
                    strict: false,
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            // The Messages dialect reads only the tool rules, temperature range, context windows
            // and extra body from a profile; the rest of its translation is its own.
            "anthropic" => Self {
                name: named("anthropic"),
                developer_role: false,
                temperature_range: [0.0, 1.0],
                penalties: false,
                logprobs: false,
                end_user_field: EndUserField::None,
                json_schema: false,
                json_object: false,
                context_windows: windows(&[
                    ("claude-opus-4-1", 200_000),
                    ("claude-opus-4-5", 200_000),
                    ("claude-sonnet-4-5", 200_000),
                    ("claude-haiku-4-5", 200_000),
                ]),
                tools: ToolCapabilities {
                    strict: false,
                    web_search: Some(NativeWebSearch::AnthropicServerTool),
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            // Likewise for the generateContent dialect. Gemini function names may also hold dots.
            "gemini" => Self {
                name: named("gemini"),
                developer_role: false,
                logprobs: false,
                end_user_field: EndUserField::None,
                context_windows: windows(&[
                    ("gemini-2.5-pro", 1_048_576),
                    ("gemini-2.5-flash", 1_048_576),
                    ("gemini-2.5-flash-lite", 1_048_576),
                ]),
                tools: ToolCapabilities {
                    strict: false,
                    name_punctuation: "_-.".to_owned(),
                    web_search: Some(NativeWebSearch::GeminiGoogleSearch),
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            // The Responses dialect (OpenAI, or any Responses server): the request passes through,
            // so only the tool rules (every tool as declared), context windows and extra body are
            // read.
            "responses" => Self {
                name: named("responses"),
                context_windows: windows(&[
                    ("gpt-5", 400_000),
                    ("gpt-5-codex", 400_000),
                    ("gpt-5.1", 400_000),
                    ("gpt-5.1-codex", 400_000),
                    ("gpt-4.1", 1_047_576),
                ]),
                tools: ToolCapabilities {
                    max_tools: None,
                    name_punctuation: "_-.".to_owned(),
                    choice_allowed_tools: true,
                    responses_native: true,
                    ..ToolCapabilities::default()
                },
                ..generic
            },
            _ => return None,
        })
    }

    /// The names of every preset.
    pub fn preset_names() -> &'static [&'static str] {
        &[
            "generic",
            "openai",
            "deepseek",
            "glm",
            "kimi",
            "qwen",
            "minimax",
            "mimo",
            "ollama",
            "vllm",
            "anthropic",
            "gemini",
            "responses",
        ]
    }

    /// Applies a patch from configuration.
    pub fn patched(mut self, patch: &ProfilePatch) -> Self {
        macro_rules! apply {
            ($($field:ident),*) => {$(
                if let Some(v) = &patch.$field { self.$field = v.clone(); }
            )*};
        }
        apply!(
            developer_role,
            merge_system,
            max_tokens_field,
            temperature_range,
            penalties,
            stop,
            logprobs,
            end_user_field,
            prompt_cache_key,
            json_schema,
            json_object,
            json_object_needs_json_word,
            stream_usage,
            parallel_tool_calls,
            effort,
            reasoning_replay,
            think_tags,
            tool_stream,
            tolerate_unterminated
        );
        if let Some(extra) = &patch.extra_body {
            for (k, v) in extra {
                self.extra_body.insert(k.clone(), v.clone());
            }
        }
        patch.tools.apply(&mut self.tools);
        if let Some(extra) = &patch.finish_reasons {
            self.finish_reasons
                .extend(extra.iter().map(|(k, v)| (k.clone(), *v)));
        }
        self
    }

    /// The neutral meaning of a finish reason, `None` when neither OpenAI nor this profile knows it.
    pub fn finish_kind(&self, reason: &str) -> Option<FinishKind> {
        if let Some((_, kind)) = self.finish_reasons.iter().find(|(r, _)| r == reason) {
            return Some(*kind);
        }
        match reason {
            "stop" | "end_turn" | "stop_sequence" | "eos" => Some(FinishKind::Stop),
            "tool_calls" | "function_call" => Some(FinishKind::ToolCalls),
            "length" | "max_tokens" => Some(FinishKind::Length),
            "content_filter" => Some(FinishKind::ContentFilter),
            _ => None,
        }
    }

    /// The context window of `model`, when known.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.context_windows
            .iter()
            .find(|(m, _)| m == model)
            .map(|(_, w)| *w)
    }
}

/// Configuration's changes to a preset. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilePatch {
    pub developer_role: Option<bool>,
    pub merge_system: Option<bool>,
    pub max_tokens_field: Option<MaxTokensField>,
    pub temperature_range: Option<[f64; 2]>,
    pub penalties: Option<bool>,
    pub stop: Option<bool>,
    pub logprobs: Option<bool>,
    pub end_user_field: Option<EndUserField>,
    pub prompt_cache_key: Option<bool>,
    pub json_schema: Option<bool>,
    pub json_object: Option<bool>,
    pub json_object_needs_json_word: Option<bool>,
    pub stream_usage: Option<bool>,
    pub parallel_tool_calls: Option<bool>,
    pub effort: Option<EffortStyle>,
    pub reasoning_replay: Option<ReasoningReplay>,
    pub think_tags: Option<bool>,
    pub tool_stream: Option<bool>,
    pub tolerate_unterminated: Option<bool>,
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    pub finish_reasons: Option<std::collections::BTreeMap<String, FinishKind>>,
    #[serde(default)]
    pub tools: ToolsPatch,
}

/// Configuration's changes to a preset's tool capabilities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsPatch {
    pub max_tools: Option<usize>,
    pub name_max_len: Option<usize>,
    pub name_punctuation: Option<String>,
    pub strict: Option<bool>,
    pub choice_none: Option<bool>,
    pub choice_required: Option<bool>,
    pub choice_named: Option<bool>,
    pub choice_allowed_tools: Option<bool>,
    /// `glm_tool`, `qwen_flag`, or `none`.
    pub web_search: Option<NativeChoice<NativeWebSearch>>,
    pub file_search: Option<NativeChoice<NativeFileSearch>>,
    pub mcp: Option<NativeChoice<NativeMcp>>,
    /// `ignore` or `reject`.
    pub unsupported: Option<UnsupportedPolicy>,
}

/// A native tool form, or `none` to turn it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NativeChoice<T> {
    Native(T),
    Off(Off),
}

/// The word `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Off {
    None,
}

impl<T: Copy> NativeChoice<T> {
    fn get(self) -> Option<T> {
        match self {
            Self::Native(t) => Some(t),
            Self::Off(_) => None,
        }
    }
}

impl ToolsPatch {
    fn apply(&self, caps: &mut ToolCapabilities) {
        if let Some(v) = self.max_tools {
            caps.max_tools = Some(v);
        }
        macro_rules! apply {
            ($($field:ident),*) => {$(
                if let Some(v) = &self.$field { caps.$field = v.clone(); }
            )*};
        }
        apply!(
            name_max_len,
            name_punctuation,
            strict,
            choice_none,
            choice_required,
            choice_named,
            choice_allowed_tools,
            unsupported
        );
        if let Some(v) = self.web_search {
            caps.web_search = v.get();
        }
        if let Some(v) = self.file_search {
            caps.file_search = v.get();
        }
        if let Some(v) = self.mcp {
            caps.mcp = v.get();
        }
    }
}

/// Tool capabilities of a provider whose `tool_choice` is `auto` only.
fn only_auto() -> ToolCapabilities {
    ToolCapabilities {
        strict: false,
        choice_none: false,
        choice_required: false,
        choice_named: false,
        ..ToolCapabilities::default()
    }
}
