//! Routes: a requested model name (or glob) → provider and upstream model, with its fallback
//! chain; and the model list `GET /v1/models` derives from them.
//!
//! A route may also match on what Codex says of a request (`x-codex-turn-metadata`: its
//! `request_kind` and `agent_name`, [`RouteSignals`]), so that compaction or a sub-agent's turns
//! go to another model or provider. Routes are tried in order and the first that matches wins,
//! so such a route goes before the plain one for the same models; a request without the signal
//! never matches a route that asks for it.
//!
//! Not here: what happens when a target fails (the fallback loop is the responses handler's).

use std::collections::BTreeMap;

use super::Config;
use super::file::{CatalogFile, RouteFile};
use super::providers::Provider;
use crate::error::ConfigError;

mod signals;

use signals::REQUEST_KINDS;
pub use signals::RouteSignals;

/// A resolved route.
#[derive(Debug, Clone)]
pub struct Route {
    pub pattern: String,
    pub matcher: globset::GlobMatcher,
    pub provider: String,
    pub upstream_model: Option<String>,
    /// `(provider, upstream model)` to try in order after `provider`.
    pub fallbacks: Vec<(String, Option<String>)>,
    /// Only requests of this Codex request kind.
    pub request_kind: Option<String>,
    /// Only requests of Codex agents whose name matches.
    pub agent_name: Option<(String, globset::GlobMatcher)>,
    /// Only requests whose routing hint names this tier.
    pub tier: Option<String>,
    /// What the Codex catalog says of this route's models.
    pub catalog: RouteCatalog,
}

/// The Codex catalog's settings of a route, resolved (the base instructions read from their
/// file).
#[derive(Debug, Clone, Default)]
pub struct RouteCatalog {
    pub base_instructions: Option<String>,
    pub display_name: Option<String>,
    pub description: Option<String>,
    pub auto_compact_token_limit: Option<u64>,
    pub prefer_websockets: Option<bool>,
    pub input_modalities: Option<Vec<String>>,
    pub hidden: bool,
}

/// One provider and model a request can be sent to.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub provider: &'a Provider,
    pub upstream_model: String,
    /// A fallback of the route, not its own target.
    pub fallback: bool,
}

impl Target<'_> {
    /// The `x-codex-turn-state` naming this target: a digest of its provider and upstream
    /// model, so a turn's later requests go first to the target that answered its first (its
    /// prompt cache and reasoning signatures are there), and a client learns no names.
    pub fn turn_state(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.provider.name.as_bytes());
        hasher.update(&[0]);
        hasher.update(self.upstream_model.as_bytes());
        format!("tb1.{}", &hasher.finalize().to_hex()[..16])
    }
}

impl Route {
    /// True when the pattern is a plain model name rather than a glob.
    pub fn is_exact(&self) -> bool {
        !self.pattern.contains(['*', '?', '[', '{'])
    }

    /// True when the route asks for a Codex signal (then it is not a model of its own).
    pub fn is_conditional(&self) -> bool {
        self.request_kind.is_some() || self.agent_name.is_some() || self.tier.is_some()
    }

    /// Whether the route serves `model` for a request with `signals`.
    pub fn matches(&self, model: &str, signals: &RouteSignals) -> bool {
        self.matcher.is_match(model)
            && self
                .request_kind
                .as_ref()
                .is_none_or(|kind| signals.request_kind.as_ref() == Some(kind))
            && self.agent_name.as_ref().is_none_or(|(_, glob)| {
                signals
                    .agent_name
                    .as_deref()
                    .is_some_and(|name| glob.is_match(name))
            })
            && self
                .tier
                .as_ref()
                .is_none_or(|tier| signals.tier.as_ref() == Some(tier))
    }

