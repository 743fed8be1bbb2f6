//! The conformance matrix's targets: each preset with the dialect its file names, and what the
//! test knows of each dialect's wire (where tools, `tool_choice`, effort and the stream flag
//! go). A new dialect is one more [`Dialect`] variant: the compiler lists every `match` that
//! must learn it.

use std::sync::LazyLock;

use serde_json::{Value, json};
use toolbridge_core::plan::ToolPlan;
use toolbridge_providers::profile::Profile;
use toolbridge_testkit::dialects::RESPONSES_FIELDS;
use toolbridge_testkit::dialects::Wire;

/// The dialect a provider speaks, as the gateway config names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Chat,
    Anthropic,
    Gemini,
    /// A native OpenAI Responses upstream: the request passes through, events are relayed.
    Responses,
}

pub struct Target {
    pub preset: &'static str,
    pub dialect: Dialect,
}

/// Every preset, with the dialect its file names: the matrix's columns come from the preset
/// files, so a new preset is a new column.
pub fn targets() -> &'static [Target] {
    static TARGETS: LazyLock<Vec<Target>> = LazyLock::new(|| {
        Profile::preset_names()
            .iter()
            .map(|&preset| {
                let dialect = Profile::preset_dialect(preset)
                    .and_then(|d| Dialect::from_config_name(&d))
                    .unwrap_or_else(|| panic!("preset {preset} names no known dialect"));
                Target { preset, dialect }
            })
            .collect()
    });
    &TARGETS
}

/// Retries before the answer starts, for every target: the 500 scenario expects `1 + this`
/// upstream attempts.
pub const MAX_RETRIES: usize = 1;

impl Dialect {
    const ALL: [Self; 4] = [Self::Chat, Self::Anthropic, Self::Gemini, Self::Responses];

