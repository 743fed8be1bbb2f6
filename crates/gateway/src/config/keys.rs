//! Gateway keys declared in the config: plain `api_keys` (hashed at load, every scope open) and
//! `[[keys]]` entries known by their hash, each with its scopes.
//!
//! Not here: keys in the store or the lookup of a presented key (`crate::platform::auth`).

use crate::error::ConfigError;
use crate::platform::auth::keys::{Scope, Scopes, hash_secret, parse_hash};
use crate::platform::auth::{ConfiguredKey, cli::MAX_NAME_LEN};

use super::file::KeyFile;

/// The config's gateway keys: plain `api_keys` (hashed here, every scope open) and `[[keys]]`.
pub(super) fn gateway_keys(
    plain: &[String],
    declared: Vec<KeyFile>,
) -> Result<Vec<ConfiguredKey>, ConfigError> {
    let mut out: Vec<ConfiguredKey> = plain
        .iter()
        .enumerate()
        .map(|(i, secret)| ConfiguredKey {
            id: format!("api_keys[{i}]"),
            name: format!("api_keys[{i}]"),
            hash: hash_secret(secret),
            scopes: std::sync::Arc::new(Scope::unrestricted()),
        })
        .collect();
    for (i, k) in declared.into_iter().enumerate() {
        let at = |field: &str| format!("keys[{i}].{field}");
        if k.name.is_empty() || k.name.len() > MAX_NAME_LEN {
            return Err(ConfigError::invalid(
                at("name"),
                format!("must be 1 to {MAX_NAME_LEN} characters"),
            ));
        }
        let hash = parse_hash(&k.hash).map_err(|e| ConfigError::invalid(at("hash"), e))?;
        let scopes = Scope::compile(&Scopes {
            models: k.models,
            tools: k.tools,
            daily_tokens: k.daily_tokens,
            monthly_tokens: k.monthly_tokens,
            tenant: k.tenant,
            admin: k.admin,
        })
        .map_err(|e| ConfigError::invalid(format!("keys[{i}]"), e))?;
        let id = k.id.unwrap_or_else(|| k.name.clone());
        if out.iter().any(|o| o.id == id) {
            return Err(ConfigError::invalid(
                at("id"),
                format!("`{id}` is used by two keys"),
            ));
        }
        if out.iter().any(|o| o.hash == hash) {
            return Err(ConfigError::invalid(
                at("hash"),
                "the same secret is declared twice",
            ));
        }
        out.push(ConfiguredKey {
            id,
            name: k.name,
            hash,
            scopes: std::sync::Arc::new(scopes),
        });
    }
    Ok(out)
}
