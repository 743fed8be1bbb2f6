//! Gateway keys: who is calling, and what that key may do.
//!
//! Keys come from the config (`[[keys]]` with a `sha256:` hash, or the plain `api_keys` list,
//! hashed at load) or from the store (`toolbridge keys create`). The authentication middleware
//! (in `http`) resolves the presented secret with [`KeyResolver::resolve`] and puts an
//! [`Authenticated`] into the request's extensions (and, for handlers that do not extract it,
//! into a task-local read by [`current`]). The handler then admits the request (model scope,
//! tool scope, budget: [`check_model`], [`check_tools`], the budget in [`budget`]) once the body
//! is parsed, and charges it once usage is known (`http::responses::ingress::admission`).
//!
//! Store keys are cached in process for [`KeyResolver`]'s TTL (`key_cache_secs`, default 30):
//! a revoked key keeps working on a process that resolved it for at most that long, and a
//! freshly created key tried just before it existed is refused for at most that long. Whether
//! the store holds any key is cached the same way; when the store cannot answer, the last known
//! answer stands (so `store: false` traffic on a keyless gateway survives an outage), and a
//! process that never had an answer refuses with 503 `store_unavailable` rather than guess.
//!
//! Secrets are never kept, logged or compared as such: only their SHA-256 is.

pub(crate) mod budget;
pub(crate) mod cli;
pub(crate) mod keys;
pub(crate) mod late_charges;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use toolbridge_store::{KeyStore, Tenant};
use toolbridge_wire::responses::Tool;

use crate::error::GatewayError;
pub(crate) use keys::{Scope, Scopes};

/// The longest secret looked up; anything longer is refused unhashed.
pub(crate) const MAX_SECRET_LEN: usize = 512;
/// The most cached lookups; past it the cache is emptied (it refills on use).
const MAX_CACHED: usize = 10_000;

/// The key a request was made with, in request extensions.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The key's id (config `id`, or `key_…` from the store); never the secret.
    pub key_id: String,
    pub scopes: Arc<Scope>,
    /// The tokens [`admit`] reserved on the key's budget, settled by [`charge`]; `None` for a
    /// key without a budget, and on the copies in extensions and [`current`].
    pub reservation: Option<Arc<budget::Reservation>>,
    /// Whose stored objects the key sees and owns: its `tenant`, else its id; reading every
    /// tenant's with the admin scope.
    pub tenant: Tenant,
}

impl Authenticated {
    /// The key `key_id` with `scopes`, its tenant derived from them.
    pub fn new(key_id: String, scopes: Arc<Scope>) -> Self {
        let tenant = Tenant::named(scopes.tenant.clone().unwrap_or_else(|| key_id.clone()));
        let tenant = if scopes.admin {
            tenant.reading_all()
        } else {
            tenant
        };
        Self {
            key_id,
            scopes,
            reservation: None,
            tenant,
        }
    }
}

/// The tenant of a request made with `auth`: the key's, or the open gateway's without keys.
pub(crate) fn tenant_of(auth: Option<&Authenticated>) -> Tenant {
    auth.map_or_else(Tenant::open, |a| a.tenant.clone())
}

/// The tenant of the request being handled (see [`current`]).
pub(crate) fn current_tenant() -> Tenant {
    tenant_of(current().as_ref())
}

/// A key declared in the config, already hashed.
#[derive(Debug, Clone)]
pub struct ConfiguredKey {
    pub id: String,
    pub name: String,
    /// `sha256:…`.
    pub hash: String,
    pub scopes: Arc<Scope>,
}

tokio::task_local! {
    static CURRENT: Option<Authenticated>;
}

/// Runs `future` (the rest of the request) with `auth` readable through [`current`].
pub(crate) async fn scoped<F: Future>(auth: Option<Authenticated>, future: F) -> F::Output {
    CURRENT.scope(auth, future).await
}

/// The key of the request being handled; `None` when the gateway asks for no key, or outside
/// a request (a spawned task or a response body stream: capture it before).
pub(crate) fn current() -> Option<Authenticated> {
    CURRENT.try_with(Clone::clone).ok().flatten()
}

