//! Per-model dialects on one account: `[[providers.NAME.dialect_for]]` says which upstream
//! models (a name or a glob) the provider serves in another dialect, with which preset —
//! DeepSeek's `deepseek-v4-*` on `/responses`, its older models on `/chat/completions` —
//! without declaring the provider twice.
//!
//! Each entry is resolved at load into the provider as it serves those models
//! ([`ModelDialect::provider`]: same name, base URL, key, timeouts and repair policy, so the
//! same HTTP client and limits; its own dialect, profile and per-model profiles), and
//! [`Provider::for_model`] picks it when a route's target is resolved, so nothing after routing
//! knows there was a choice.
//!
//! Not here: the provider itself (`providers`) and the routes (`routes`).

use super::Dialect;
use super::file::DialectForFile;
use super::providers::{Provider, parse_dialect, resolve_profile};
use crate::error::ConfigError;

/// One `dialect_for` entry, resolved.
#[derive(Clone)]
pub struct ModelDialect {
    /// The models as written (a name or a glob).
    pub pattern: String,
    matcher: globset::GlobMatcher,
    /// The provider as it serves these models (its own `dialect_for` is empty).
    pub provider: Box<Provider>,
}

impl std::fmt::Debug for ModelDialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDialect")
            .field("pattern", &self.pattern)
            .field("dialect", &self.provider.dialect)
            .field("profile", &self.provider.profile.name)
            .finish()
    }
}

impl ModelDialect {
    /// Whether the upstream model `model` is one of these.
    pub fn matches(&self, model: &str) -> bool {
        self.matcher.is_match(model)
    }

    /// Entry `index` of `base`'s `dialect_for`, as `written`. Errors name the entry's field.
    pub(super) fn resolve(
        base: &Provider,
        index: usize,
        written: &DialectForFile,
    ) -> Result<Self, ConfigError> {
        let at = |field: &str| format!("providers.{}.dialect_for[{index}].{field}", base.name);
        if written.models.trim().is_empty() {
            return Err(ConfigError::invalid(
                at("models"),
                "must name the upstream models (a name or a glob)",
            ));
        }
        let matcher = globset::Glob::new(&written.models)
            .map_err(|e| ConfigError::invalid(at("models"), format!("not a valid glob: {e}")))?
            .compile_matcher();
        if written.dialect.is_none() && written.preset.is_none() {
            return Err(ConfigError::invalid(
                at("dialect"),
                "an entry needs a dialect, a preset, or both",
            ));
        }
        let (dialect, preset) =
            dialect_and_preset(written.dialect.as_ref(), written.preset.as_ref(), &at)?;
        let profile = resolve_profile(
            &preset,
            dialect,
            &[&written.profile],
            at("profile"),
            at("preset"),
        )?;
        let mut model_profiles = std::collections::BTreeMap::new();
        for (model, m) in base.models.iter().filter(|(m, _)| matcher.is_match(m)) {
            let field = format!("providers.{}.models.{model}.profile", base.name);
            let resolved = resolve_profile(
                &preset,
                dialect,
                &[&written.profile, &m.profile],
                field,
                at("preset"),
            )?;
            model_profiles.insert(model.clone(), resolved);
        }
        let mut provider = base.clone();
        provider.dialect = dialect;
        provider.profile = profile;
        provider.model_profiles = model_profiles;
        provider.dialect_for = Vec::new();
        Ok(Self {
            pattern: written.models.clone(),
            matcher,
            provider: Box::new(provider),
        })
    }
}

/// A dialect and preset as written: each given, or one found from the other (a preset is
/// written for one dialect; neither is Chat with its default preset); a preset written for
/// another dialect is refused.
pub(super) fn dialect_and_preset(
    dialect: Option<&String>,
    preset: Option<&String>,
    at: &dyn Fn(&str) -> String,
) -> Result<(Dialect, String), ConfigError> {
    match (dialect, preset) {
        (None, None) => Ok((Dialect::Chat, Dialect::Chat.default_preset().to_owned())),
        (Some(name), None) => {
            let dialect = parse_dialect(name, at("dialect"))?;
            Ok((dialect, dialect.default_preset().to_owned()))
        }
        (dialect, Some(preset)) => {
            let Some(own) = toolbridge_providers::profile::Profile::preset_dialect(preset) else {
                return Err(ConfigError::invalid(
                    at("preset"),
                    format!(
                        "`{preset}` is not a preset (presets: {})",
                        toolbridge_providers::profile::Profile::preset_names().join(", ")
                    ),
                ));
            };
            let own = parse_dialect(&own, at("preset"))?;
            if let Some(name) = dialect {
                let dialect = parse_dialect(name, at("dialect"))?;
                if dialect != own {
                    return Err(ConfigError::invalid(
                        at("dialect"),
                        format!(
                            "`{preset}` is a preset of the {} dialect, not {}",
                            own.as_str(),
                            dialect.as_str()
                        ),
                    ));
                }
            }
            Ok((own, preset.clone()))
        }
    }
}
