//! The profile's own lines of `toolbridge providers`: tool limits, the prompt cache, fields,
//! reasoning replay and the Chat dialect's switches, read from the profile as data.
//!
//! Not here: what the planner or the translator does with a request (the parent, `translation`).

use serde_json::{Value, json};
use toolbridge_providers::dialect::Dialect;
use toolbridge_providers::profile::{CacheAffinity, Profile, ReasoningReplay};

/// The profile's limits on tools: how many, their names, strict schemas.
pub(super) fn limits_line(profile: &Profile) -> String {
    format!(
        "\nlimits: max tools {}, names up to {} chars of [A-Za-z0-9{}], strict {}\n",
        profile
            .tools
            .max_tools
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
        profile.tools.name_max_len,
        profile.tools.name_punctuation,
        yes(profile.tools.strict),
    )
}

/// How the provider caches the prompt's prefix (the profile's cache plan).
pub(super) fn cache_line(profile: &Profile) -> String {
    let c = &profile.cache;
    let from = |min: u32| {
        if min > 0 {
            format!(" from {min} tokens")
        } else {
            String::new()
        }
    };
    let mut parts = Vec::new();
    if c.automatic {
        let unit = if c.unit_tokens > 0 {
            format!(" in {}-token steps", c.unit_tokens)
        } else {
            String::new()
        };
        parts.push(format!("automatic prefix{unit}{}", from(c.min_tokens)));
    }
    if c.max_breakpoints > 0 {
        let who = if c.places() {
            "placed by the gateway"
        } else {
            "the client's only"
        };
        let ttl = match (c.ttl.as_str(), c.ttls.is_empty()) {
            (_, true) => String::new(),
            ("", false) => format!(
                ", the provider's default lifetime ({} offered)",
                c.ttls.join("|")
            ),
            (ttl, false) => format!(", lifetime {ttl} ({} offered)", c.ttls.join("|")),
        };
        parts.push(format!(
            "breakpoints up to {} ({who}){ttl}{}",
            c.max_breakpoints,
            from(c.min_tokens)
        ));
    }
    if parts.is_empty() {
        parts.push("none known".to_owned());
    }
    let affinity = match c.affinity {
        CacheAffinity::None => "none",
        CacheAffinity::PromptCacheKey => "prompt_cache_key",
        CacheAffinity::MetadataUserId => "metadata.user_id",
    };
    format!(
        "prompt cache: {}; affinity key: {affinity}\n",
        parts.join("; ")
    )
}

/// Tool outputs given as parts, and the request fields the gateway does not translate.
pub(super) fn fields_line(profile: &Profile, dialect: Dialect) -> String {
    let f = &profile.fields;
    // A native Responses upstream gets the parts as the client sent them.
    let outputs = if dialect.sends_client_request() {
        "as sent".to_owned()
    } else {
        word(serde_json::to_value(profile.tool_output).unwrap_or_default())
    };
    let renamed: Vec<String> = f
        .rename
        .iter()
        .map(|(from, to)| format!("{from} -> {}", to.as_str().unwrap_or("?")))
        .collect();
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(", ")
        }
    };
    format!(
        "tool outputs as parts: {}; unknown request fields: {}; dropped: {}; renamed: {}\n",
        outputs,
        word(serde_json::to_value(f.unknown).unwrap_or_default()),
        list(&f.drop),
        list(&renamed),
    )
}

/// What a native Responses endpoint gets back of its own plaintext reasoning.
pub(super) fn responses_reasoning_line(profile: &Profile) -> String {
    let turns = match profile.reasoning_replay {
        ReasoningReplay::Never => {
            return "plaintext reasoning: as the client sends it\n".to_owned();
        }
        ReasoningReplay::ToolCallTurns => "turns with calls",
        ReasoningReplay::All => "every turn",
    };
    format!(
        "plaintext reasoning: replayed on {turns}, sealed into encrypted_content for the client and sent back as reasoning_text; another provider's left out\n"
    )
}

/// The Chat profile's own switches, one row each, then its extra body and finish reasons when
/// it has them.
pub(super) fn chat_profile_rows(profile: &Profile) -> String {
    let mut out = String::new();
    for (name, value) in chat_profile_table(profile) {
        out.push_str(&format!("  {name:<22} {value}\n"));
    }
    if !profile.extra_body.is_empty() {
        out.push_str(&format!(
            "  {:<22} {}\n",
            "extra body",
            Value::Object(profile.extra_body.clone())
        ));
    }
    if !profile.finish_reasons.is_empty() {
        let reasons: Vec<String> = profile
            .finish_reasons
            .iter()
            .map(|(r, k)| format!("{r}={}", word(json!(k))))
            .collect();
        out.push_str(&format!(
            "  {:<22} {}\n",
            "finish reasons",
            reasons.join(", ")
        ));
    }
    out
}

/// A serialized profile value as a word: a string as itself, anything else as JSON.
fn word(v: Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// The Chat profile's switches as `(row name, value)`, in the order printed.
fn chat_profile_table(profile: &Profile) -> Vec<(&'static str, String)> {
    vec![
        (
            "developer role",
            if profile.developer_role {
                "kept".to_owned()
            } else {
                "sent as system".to_owned()
            },
        ),
        ("merge system turns", yes(profile.merge_system).to_owned()),
        (
            "max_output_tokens",
            format!("sent as {}", word(json!(profile.max_tokens_field))),
        ),
        (
            "temperature",
            format!(
                "clamped to {}..{}",
                profile.temperature_range[0], profile.temperature_range[1]
            ),
        ),
        ("penalties", yes(profile.penalties).to_owned()),
        ("stop", yes(profile.stop).to_owned()),
        ("logprobs", yes(profile.logprobs).to_owned()),
        (
            "end user",
            match word(json!(profile.end_user_field)).as_str() {
                "none" => "not sent".to_owned(),
                field => format!("sent as {field}"),
            },
        ),
        ("prompt_cache_key", yes(profile.prompt_cache_key).to_owned()),
        ("json_schema output", yes(profile.json_schema).to_owned()),
        ("json_object output", yes(profile.json_object).to_owned()),
        ("stream usage", yes(profile.stream_usage).to_owned()),
        (
            "parallel_tool_calls",
            yes(profile.parallel_tool_calls).to_owned(),
        ),
        ("reasoning replay", word(json!(profile.reasoning_replay))),
        ("reasoning field", word(json!(profile.reasoning_field))),
        ("<think> tags", yes(profile.think_tags).to_owned()),
        ("tool_stream flag", yes(profile.tool_stream).to_owned()),
    ]
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
