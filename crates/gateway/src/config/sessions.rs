//! The resolved `[sessions]` section (the session event side channel) and the URL redaction its
//! `Debug` uses.
//!
//! Not here: the side channel itself (`crate::platform::sessions`).

use super::Env;
use super::file::SessionsFile;
use crate::error::ConfigError;

/// The resolved `[sessions]` section.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionsConfig {
    pub redis_url: Option<String>,
    pub max_sessions: usize,
    pub buffer: usize,
    pub max_subscribers: usize,
    pub channel_prefix: String,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            redis_url: None,
            max_sessions: 1024,
            buffer: 256,
            max_subscribers: 1024,
            channel_prefix: DEFAULT_CHANNEL_PREFIX.to_owned(),
        }
    }
}

/// The Redis channel of session `id` is this prefix followed by the id.
pub const DEFAULT_CHANNEL_PREFIX: &str = "toolbridge:session:";

impl std::fmt::Debug for SessionsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionsConfig")
            .field("redis", &self.redis_url.as_deref().map(redact_url))
            .field("max_sessions", &self.max_sessions)
            .field("buffer", &self.buffer)
            .field("max_subscribers", &self.max_subscribers)
            .field("channel_prefix", &self.channel_prefix)
            .finish()
    }
}

/// A URL without its credentials: what follows the last `@`, or the whole URL.
pub fn redact_url(url: &str) -> String {
    match url.rsplit_once('@') {
        Some((before, host)) => {
            let scheme = before.split_once("://").map_or("", |(s, _)| s);
            format!("{scheme}://…@{host}")
        }
        None => url.to_owned(),
    }
}

impl SessionsConfig {
    pub(super) fn from_file(file: SessionsFile, env: Env<'_>) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let redis_url = match env("TOOLBRIDGE_SESSIONS_REDIS_URL").or(file.redis_url) {
            None => None,
            Some(off) if off.is_empty() || off == "none" => None,
            Some(url) => {
                if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                    return Err(ConfigError::invalid(
                        "sessions.redis_url",
                        format!("`{}` is not redis://… or rediss://…", redact_url(&url)),
                    ));
                }
                redis::Client::open(url.as_str())
                    .map_err(|e| ConfigError::invalid("sessions.redis_url", e.to_string()))?;
                Some(url)
            }
        };
        let bounded = |field: &str, value: Option<usize>, default: usize, max: usize| {
            let value = value.unwrap_or(default);
            if value == 0 || value > max {
                Err(ConfigError::invalid(
                    format!("sessions.{field}"),
                    format!("{value} is not between 1 and {max}"),
                ))
            } else {
                Ok(value)
            }
        };
        let channel_prefix = file
            .channel_prefix
            .unwrap_or(defaults.channel_prefix.clone());
        if channel_prefix.len() > 128 || channel_prefix.chars().any(|c| c.is_whitespace()) {
            return Err(ConfigError::invalid(
                "sessions.channel_prefix",
                "at most 128 characters, without spaces",
            ));
        }
        Ok(Self {
            redis_url,
            max_sessions: bounded(
                "max_sessions",
                file.max_sessions,
                defaults.max_sessions,
                1_000_000,
            )?,
            buffer: bounded("buffer", file.buffer, defaults.buffer, 65_536)?,
            max_subscribers: bounded(
                "max_subscribers",
                file.max_subscribers,
                defaults.max_subscribers,
                1_000_000,
            )?,
            channel_prefix,
        })
    }
}
