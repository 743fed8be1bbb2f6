//! The Codex model catalog: `{"models": [ModelInfo…]}`, the schema Codex 0.169–0.171 read from
//! a provider's `model_catalog_url` (with `[features] api_key_model_discovery = true`), one entry
//! per model this gateway routes by name ([`Config::known_models`]).
//!
//! Every entry is derived from what the gateway does on that model's route (`derive`, which runs
//! the real planner and translator on probes): the context window and the compaction limit, the
//! freeform `apply_patch` where a `custom` tool is taken natively or degraded and checked
//! against its grammar, parallel calls, the reasoning efforts that change the upstream request,
//! images, `tool_search`, where a web search runs, and the WebSocket transport (which serves
//! every dialect). A route's `[routes.catalog]` sets what cannot be derived — base
//! instructions, names — or overrides a derived value. Codex fails silently on an entry it
//! cannot parse (it then loses `apply_patch` or images without a word), so every enum value
//! written here is one Codex knows; what toolbridge adds beyond Codex's schema sits in one
//! `toolbridge` object, which Codex ignores.
//!
//! `GET /v1/models` serves this catalog when the query has `client_version` (Codex always sends
//! it), and OpenAI's model list otherwise (`http/models`).
//!
//! Not here: the route (`http/models`), the profiles (the providers crate).

pub(crate) mod derive;

use serde_json::{Value, json};

use crate::config::{Config, KnownModel};

/// Codex's truncation of tool output kept in its context (its own default for API models).
const TRUNCATION_TOKENS: u64 = 10_000;

/// The base instructions of a route that sets none. Codex requires the field (an entry without
/// it makes Codex drop the whole catalog, silently) and replaces its own prompt with it, so the
/// default is a complete prompt for Codex's tools.
const DEFAULT_BASE_INSTRUCTIONS: &str = include_str!("base_instructions.md");

/// The catalog for every model routed by name, in route order (the first is Codex's default).
pub(crate) fn codex_catalog(config: &Config) -> Value {
    let models: Vec<Value> = config
        .known_models()
        .iter()
        .enumerate()
        .filter_map(|(priority, known)| model_info(config, known, priority))
        .collect();
    json!({ "models": models })
}

/// One model's entry; `None` when its route hides it.
fn model_info(config: &Config, known: &KnownModel, priority: usize) -> Option<Value> {
    let route = config.routes.get(known.route)?;
    let provider = config
        .providers
        .get(&route.provider)?
        .for_model(&known.upstream_model);
    let settings = &route.catalog;
    // Codex sends nothing for a slug with a `/` (it reads it as a path): such a model is left
    // out of the catalog (OpenAI's model list still shows it).
    if settings.hidden || known.id.contains('/') {
        return None;
    }
    let profile = provider.profile_for(&known.upstream_model);
    let gateway_search = config
        .gateway_tools
        .as_ref()
        .is_some_and(|t| t.searches_for(&known.id));
    let caps = derive::capabilities(
        &profile,
        provider.dialect,
        provider.repair.enabled,
        gateway_search,
    );
    let levels: Vec<Value> = caps
        .reasoning_levels
        .iter()
        .map(|effort| json!({"effort": effort, "description": effort_description(effort)}))
        .collect();
    let default_level = ["medium", "high", "low"]
        .into_iter()
        .find(|e| caps.reasoning_levels.contains(e))
        .or_else(|| caps.reasoning_levels.last().copied());
    let modalities = settings.input_modalities.clone().unwrap_or_else(|| {
        if caps.images {
            vec!["text".to_owned(), "image".to_owned()]
        } else {
            vec!["text".to_owned()]
        }
    });
    let window = known.context_window;
    let auto_compact = settings
        .auto_compact_token_limit
        .or_else(|| window.map(|w| w / 10 * 9));
    let mut entry = json!({
        "slug": known.id,
        "display_name": settings.display_name.clone().unwrap_or_else(|| known.id.clone()),
        "description": settings.description.clone().unwrap_or_else(|| format!(
            "{} through toolbridge ({} {}, preset {})",
            known.upstream_model, provider.name, provider.dialect.as_str(), profile.name
        )),
        "supported_reasoning_levels": levels,
        "shell_type": "shell_command",
        "visibility": "list",
        "supported_in_api": true,
        "priority": priority,
        "upgrade": null,
        "availability_nux": null,
        "supports_reasoning_summaries": !caps.reasoning_levels.is_empty(),
        "support_verbosity": false,
        "default_verbosity": null,
        "apply_patch_tool_type": if caps.freeform_apply_patch { json!("freeform") } else { Value::Null },
        "web_search_tool_type": "text",
        "truncation_policy": {"mode": "tokens", "limit": TRUNCATION_TOKENS},
        "supports_parallel_tool_calls": caps.parallel_tool_calls,
        "experimental_supported_tools": [],
        "input_modalities": modalities,
        "supports_search_tool": caps.tool_search,
        "base_instructions": settings.base_instructions.as_deref().unwrap_or(DEFAULT_BASE_INSTRUCTIONS),
        "prefer_websockets": settings.prefer_websockets.unwrap_or(true),
        "toolbridge": {
            "provider": provider.name,
            "dialect": provider.dialect.as_str(),
            "preset": profile.name,
            "upstream_model": known.upstream_model,
            "custom_tools": caps.custom_tools,
            "web_search": caps.web_search.as_str(),
        },
    });
    let obj = entry.as_object_mut()?;
    let mut set = |key: &str, value: Value| {
        obj.insert(key.to_owned(), value);
    };
    if let Some(level) = default_level {
        set("default_reasoning_level", json!(level));
    }
    if let Some(window) = window {
        set("context_window", json!(window));
        set("max_context_window", json!(window));
    }
    if let Some(limit) = auto_compact {
        set("auto_compact_token_limit", json!(limit));
    }
    Some(entry)
}

