//! Provider resolution: a `[providers.NAME]` table becomes a [`Provider`] with its dialect, API
//! key (read from the environment here), profile and per-model profiles (resolved here, so a
//! patch cannot fail at request time), timeouts and repair policy.
//!
//! Not here: sending to the provider (`crate::upstream`) or the profiles' contents (the
//! providers crate).

use std::collections::BTreeMap;
use std::time::Duration;

use toolbridge_providers::profile::{Profile, ProfileError, ProfilePatch};

use super::file::{ModelFile, ProviderFile};
use super::model_dialects::{ModelDialect, dialect_and_preset};
use super::{Dialect, Env};
use crate::error::ConfigError;

/// What happens to a tool call still invalid after repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidCalls {
    /// One hidden re-ask with the validation error as the call's result.
    Reask,
    /// Handed on as best effort, with an `arguments_invalid` diagnostic.
    Pass,
    /// The response fails with `invalid_tool_call`.
    Fail,
}

impl InvalidCalls {
    fn parse(name: &str) -> Option<Self> {
        match name {
            "reask" => Some(Self::Reask),
            "pass" => Some(Self::Pass),
            "fail" => Some(Self::Fail),
            _ => None,
        }
    }
}

/// How a provider's tool calls are repaired and what happens to invalid ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairPolicy {
    /// Calls are checked and repaired; their arguments are held until complete.
    pub enabled: bool,
    pub invalid_calls: InvalidCalls,
    /// After the one re-ask: `Pass` or `Fail`.
    pub after_reask: InvalidCalls,
}

impl Default for RepairPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            invalid_calls: InvalidCalls::Reask,
            after_reask: InvalidCalls::Pass,
        }
    }
}

/// A resolved provider. Its `Debug` output hides the API key.
#[derive(Clone)]
pub struct Provider {
    pub name: String,
    pub dialect: Dialect,
    pub base_url: String,
    /// The upstream API key, read from the environment at load time. Never logged.
    pub api_key: Option<String>,
    /// Every key of the provider (`api_key` first, then `api_key_envs`'): a session keeps one
    /// ([`Self::key_for`]). Never logged.
    pub api_keys: Vec<String>,
    pub profile: Profile,
    /// The profile of each model with its own patch (`models.<name>.profile`), resolved at load.
    pub model_profiles: BTreeMap<String, Profile>,
    pub models: BTreeMap<String, ModelFile>,
    /// Upstream models served in another dialect (`dialect_for`), in the order written: each
    /// holds this provider as it serves those models.
    pub dialect_for: Vec<ModelDialect>,
    pub request_timeout: Duration,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub stream_timeout: Duration,
    pub max_retries: u32,
    pub retry_budget: Duration,
    pub repair: RepairPolicy,
}