    /// The route's conditions as `toolbridge check` shows them (empty when it has none).
    pub fn conditions(&self) -> String {
        let mut parts = Vec::new();
        if let Some(kind) = &self.request_kind {
            parts.push(format!("request_kind = {kind}"));
        }
        if let Some((pattern, _)) = &self.agent_name {
            parts.push(format!("agent_name = {pattern}"));
        }
        if let Some(tier) = &self.tier {
            parts.push(format!("tier = {tier}"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" [when {}]", parts.join(", "))
        }
    }
}

/// The written routes, checked against the declared providers and compiled; at least one is
/// required.
pub(super) fn compile(
    written: Vec<RouteFile>,
    providers: &BTreeMap<String, Provider>,
) -> Result<Vec<Route>, ConfigError> {
    let mut routes = Vec::new();
    for (i, r) in written.into_iter().enumerate() {
        if !providers.contains_key(&r.provider) {
            return Err(ConfigError::invalid(
                format!("routes[{i}].provider"),
                format!(
                    "`{}` is not a declared provider (declared: {})",
                    r.provider,
                    providers.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let glob = globset::Glob::new(&r.model)
            .map_err(|e| ConfigError::invalid(format!("routes[{i}].model"), e.to_string()))?;
        for (j, f) in r.fallbacks.iter().enumerate() {
            if !providers.contains_key(&f.provider) {
                return Err(ConfigError::invalid(
                    format!("routes[{i}].fallbacks[{j}].provider"),
                    format!("`{}` is not a declared provider", f.provider),
                ));
            }
        }
        if let Some(kind) = &r.request_kind
            && !REQUEST_KINDS.contains(&kind.as_str())
        {
            return Err(ConfigError::invalid(
                format!("routes[{i}].request_kind"),
                format!("`{kind}` is not one of {}", REQUEST_KINDS.join(", ")),
            ));
        }
        let agent_name = match &r.agent_name {
            Some(pattern) => Some((
                pattern.clone(),
                globset::Glob::new(pattern)
                    .map_err(|e| {
                        ConfigError::invalid(format!("routes[{i}].agent_name"), e.to_string())
                    })?
                    .compile_matcher(),
            )),
            None => None,
        };
        let catalog = route_catalog(i, r.catalog)?;
        routes.push(Route {
            pattern: r.model,
            matcher: glob.compile_matcher(),
            provider: r.provider,
            upstream_model: r.upstream_model,
            fallbacks: r
                .fallbacks
                .into_iter()
                .map(|f| (f.provider, f.upstream_model))
                .collect(),
            request_kind: r.request_kind,
            agent_name,
            tier: r.tier,
            catalog,
        });
    }
    if routes.is_empty() {
        return Err(ConfigError::invalid(
            "routes",
            "at least one route is required",
        ));
    }
    Ok(routes)
}

/// A route's `[routes.catalog]`, checked, its instructions file read.
fn route_catalog(i: usize, file: CatalogFile) -> Result<RouteCatalog, ConfigError> {
    let at = |field: &str| format!("routes[{i}].catalog.{field}");
    let base_instructions = match (file.base_instructions, file.base_instructions_file) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::invalid(
                at("base_instructions_file"),
                "give base_instructions or base_instructions_file, not both",
            ));
        }
        (Some(text), None) => Some(text),
        (None, Some(path)) => Some(std::fs::read_to_string(&path).map_err(|e| {
            ConfigError::invalid(
                at("base_instructions_file"),
                format!("cannot read {}: {e}", path.display()),
            )
        })?),
        (None, None) => None,
    };
    if let Some(modalities) = &file.input_modalities {
        if let Some(bad) = modalities
            .iter()
            .find(|m| !["text", "image"].contains(&m.as_str()))
        {
            return Err(ConfigError::invalid(
                at("input_modalities"),
                format!("`{bad}` is not one of text, image"),
            ));
        }
        if !modalities.iter().any(|m| m == "text") {
            return Err(ConfigError::invalid(
                at("input_modalities"),
                "`text` is required",
            ));
        }
    }
    Ok(RouteCatalog {
        base_instructions,
        display_name: file.display_name,
        description: file.description,
        auto_compact_token_limit: file.auto_compact_token_limit,
        prefer_websockets: file.prefer_websockets,
        input_modalities: file.input_modalities,
        hidden: file.hidden,
    })
}

impl Config {
    /// The route for a requested model, for a request with no Codex signals.
    pub fn resolve(&self, model: &str) -> Option<(&Route, &Provider)> {
        self.resolve_for(model, &RouteSignals::default())
    }

    /// The route for a requested model and signals: the first route that matches both.
    pub fn resolve_for(&self, model: &str, signals: &RouteSignals) -> Option<(&Route, &Provider)> {
        let route = self.routes.iter().find(|r| r.matches(model, signals))?;
        let provider = self.providers.get(&route.provider)?;
        Some((route, provider))
    }

    /// Where a request for `model` goes: the route's provider, then its fallbacks.
    pub fn targets(&self, model: &str) -> Option<Vec<Target<'_>>> {
        self.targets_for(model, &RouteSignals::default())
    }

    /// Where a request for `model` with `signals` goes.
    pub fn targets_for(&self, model: &str, signals: &RouteSignals) -> Option<Vec<Target<'_>>> {
        let (route, provider) = self.resolve_for(model, signals)?;
        let primary = route
            .upstream_model
            .clone()
            .unwrap_or_else(|| model.to_owned());
        // Each target is its provider as it serves that model (`dialect_for`).
        let mut out = vec![Target {
            provider: provider.for_model(&primary),
            upstream_model: primary.clone(),
            fallback: false,
        }];
        for (name, upstream) in &route.fallbacks {
            if let Some(provider) = self.providers.get(name) {
                let upstream_model = upstream.clone().unwrap_or_else(|| primary.clone());
                out.push(Target {
                    provider: provider.for_model(&upstream_model),
                    upstream_model,
                    fallback: true,
                });
            }
        }
        // A turn that a fallback answered keeps it first for the turn's later requests.
        if let Some(state) = &signals.turn_state
            && let Some(at) = out.iter().position(|t| t.turn_state() == *state)
        {
            let served = out.remove(at);
            out.insert(0, served);
        }
        Some(out)
    }