/// Resolves presented secrets to keys: config keys first, then the store through a cache.
pub(crate) struct KeyResolver {
    configured: Vec<ConfiguredKey>,
    required_by_config: bool,
    store: Option<Arc<dyn KeyStore>>,
    ttl: Duration,
    cache: Mutex<HashMap<String, (Instant, Option<Authenticated>)>>,
    /// Whether the store holds any key, and when that was read. Once true it stays true: keys
    /// are revoked, never deleted, so revoking the last key does not open the gateway.
    store_has_keys: Mutex<Option<(Instant, bool)>>,
}

impl std::fmt::Debug for KeyResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyResolver")
            .field("configured", &self.configured.len())
            .field("required_by_config", &self.required_by_config)
            .field("store", &self.store.is_some())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl KeyResolver {
    pub(crate) fn new(
        configured: Vec<ConfiguredKey>,
        require_keys: bool,
        store: Option<Arc<dyn KeyStore>>,
        ttl: Duration,
    ) -> Self {
        Self {
            required_by_config: require_keys || !configured.is_empty(),
            configured,
            store,
            ttl,
            cache: Mutex::default(),
            store_has_keys: Mutex::default(),
        }
    }

    /// True when requests must present a key: the config declares keys or `require_keys`, or
    /// the store has ever held one.
    pub(crate) async fn required(&self) -> Result<bool, GatewayError> {
        if self.required_by_config {
            return Ok(true);
        }
        let Some(store) = &self.store else {
            return Ok(false);
        };
        if let Ok(known) = self.store_has_keys.lock()
            && let Some((at, has)) = *known
            && (has || at.elapsed() < self.ttl)
        {
            return Ok(has);
        }
        let has = match store.has_keys().await {
            Ok(has) => has,
            Err(e) => {
                // An outage must not stall or fail requests that need no store: the last answer
                // stands (and is asked again on the next request). Never answered yet, it is
                // unknown whether keys exist, and the gateway does not open on a guess.
                let last = self.store_has_keys.lock().ok().and_then(|known| *known);
                return match last {
                    Some((_, has)) => {
                        tracing::warn!(
                            code = e.code(),
                            "the store did not say whether keys exist; keeping the last answer ({has}): {e}"
                        );
                        Ok(has)
                    }
                    None => Err(GatewayError::Store(e.to_string())),
                };
            }
        };
        if let Ok(mut known) = self.store_has_keys.lock() {
            *known = Some((Instant::now(), has));
        }
        Ok(has)
    }

    /// The key behind a presented secret. `Ok(None)` when no key is required; 401 when one is
    /// and the secret is missing, unknown or revoked; 503 when the store cannot answer.
    pub(crate) async fn resolve(
        &self,
        presented: Option<&str>,
    ) -> Result<Option<Authenticated>, GatewayError> {
        if !self.required().await? {
            return Ok(None);
        }
        let secret = presented
            .filter(|s| !s.is_empty() && s.len() <= MAX_SECRET_LEN)
            .ok_or(GatewayError::Unauthorized)?;
        let hash = keys::hash_secret(secret);
        // Every configured key is compared, so the time taken does not say which one matched.
        let mut found = None;
        for key in &self.configured {
            if keys::constant_time_eq(key.hash.as_bytes(), hash.as_bytes()) {
                found = Some(Authenticated::new(key.id.clone(), key.scopes.clone()));
            }
        }
        if let Some(found) = found {
            return Ok(Some(found));
        }
        match self.lookup(&hash).await? {
            Some(auth) => Ok(Some(auth)),
            None => Err(GatewayError::Unauthorized),
        }
    }

    /// A store key by hash, through the cache (misses are cached too, for the same TTL).
    async fn lookup(&self, hash: &str) -> Result<Option<Authenticated>, GatewayError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        if let Ok(cache) = self.cache.lock()
            && let Some((at, entry)) = cache.get(hash)
            && at.elapsed() < self.ttl
        {
            return Ok(entry.clone());
        }
        let record = store
            .key_by_hash(hash)
            .await
            .map_err(|e| GatewayError::Store(e.to_string()))?;
        let entry = match record {
            Some(record) if record.revoked_at.is_none() => {
                let written: Scopes = serde_json::from_value(record.scopes).map_err(|e| {
                    GatewayError::Store(format!("key `{}` has unreadable scopes: {e}", record.id))
                })?;
                let scopes = Scope::compile(&written).map_err(|e| {
                    GatewayError::Store(format!("key `{}` has invalid scopes: {e}", record.id))
                })?;
                Some(Authenticated::new(record.id, Arc::new(scopes)))
            }
            _ => None,
        };
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= MAX_CACHED {
                cache.retain(|_, (at, _)| at.elapsed() < self.ttl);
                if cache.len() >= MAX_CACHED {
                    cache.clear();
                }
            }
            cache.insert(hash.to_owned(), (Instant::now(), entry.clone()));
        }
        Ok(entry)
    }
}