impl Provider {
    /// The key a session with `affinity` sends: with several keys, the one its affinity ranks
    /// highest (rendezvous hashing: the same in every process, and a key added or removed moves
    /// only the sessions it must).
    pub(crate) fn key_for(&self, affinity: crate::upstream::Affinity) -> Option<&str> {
        if self.api_keys.len() <= 1 {
            return self.api_key.as_deref();
        }
        self.api_keys
            .iter()
            .enumerate()
            .max_by_key(|(i, _)| affinity.rank(*i))
            .map(|(_, key)| key.as_str())
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("dialect", &self.dialect)
            .field("base_url", &self.base_url)
            .field(
                "api_key",
                &match self.api_keys.len() {
                    0 => "none".to_owned(),
                    1 => "[redacted]".to_owned(),
                    n => format!("[{n} redacted]"),
                },
            )
            .field("profile", &self.profile.name)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("stream_timeout", &self.stream_timeout)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// This provider as it serves `upstream_model`: itself, or the first `dialect_for` entry
    /// whose models match (same name, key, client and limits; its own dialect and profiles).
    pub fn for_model(&self, upstream_model: &str) -> &Provider {
        self.dialect_for
            .iter()
            .find(|d| d.matches(upstream_model))
            .map_or(self, |d| &d.provider)
    }

    /// The profile for one upstream model: the provider's, patched for that model.
    pub fn profile_for(&self, upstream_model: &str) -> Profile {
        self.model_profiles
            .get(upstream_model)
            .unwrap_or(&self.profile)
            .clone()
    }

    /// The context window of an upstream model, from config or the preset.
    pub fn context_window(&self, upstream_model: &str) -> Option<u64> {
        self.models
            .get(upstream_model)
            .and_then(|m| m.context_window)
            .or_else(|| self.profile.context_window(upstream_model))
    }
}

/// Every declared provider, resolved; at least one is required.
pub(super) fn resolve_all(
    written: BTreeMap<String, ProviderFile>,
    env: Env<'_>,
) -> Result<BTreeMap<String, Provider>, ConfigError> {
    let mut providers = BTreeMap::new();
    for (name, p) in written {
        providers.insert(name.clone(), provider(&name, p, env)?);
    }
    if providers.is_empty() {
        return Err(ConfigError::invalid(
            "providers",
            "at least one provider is required",
        ));
    }
    Ok(providers)
}

/// One provider, resolved.
fn provider(name: &str, p: ProviderFile, env: Env<'_>) -> Result<Provider, ConfigError> {
    let at = |field: &str| format!("providers.{name}.{field}");
    let (dialect, preset_name) = dialect_and_preset(p.dialect.as_ref(), p.preset.as_ref(), &at)?;
    let url = p.base_url.trim_end_matches('/').to_owned();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ConfigError::invalid(
            at("base_url"),
            format!("`{url}` must start with http:// or https://"),
        ));
    }
    // The provider's profile, and each configured model's (resolved here, so that a patch
    // cannot fail at request time).
    let resolve = |patches: &[&ProfilePatch], field: String| {
        resolve_profile(&preset_name, dialect, patches, field, at("preset"))
    };
    let profile = resolve(&[&p.profile], at("profile"))?;
    let mut model_profiles = BTreeMap::new();
    for (model, m) in &p.models {
        let field = at(&format!("models.{model}.profile"));
        model_profiles.insert(model.clone(), resolve(&[&p.profile, &m.profile], field)?);
    }
    let api_keys: Vec<String> = p
        .api_key_env
        .iter()
        .chain(&p.api_key_envs)
        .filter_map(|var| env(var).filter(|k| !k.is_empty()))
        .collect();
    let api_key = api_keys.first().cloned();
    let secs = |v: Option<u64>, default: u64| Duration::from_secs(v.unwrap_or(default));
    let policy = |field: &str, value: Option<&String>, default: InvalidCalls, allowed: &[&str]| {
        match value {
            None => Ok(default),
            Some(v) => InvalidCalls::parse(v)
                .filter(|_| allowed.contains(&v.as_str()))
                .ok_or_else(|| {
                    ConfigError::invalid(
                        at(field),
                        format!("`{v}` is not one of: {}", allowed.join(", ")),
                    )
                }),
        }
    };
    let repair = RepairPolicy {
        enabled: p.repair.unwrap_or(true),
        invalid_calls: policy(
            "invalid_calls",
            p.invalid_calls.as_ref(),
            InvalidCalls::Reask,
            &["reask", "pass", "fail"],
        )?,
        after_reask: policy(
            "invalid_calls_after_reask",
            p.invalid_calls_after_reask.as_ref(),
            InvalidCalls::Pass,
            &["pass", "fail"],
        )?,
    };
    let mut provider = Provider {
        name: name.to_owned(),
        dialect,
        base_url: url,
        api_key,
        api_keys,
        profile,
        model_profiles,
        models: p.models,
        dialect_for: Vec::new(),
        request_timeout: secs(p.request_timeout_secs, 600),
        idle_timeout: secs(p.idle_timeout_secs, 300),
        connect_timeout: secs(p.connect_timeout_secs, 10),
        stream_timeout: secs(p.stream_timeout_secs, 3600),
        max_retries: p.max_retries.unwrap_or(2),
        retry_budget: secs(p.retry_budget_secs, 15),
        repair,
    };
    provider.dialect_for = p
        .dialect_for
        .iter()
        .enumerate()
        .map(|(i, written)| ModelDialect::resolve(&provider, i, written))
        .collect::<Result<_, _>>()?;
    Ok(provider)
}

/// A dialect as written at `field`.
pub(super) fn parse_dialect(name: &str, field: String) -> Result<Dialect, ConfigError> {
    Dialect::parse(name).ok_or_else(|| {
        ConfigError::invalid(
            field,
            format!(
                "`{name}` is not a supported dialect (supported: {})",
                Dialect::NAMES.join(", ")
            ),
        )
    })
}

/// A profile from `preset` and `patches` (a bad patch is an error at `field`, an unknown preset
/// at `preset_field`). Only a Responses upstream takes every tool as declared, and it takes
/// nothing else: that follows the dialect (the body sent is the client's own), whatever preset
/// was named.
pub(super) fn resolve_profile(
    preset: &str,
    dialect: Dialect,
    patches: &[&ProfilePatch],
    field: String,
    preset_field: String,
) -> Result<Profile, ConfigError> {
    let mut profile = Profile::resolve(preset, patches).map_err(|e| match e {
        ProfileError::UnknownPreset(_) => ConfigError::invalid(
            preset_field,
            format!(
                "`{preset}` is not a preset (presets: {})",
                Profile::preset_names().join(", ")
            ),
        ),
        ProfileError::Invalid(message) => ConfigError::invalid(field, message),
    })?;
    profile.tools.responses_native = dialect.sends_client_request();
    Ok(profile)
}