/// The keys Codex 0.169–0.171 require in every entry (no serde default in its `ModelInfo`): one
/// missing makes Codex drop the whole catalog.
#[cfg(test)]
const REQUIRED: &[&str] = &[
    "slug",
    "display_name",
    "description",
    "supported_reasoning_levels",
    "shell_type",
    "visibility",
    "supported_in_api",
    "priority",
    "base_instructions",
    "supports_reasoning_summaries",
    "support_verbosity",
    "default_verbosity",
    "apply_patch_tool_type",
    "truncation_policy",
    "supports_parallel_tool_calls",
    "experimental_supported_tools",
];

/// The picker's words for an effort.
fn effort_description(effort: &str) -> &'static str {
    match effort {
        "none" => "No reasoning: the fastest answers",
        "minimal" => "Very little reasoning",
        "low" => "Fast responses with lighter reasoning",
        "medium" => "Balances speed and reasoning depth",
        "high" => "Greater reasoning depth for complex problems",
        _ => "The most reasoning the provider offers",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        let file = toml::from_str(text).expect("a config");
        Config::from_file(file, &|_| None).expect("a valid config")
    }

    #[test]
    fn every_entry_has_every_key_codex_requires() {
        let config = config(
            r#"
[providers.chat]
base_url = "http://127.0.0.1:9"

[providers.claude]
dialect = "anthropic"
base_url = "http://127.0.0.1:9"

[[routes]]
model = "plain"
provider = "chat"

[[routes]]
model = "claude-*"
provider = "claude"

[[routes]]
model = "told"
provider = "chat"

[routes.catalog]
base_instructions = "Be brief."

[[routes]]
model = "qwen/qwen3-coder"
provider = "chat"
"#,
        );
        let catalog = codex_catalog(&config);
        let models = catalog["models"].as_array().expect("models");
        // `plain`, `told`, and the Anthropic preset's known models under the glob.
        assert!(models.len() > 3, "{catalog:#}");
        for entry in models {
            for key in REQUIRED {
                assert!(entry.get(*key).is_some(), "no `{key}` in {entry:#}");
            }
            assert!(
                !entry["base_instructions"]
                    .as_str()
                    .unwrap_or_default()
                    .is_empty()
            );
        }
        // Codex sends nothing for a slug with a `/`: it is never served.
        assert!(
            !models
                .iter()
                .any(|m| m["slug"].as_str().unwrap_or_default().contains('/')),
            "{catalog:#}"
        );
        let told = models.iter().find(|m| m["slug"] == "told").expect("told");
        assert_eq!(told["base_instructions"], "Be brief.");
        let plain = models.iter().find(|m| m["slug"] == "plain").expect("plain");
        assert!(
            plain["base_instructions"]
                .as_str()
                .unwrap_or_default()
                .contains("*** Begin Patch")
        );
    }
}