    /// Model names clients can ask for by name: exact routes, and the models a provider's preset
    /// or config knows that a glob route sends to it.
    pub fn known_models(&self) -> Vec<KnownModel> {
        let mut out: Vec<KnownModel> = Vec::new();
        let push = |out: &mut Vec<KnownModel>,
                    id: String,
                    route: usize,
                    provider: &Provider,
                    upstream: &str| {
            if out.iter().all(|m| m.id != id) {
                out.push(KnownModel {
                    context_window: provider.context_window(upstream),
                    owned_by: provider.name.clone(),
                    id,
                    route,
                    upstream_model: upstream.to_owned(),
                });
            }
        };
        for (index, route) in self.routes.iter().enumerate() {
            let Some(provider) = self.providers.get(&route.provider) else {
                continue;
            };
            // A route for some requests of a model (compaction, a sub-agent) adds no model.
            if route.is_conditional() {
                continue;
            }
            if route.is_exact() {
                let upstream = route.upstream_model.as_deref().unwrap_or(&route.pattern);
                push(&mut out, route.pattern.clone(), index, provider, upstream);
                continue;
            }
            let candidates = provider
                .models
                .keys()
                .cloned()
                .chain(
                    provider
                        .profile
                        .context_windows
                        .iter()
                        .map(|(m, _)| m.clone()),
                )
                .collect::<Vec<_>>();
            for model in candidates {
                // Only when this route is the one that would serve the name.
                if route.matcher.is_match(&model)
                    && self.resolve(&model).map(|(r, _)| r.pattern.as_str()) == Some(&route.pattern)
                {
                    let upstream = route
                        .upstream_model
                        .clone()
                        .unwrap_or_else(|| model.clone());
                    push(&mut out, model, index, provider, &upstream);
                }
            }
        }
        out
    }
}

/// A model `GET /v1/models` lists.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownModel {
    pub id: String,
    pub owned_by: String,
    pub context_window: Option<u64>,
    /// The index of the route that serves it, in `Config::routes`.
    pub route: usize,
    /// The model name sent upstream.
    pub upstream_model: String,
}
