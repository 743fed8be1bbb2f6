//! The `[console]` section: the console served at `/console` (off unless enabled), the bounds of
//! the request journal it reads, and an optional price table per route for the sessions'
//! cost.
//!
//! Not here: the console itself (`crate::http::console`) and its journal
//! (`crate::platform::ops::journal`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Env;
use crate::error::ConfigError;

/// `[console]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleFile {
    /// Serve the console at `/console` (default false, or `TOOLBRIDGE_CONSOLE=true`).
    pub enabled: Option<bool>,
    /// The most requests the journal keeps (default 2,000).
    pub max_requests: Option<usize>,
    /// The most bytes the journal keeps, upstream bodies included (default 32 MiB).
    pub max_bytes: Option<usize>,
    /// Prices per million tokens, by route model (as `[[routes]] model` names it).
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
}

/// The price of a million tokens of each kind, in the operator's currency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    /// Input read from the provider's cache (default: the input price).
    pub cached: Option<f64>,
    /// Input written to the provider's cache (default: the input price).
    pub cache_write: Option<f64>,
    pub output: f64,
}

impl Price {
    /// The cost of a turn: `input` includes the cached and cache-written tokens.
    pub fn cost(&self, input: u64, cached: u64, cache_write: u64, output: u64) -> f64 {
        let plain = input.saturating_sub(cached + cache_write) as f64;
        (plain * self.input
            + cached as f64 * self.cached.unwrap_or(self.input)
            + cache_write as f64 * self.cache_write.unwrap_or(self.input)
            + output as f64 * self.output)
            / 1_000_000.0
    }
}

/// The resolved `[console]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsoleConfig {
    pub enabled: bool,
    pub max_requests: usize,
    pub max_bytes: usize,
    pub prices: BTreeMap<String, Price>,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            max_requests: 2_000,
            max_bytes: 32 * 1024 * 1024,
            prices: BTreeMap::new(),
        }
    }
}

/// The largest journal accepted, in entries and in bytes.
const MAX_REQUESTS: usize = 100_000;
const MAX_BYTES: usize = 1024 * 1024 * 1024;

impl ConsoleConfig {
    pub(super) fn from_file(file: &ConsoleFile, env: Env<'_>) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let max_requests = file.max_requests.unwrap_or(defaults.max_requests);
        if !(1..=MAX_REQUESTS).contains(&max_requests) {
            return Err(ConfigError::invalid(
                "console.max_requests",
                format!("must be between 1 and {MAX_REQUESTS}"),
            ));
        }
        let max_bytes = file.max_bytes.unwrap_or(defaults.max_bytes);
        if !(64 * 1024..=MAX_BYTES).contains(&max_bytes) {
            return Err(ConfigError::invalid(
                "console.max_bytes",
                format!("must be between 65536 and {MAX_BYTES}"),
            ));
        }
        for (model, price) in &file.prices {
            let all = [
                Some(price.input),
                price.cached,
                price.cache_write,
                Some(price.output),
            ];
            if all.iter().flatten().any(|p| !p.is_finite() || *p < 0.0) {
                return Err(ConfigError::invalid(
                    format!("console.prices.{model}"),
                    "prices must be finite and not negative",
                ));
            }
        }
        let enabled = match (file.enabled, env("TOOLBRIDGE_CONSOLE")) {
            (Some(enabled), _) => enabled,
            (None, Some(text)) => match text.trim() {
                "true" | "1" => true,
                "false" | "0" | "" => false,
                other => {
                    return Err(ConfigError::invalid(
                        "TOOLBRIDGE_CONSOLE",
                        format!("`{other}` is neither `true` nor `false`"),
                    ));
                }
            },
            (None, None) => false,
        };
        Ok(Self {
            enabled,
            max_requests,
            max_bytes,
            prices: file.prices.clone(),
        })
    }

    /// The price of `model` (a route model, as the ledger records it).
    pub fn price(&self, model: &str) -> Option<&Price> {
        self.prices.get(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_costs_its_plain_cached_written_and_output_tokens() {
        let price = Price {
            input: 2.0,
            cached: Some(0.5),
            cache_write: Some(2.5),
            output: 8.0,
        };
        let cost = price.cost(1_000_000, 600_000, 100_000, 500_000);
        assert!((cost - (0.6 + 0.3 + 0.25 + 4.0)).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn bad_bounds_and_prices_are_refused_with_their_field() {
        let file = ConsoleFile {
            max_requests: Some(0),
            ..ConsoleFile::default()
        };
        let e = ConsoleConfig::from_file(&file, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("console.max_requests"), "{e}");
        let mut file = ConsoleFile::default();
        file.prices.insert(
            "m".into(),
            Price {
                input: -1.0,
                ..Price::default()
            },
        );
        let e = ConsoleConfig::from_file(&file, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("console.prices.m"), "{e}");
    }
}
