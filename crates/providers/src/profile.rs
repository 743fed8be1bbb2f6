//! Provider profiles: what each provider accepts, as data.
//!
//! A preset is a named [`Profile`] written in TOML: `presets/common.toml` holds every field (what
//! OpenAI's Chat Completions accepts), and one file per preset (`presets/<name>.toml`, embedded
//! at build time) names its dialect and, under `[profile]`, what differs, with the sources of
//! those facts as comments. Configuration picks a preset per provider and patches any field, for
//! the provider as a whole or per model, with a [`ProfilePatch`]: the same type a preset's
//! `[profile]` is, in the profile's own shape. Translators and decoders read only the profile:
//! there is no `if provider == …` anywhere else.
//!
//! Not here: how patches are laid over each other and checked (`patch`), and the embedded
//! files (`presets`).

mod patch;
mod presets;

use serde::{Deserialize, Serialize};
use toolbridge_core::plan::ToolCapabilities;

pub use patch::{ProfileError, ProfilePatch};

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

/// Every `reasoning.effort` a client can send (Codex 0.171's catalog offers all eight), weakest
/// first: the rows of a profile's effort table.
pub const EFFORTS: [&str; 8] = [
    "none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra",
];

/// How one `reasoning.effort` is said to a provider: a row of the profile's effort table, with
/// the provider's documentation as its source in the preset file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffortSay {
    /// The thinking budget in tokens, for the dialects that take one (Anthropic's
    /// `thinking.budget_tokens`, Gemini's `thinkingConfig.thinkingBudget`); 0 turns thinking
    /// off. Chat dialects do not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
    /// Request fields set as written: top-level fields of a Chat request
    /// (`reasoning_effort`, `thinking`, `enable_thinking`), of a Messages request
    /// (`output_config`), of Gemini's `generationConfig`.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub fields: serde_json::Map<String, serde_json::Value>,
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

/// The field an assistant message carries its reasoning back in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// `reasoning_content: "…"` (DeepSeek, Kimi, GLM, Qwen).
    ReasoningContent,
    /// `reasoning_details: [{"type": "reasoning.text", "text": "…"}]` (MiniMax with
    /// `reasoning_split: true`).
    ReasoningDetails,
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

/// How a tool output given as content parts (`input_text`, `input_image`, `input_file`) goes
/// upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutputForm {
    /// The texts joined into one string; images go in a user turn after the results, files are
    /// named in the text (each with a diagnostic).
    Text,
    /// Text parts (Chat `[{type: text}]`); images moved to a user turn as with `text`.
    Parts,
    /// Content parts with images and files inside the result (Anthropic `tool_result` blocks,
    /// Gemini `functionResponse.parts`, a Chat provider taking `image_url` parts in tool
    /// messages).
    PartsWithMedia,
}

/// What happens to request fields the gateway does not translate: the client's unknown
/// top-level fields, and named fields an endpoint rejects or calls otherwise. A translating
/// dialect sends only what it builds, so for it every unknown field is dropped (with a
/// diagnostic); a native Responses upstream gets the client's body, and these rules decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldRules {
    /// Top-level fields the Responses API does not define (`client_metadata`, a future field):
    /// passed to a native Responses upstream, or dropped.
    pub unknown: UnknownFields,
    /// Fields the endpoint rejects: left out, each with a `param_dropped` diagnostic.
    pub drop: Vec<String>,
    /// Fields the endpoint takes under another name (`prompt_cache_key = "user"`: the cache hint
    /// goes where the provider reads one), each with a `param_renamed` diagnostic.
    pub rename: serde_json::Map<String, serde_json::Value>,
}

/// See [`FieldRules::unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownFields {
    Pass,
    Drop,
}

impl FieldRules {
    /// The name `field` is sent under, when the profile renames it.
    pub fn renamed(&self, field: &str) -> Option<&str> {
        self.rename.get(field).and_then(serde_json::Value::as_str)
    }

    /// Whether the profile drops `field`.
    pub fn drops(&self, field: &str) -> bool {
        self.drop.iter().any(|f| f == field)
    }
}

/// How a provider caches the prefix of a request, as its own documentation says (each preset
/// names its source). The translators read it to place cache breakpoints and to send a
/// session's affinity key; `toolbridge providers` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachePlan {
    /// The provider caches a request's prefix by itself, with no mark in the request.
    pub automatic: bool,
    /// The granularity of automatic prefix matching, in tokens (0: not documented).
    pub unit_tokens: u32,
    /// The shortest prefix the provider caches, in tokens (0: not documented).
    pub min_tokens: u32,
    /// The most explicit cache breakpoints (`cache_control` marks) one request may carry; 0:
    /// the provider takes none.
    pub max_breakpoints: u8,
    /// The gateway places breakpoints where the client set none (at most `max_breakpoints`
    /// in all, the client's own counted first). Off: only the client's marks are sent.
    pub place_breakpoints: bool,
    /// The lifetimes a breakpoint may ask for (`5m`, `1h`); empty: the provider takes none.
    pub ttls: Vec<String>,
    /// The lifetime the gateway's breakpoints ask for, one of `ttls`; empty: the provider's
    /// default (no `ttl` field is sent).
    pub ttl: String,
    /// Where the provider reads a session's cache-affinity key.
    pub affinity: CacheAffinity,
}