/// 403 `model_not_allowed` when the key may not request `model`.
pub(crate) fn check_model(scopes: &Scope, model: &str) -> Result<(), GatewayError> {
    if scopes.allows_model(model) {
        Ok(())
    } else {
        Err(GatewayError::ModelNotAllowed {
            model: model.to_owned(),
        })
    }
}

/// 403 `tool_not_allowed` (param `tools[i]`, or `tools[i].tools[j]` inside a namespace) for
/// the first declared tool the key may not expose.
pub(crate) fn check_tools(scopes: &Scope, tools: &[Tool]) -> Result<(), GatewayError> {
    check_tool_list(scopes, tools, "tools")
}

fn check_tool_list(scopes: &Scope, tools: &[Tool], at: &str) -> Result<(), GatewayError> {
    for (i, tool) in tools.iter().enumerate() {
        let param = format!("{at}[{i}]");
        let kind = tool.kind();
        let name = tool_name(tool);
        if !scopes.allows_tool(kind, name) {
            return Err(GatewayError::ToolNotAllowed {
                param,
                tool: match name {
                    Some(name) => format!("{kind} `{name}`"),
                    None => kind.to_owned(),
                },
            });
        }
        if let Tool::Namespace(namespace) = tool {
            check_tool_list(scopes, &namespace.tools, &format!("{param}.tools"))?;
        }
    }
    Ok(())
}

/// The name a tool rule's glob is matched against: a function's, custom tool's or namespace's
/// `name`, an MCP tool's `server_label`, or another type's `name` when it has one.
fn tool_name(tool: &Tool) -> Option<&str> {
    match tool {
        Tool::Function(f) => Some(&f.name),
        Tool::Custom(c) => Some(&c.name),
        Tool::Namespace(n) => Some(&n.name),
        Tool::Other(map) => map
            .get("name")
            .or_else(|| map.get("server_label"))
            .and_then(serde_json::Value::as_str),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(json: serde_json::Value) -> Vec<Tool> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_tool_outside_the_scope_is_named_by_its_index() {
        let scope = Scope::compile(&Scopes {
            tools: Some(vec!["function:get_*".into(), "namespace:files".into()]),
            ..Scopes::default()
        })
        .unwrap();
        let ok = tools(serde_json::json!([
            {"type": "function", "name": "get_weather", "parameters": {}},
        ]));
        assert!(check_tools(&scope, &ok).is_ok());
        let bad = tools(serde_json::json!([
            {"type": "function", "name": "get_weather", "parameters": {}},
            {"type": "web_search"},
        ]));
        let error = check_tools(&scope, &bad).unwrap_err();
        assert_eq!(error.code(), "tool_not_allowed");
        assert_eq!(error.status().as_u16(), 403);
        assert_eq!(error.body().error.param.as_deref(), Some("tools[1]"));
        let nested = tools(serde_json::json!([
            {"type": "namespace", "name": "files", "tools": [
                {"type": "function", "name": "get_file", "parameters": {}},
                {"type": "function", "name": "rm_file", "parameters": {}}
            ]},
        ]));
        let error = check_tools(&scope, &nested).unwrap_err();
        assert_eq!(
            error.body().error.param.as_deref(),
            Some("tools[0].tools[1]")
        );
    }

    #[test]
    fn a_model_outside_the_scope_is_a_403_on_model() {
        let scope = Scope::compile(&Scopes {
            models: Some(vec!["cheap-*".into()]),
            ..Scopes::default()
        })
        .unwrap();
        assert!(check_model(&scope, "cheap-1").is_ok());
        let error = check_model(&scope, "gpt-5").unwrap_err();
        assert_eq!(error.code(), "model_not_allowed");
        assert_eq!(error.status().as_u16(), 403);
        assert_eq!(error.body().error.param.as_deref(), Some("model"));
    }
}
