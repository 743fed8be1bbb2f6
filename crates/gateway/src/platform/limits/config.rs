//! `[limits]`: the section as written ([`LimitsFile`]) and resolved ([`LimitsConfig`]).

use std::collections::BTreeMap;
use std::num::NonZeroU32;

use serde::Deserialize;

/// `[limits]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Share the counts through Redis (`redis://127.0.0.1:6379`); `TOOLBRIDGE_REDIS_URL`
    /// overrides it.
    pub redis_url: Option<String>,
    /// The prefix of every Redis key. Default `toolbridge`.
    pub redis_prefix: Option<String>,
    /// Requests per minute per gateway key.
    pub key_requests_per_minute: Option<u32>,
    /// Tokens (input plus output) per minute per gateway key.
    pub key_tokens_per_minute: Option<u64>,
    /// Limits per upstream provider, by provider name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderLimitsFile>,
}

/// One provider's limits as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderLimitsFile {
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u64>,
}

/// Validated limits.
#[derive(Debug, Clone, Default)]
pub struct LimitsConfig {
    pub redis_url: Option<String>,
    pub redis_prefix: String,
    pub key_requests_per_minute: Option<NonZeroU32>,
    pub key_tokens_per_minute: Option<u64>,
    pub providers: BTreeMap<String, ProviderLimits>,
}

/// One provider's validated limits.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProviderLimits {
    pub requests_per_minute: Option<NonZeroU32>,
    pub tokens_per_minute: Option<u64>,
}

impl LimitsConfig {
    /// Validates `[limits]`; `providers` are the declared provider names. Errors name the field.
    pub fn from_file(
        file: LimitsFile,
        redis_env: Option<String>,
        providers: &[&str],
    ) -> Result<Self, (String, String)> {
        let rpm = |field: String, v: Option<u32>| match v {
            None => Ok(None),
            Some(n) => NonZeroU32::new(n).map(Some).ok_or((
                field,
                "must be at least 1 (leave it out for no limit)".to_owned(),
            )),
        };
        let redis_url = redis_env.or(file.redis_url).filter(|u| !u.is_empty());
        if let Some(url) = &redis_url {
            redis::Client::open(url.as_str()).map_err(|e| {
                (
                    "limits.redis_url".to_owned(),
                    format!("not a usable Redis URL: {e}"),
                )
            })?;
        }
        let mut out = BTreeMap::new();
        for (name, p) in file.providers {
            if !providers.contains(&name.as_str()) {
                return Err((
                    format!("limits.providers.{name}"),
                    format!("`{name}` is not a declared provider"),
                ));
            }
            out.insert(
                name.clone(),
                ProviderLimits {
                    requests_per_minute: rpm(
                        format!("limits.providers.{name}.requests_per_minute"),
                        p.requests_per_minute,
                    )?,
                    tokens_per_minute: p.tokens_per_minute,
                },
            );
        }
        Ok(Self {
            redis_url,
            redis_prefix: file.redis_prefix.unwrap_or_else(|| "toolbridge".to_owned()),
            key_requests_per_minute: rpm(
                "limits.key_requests_per_minute".to_owned(),
                file.key_requests_per_minute,
            )?,
            key_tokens_per_minute: file.key_tokens_per_minute,
            providers: out,
        })
    }

    /// True when any limit is set.
    pub fn any(&self) -> bool {
        self.key_requests_per_minute.is_some()
            || self.key_tokens_per_minute.is_some()
            || self
                .providers
                .values()
                .any(|p| p.requests_per_minute.is_some() || p.tokens_per_minute.is_some())
    }
}