/// Where a provider reads the key that keeps a session's requests on one cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheAffinity {
    /// It reads none.
    None,
    /// `prompt_cache_key` (OpenAI Chat and Responses).
    PromptCacheKey,
    /// `metadata.user_id` (Anthropic).
    MetadataUserId,
}

impl CachePlan {
    /// The `cache_control` object a gateway-placed breakpoint carries.
    pub fn mark(&self) -> serde_json::Value {
        let mut mark = serde_json::json!({"type": "ephemeral"});
        if !self.ttl.is_empty() {
            mark["ttl"] = serde_json::Value::String(self.ttl.clone());
        }
        mark
    }

    /// Whether the gateway places breakpoints for this provider.
    pub fn places(&self) -> bool {
        self.place_breakpoints && self.max_breakpoints > 0
    }
}

/// What one provider accepts. Every field but `name` is written in `presets/common.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The preset this profile came from (the preset file's name; never patched).
    #[serde(default)]
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
    /// The models take images in user turns and tool outputs (what the Codex catalog's
    /// `input_modalities` says); without, each image is sent as a placeholder text.
    pub image_input: bool,
    /// The largest request body the provider accepts, in bytes (0: no known limit): a body
    /// over it gets its inline images downscaled, then its oldest images left out.
    pub max_request_bytes: u64,
    /// How each `reasoning.effort` is said to this provider, by effort ([`EFFORTS`]); an
    /// effort missing from the table is not sent (a diagnostic at `reasoning.effort` says so).
    pub efforts: std::collections::BTreeMap<String, EffortSay>,
    /// Which earlier assistant turns carry their reasoning back (in `reasoning_field`).
    pub reasoning_replay: ReasoningReplay,
    /// Which field replayed reasoning goes in (reasoning is read from either).
    pub reasoning_field: ReasoningField,
    /// Reasoning arrives in the content inside a leading `<think>…</think>` block.
    pub think_tags: bool,
    /// Streamed requests with tools carry `tool_stream: true`, without which the provider sends
    /// each call whole in one chunk (GLM-5.x/4.7/4.6; patch it off per model for older ones).
    pub tool_stream: bool,
    /// Fields added to every request body (`clear_thinking`, `reasoning_split`, …).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Provider-specific finish reasons (the OpenAI ones are always known), in the order
    /// written; a patch adds to them.
    #[serde(with = "patch::pairs")]
    pub finish_reasons: Vec<(String, FinishKind)>,
    /// Context windows of models this provider is known to serve, for `GET /v1/models`.
    #[serde(with = "patch::pairs")]
    pub context_windows: Vec<(String, u64)>,
    /// How tool outputs given as content parts go upstream.
    pub tool_output: ToolOutputForm,
    /// What happens to fields the gateway does not translate (unknown, rejected, renamed).
    pub fields: FieldRules,
    /// What the provider accepts of tools.
    pub tools: ToolCapabilities,
    /// How the provider caches a request's prefix.
    pub cache: CachePlan,
    /// The provider is known to end answers with neither a finish reason nor its dialect's end
    /// marker: such an answer completes (with an `upstream_unterminated` diagnostic) instead of
    /// ending `incomplete` as `upstream_truncated`. Off in every preset.
    #[serde(default)]
    pub tolerate_unterminated: bool,
}

impl Profile {
    /// A preset by name; `None` for an unknown name.
    pub fn preset(name: &str) -> Option<Self> {
        Self::resolve(name, &[]).ok()
    }

    /// The names of every preset, in the order `toolbridge providers` shows them: the preset
    /// files embedded in this crate.
    pub fn preset_names() -> &'static [&'static str] {
        presets::NAMES
    }

    /// The dialect a preset is written for (`chat`, `anthropic`, `gemini`, `responses`), as its
    /// file says; `None` for an unknown name.
    pub fn preset_dialect(name: &str) -> Option<String> {
        presets::file(name).ok().map(|f| f.dialect)
    }

    /// The profile of preset `name` with `patches` laid over it in order (a provider's, then a
    /// model's): the common part, then the preset's file, then each patch, checked as a whole.
    pub fn resolve(name: &str, patches: &[&ProfilePatch]) -> Result<Self, ProfileError> {
        let preset = presets::file(name)?;
        let mut layers = vec![&preset.profile];
        layers.extend_from_slice(patches);
        let mut profile = patch::resolve(presets::common()?, &layers)?;
        let cache = &profile.cache;
        if !cache.ttl.is_empty() && !cache.ttls.contains(&cache.ttl) {
            return Err(ProfileError::Invalid(format!(
                "`cache.ttl`: `{}` is not one of the provider's cache lifetimes ({})",
                cache.ttl,
                if cache.ttls.is_empty() {
                    "none".to_owned()
                } else {
                    cache.ttls.join(", ")
                }
            )));
        }
        profile.name = name.to_owned();
        Ok(profile)
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

    /// How `effort` is said to this provider, when it can be.
    pub fn effort(&self, effort: &str) -> Option<&EffortSay> {
        self.efforts.get(effort)
    }

    /// The context window of `model`, when known.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.context_windows
            .iter()
            .find(|(m, _)| m == model)
            .map(|(_, w)| *w)
    }
}