    fn from_config_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.config_name() == name)
    }

    pub fn config_name(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Responses => "responses",
        }
    }

    pub fn wire(self, profile: &Profile) -> Wire {
        match self {
            Self::Chat => Wire::Chat {
                think_tags: profile.think_tags,
            },
            Self::Anthropic => Wire::Anthropic,
            Self::Gemini => Wire::Gemini,
            Self::Responses => Wire::Responses,
        }
    }

    /// The upstream path and query a request for `model` goes to.
    pub fn target_url(self, model: &str, streamed: bool) -> String {
        match self {
            Self::Chat => "/v1/chat/completions".to_owned(),
            Self::Anthropic => "/v1/messages".to_owned(),
            Self::Gemini if streamed => format!("/v1/models/{model}:streamGenerateContent?alt=sse"),
            Self::Gemini => format!("/v1/models/{model}:generateContent"),
            Self::Responses => "/v1/responses".to_owned(),
        }
    }

    /// Whether the upstream says the stream flag in the body (Gemini says it in the URL).
    pub fn stream_in_body(self) -> bool {
        match self {
            Self::Chat | Self::Anthropic | Self::Responses => true,
            Self::Gemini => false,
        }
    }

    /// Whether the request passes through (tools and `tool_choice` as the client declared them,
    /// calls and every other item back as the upstream sent them).
    pub fn passthrough(self) -> bool {
        self == Self::Responses
    }

    /// Whether the answer is relayed (a native Responses upstream), not decoded: items and
    /// reasoning come back in the upstream's own shapes.
    pub fn relays(self) -> bool {
        self == Self::Responses
    }

    /// Whether the provider's calls carry ids the client gets back as `call_id`.
    pub fn call_ids(self) -> bool {
        match self {
            Self::Chat | Self::Anthropic | Self::Responses => true,
            Self::Gemini => false,
        }
    }

    /// Whether the dialect reports reasoning tokens (Anthropic counts none apart).
    pub fn reports_reasoning_tokens(self) -> bool {
        match self {
            Self::Chat | Self::Gemini | Self::Responses => true,
            Self::Anthropic => false,
        }
    }

    /// The function names declared upstream (a passthrough's tool names), in order; empty when
    /// no tools were sent.
    pub fn tool_names(self, body: &Value) -> Vec<String> {
        let list = match self {
            Self::Chat => body["tools"].as_array().map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
                    .collect()
            }),
            Self::Anthropic => body["tools"].as_array().map(|t| {
                t.iter()
                    .map(|t| t["name"].as_str().unwrap_or("").to_owned())
                    .collect()
            }),
            Self::Gemini => body["tools"].as_array().map(|t| {
                t.iter()
                    .flat_map(|t| {
                        t["functionDeclarations"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    })
                    .map(|f| f["name"].as_str().unwrap_or("").to_owned())
                    .collect()
            }),
            // Every tool as declared, by its top-level name (a namespace's own).
            Self::Responses => body["tools"].as_array().map(|t| {
                t.iter()
                    .map(|t| t["name"].as_str().unwrap_or("").to_owned())
                    .collect()
            }),
        };
        list.unwrap_or_default()
    }

    /// The JSON Schema of the upstream function `name`.
    pub fn tool_parameters(self, body: &Value, name: &str) -> Value {
        let tools = body["tools"].as_array().cloned().unwrap_or_default();
        let found = match self {
            Self::Chat => tools
                .iter()
                .find(|t| t["function"]["name"] == name)
                .map(|t| t["function"]["parameters"].clone()),
            Self::Anthropic => tools
                .iter()
                .find(|t| t["name"] == name)
                .map(|t| t["input_schema"].clone()),
            Self::Gemini => tools
                .iter()
                .flat_map(|t| {
                    t["functionDeclarations"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .find(|f| f["name"] == name)
                .map(|f| f["parameters"].clone()),
            Self::Responses => tools
                .iter()
                .find(|t| t["name"] == name)
                .map(|t| t["parameters"].clone()),
        };
        found.unwrap_or_else(|| panic!("no upstream tool {name} in {body:#}"))
    }

    /// The tool choice as sent upstream, `None` when absent.
    pub fn sent_choice(self, body: &Value) -> Option<Value> {
        let v = match self {
            Self::Chat => body["tool_choice"].clone(),
            Self::Anthropic => {
                let mut c = body["tool_choice"].clone();
                // `disable_parallel_tool_use` is not part of the choice itself.
                if let Some(o) = c.as_object_mut() {
                    o.remove("disable_parallel_tool_use");
                }
                c
            }
            Self::Gemini => body["toolConfig"]["functionCallingConfig"].clone(),
            Self::Responses => body["tool_choice"].clone(),
        };
        (!v.is_null()).then_some(v)
    }

    /// The planner's Chat-shaped `tool_choice` in this dialect's shape: the oracle the sent
    /// request is compared with.
    pub fn expected_choice(self, plan: &ToolPlan) -> Option<Value> {
        if !plan.send_tools || plan.upstream.is_empty() {
            return None;
        }
        let choice = plan.tool_choice.as_ref()?;
        let forced = choice["function"]["name"].as_str();
        Some(match self {
            // The passthrough plan keeps the client's `tool_choice` as it came.
            Self::Chat | Self::Responses => choice.clone(),
            Self::Anthropic => match (choice.as_str(), forced) {
                (Some("required"), _) => json!({"type": "any"}),
                (Some("none"), _) => json!({"type": "none"}),
                (_, Some(name)) => json!({"type": "tool", "name": name}),
                _ => json!({"type": "auto"}),
            },
            Self::Gemini => match (choice.as_str(), forced) {
                (Some("required"), _) => json!({"mode": "ANY"}),
                (Some("none"), _) => json!({"mode": "NONE"}),
                (_, Some(name)) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
                _ => json!({"mode": "AUTO"}),
            },
        })
    }

    /// Checks that `reasoning.effort: "medium"` went upstream as the profile says it.
    pub fn check_effort(self, profile: &Profile, body: &Value) {
        match self {
            Self::Chat => match profile.effort("medium") {
                None => {
                    for f in ["reasoning_effort", "thinking", "enable_thinking"] {
                        assert!(body.get(f).is_none(), "effort dropped, yet {f} was sent");
                    }
                }
                Some(say) => {
                    assert!(!say.fields.is_empty(), "a Chat row sets fields");
                    for (field, value) in &say.fields {
                        assert_eq!(&body[field], value, "effort as {field}");
                    }
                }
            },
            Self::Anthropic => {
                let budget = profile.effort("medium").and_then(|s| s.budget).unwrap();
                assert_eq!(
                    body["thinking"],
                    json!({"type": "enabled", "budget_tokens": budget})
                );
            }
            Self::Gemini => {
                let budget = profile.effort("medium").and_then(|s| s.budget).unwrap();
                assert_eq!(
                    body["generationConfig"]["thinkingConfig"],
                    json!({"thinkingBudget": budget, "includeThoughts": true})
                );
            }
            Self::Responses => {
                assert_eq!(body["reasoning"], json!({"effort": "medium"}), "as sent");
            }
        }
    }

    /// Checks what every request of this dialect carries whatever the scenario.
    pub fn check_common(self, profile: &Profile, body: &Value, streamed: bool) {
        if self.stream_in_body() {
            assert_eq!(body["stream"], streamed, "stream flag");
        } else {
            assert!(body.get("stream").is_none(), "stream flag is in the URL");
        }
        if self == Self::Chat {
            for (k, v) in &profile.extra_body {
                assert_eq!(&body[k], v, "extra_body field {k}");
            }
            let asks_usage = body["stream_options"]["include_usage"] == true;
            assert_eq!(
                asks_usage,
                streamed && profile.stream_usage,
                "include_usage"
            );
        }
        if self == Self::Responses {
            // The gateway keeps the state; the upstream keeps nothing.
            assert_eq!(body["store"], false, "store upstream");
            for (k, v) in &profile.extra_body {
                assert_eq!(&body[k], v, "extra_body field {k}");
            }
        }
    }
}

/// What a native Responses endpoint refuses with a 400 for the whole request, as its
/// documentation (or the observed behaviour in `../shared/reference/codex-0.171.md` §H) says:
/// tool types it does not take, `namespace` on items, fields it does not define.
struct Refusals {
    /// Tool types it takes (anything else: 400).
    tools: &'static [&'static str],
    /// A `namespace` on an input item is a 400.
    namespace_items: bool,
    /// A top-level field outside the Responses API's own is a 400.
    strict_fields: bool,
}

fn refusals(preset: &str) -> Option<Refusals> {
    Some(match preset {
        "deepseek-responses" => Refusals {
            tools: &["function", "web_search"],
            namespace_items: true,
            strict_fields: true,
        },
        "qwen-responses" => Refusals {
            tools: &[
                "function",
                "web_search",
                "web_extractor",
                "code_interpreter",
                "file_search",
            ],
            namespace_items: true,
            strict_fields: false,
        },
        "mimo-responses" | "minimax-responses" => Refusals {
            tools: &["function"],
            namespace_items: true,
            strict_fields: true,
        },
        // vLLM and Ollama take custom tools in the request but flatten namespaces: a fake that
        // refuses `namespace` outright is the strict reading.
        "vllm-responses" => Refusals {
            tools: &["function", "custom", "local_shell", "shell", "apply_patch"],
            namespace_items: true,
            strict_fields: false,
        },
        "ollama-responses" => Refusals {
            tools: &["function"],
            namespace_items: true,
            strict_fields: false,
        },
        _ => return None,
    })
}

/// The 400 a strict native endpoint answers `body` with, if it refuses it.
pub fn refusal(preset: &str, body: &Value) -> Option<toolbridge_testkit::Reply> {
    let r = refusals(preset)?;
    let refuse = |why: String| {
        Some(toolbridge_testkit::Reply::error(
            400,
            json!({"error": {"message": why, "type": "invalid_request_error", "param": null, "code": "invalid_request"}}),
        ))
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        let kind = tool["type"].as_str().unwrap_or_default();
        if !r.tools.contains(&kind) {
            return refuse(format!("{preset}: tool type `{kind}` is not supported"));
        }
    }
    if r.namespace_items
        && body["input"]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i.get("namespace").is_some()))
    {
        return refuse(format!("{preset}: `namespace` is not supported"));
    }
    // These endpoints take `prompt_cache_key` besides the documented fields.
    if r.strict_fields
        && let Some(k) = body.as_object().and_then(|b| {
            b.keys().find(|k| {
                !(RESPONSES_FIELDS.contains(&k.as_str()) || k.as_str() == "prompt_cache_key")
            })
        })
    {
        return refuse(format!("{preset}: unknown field `{k}`"));
    }
    None
}
