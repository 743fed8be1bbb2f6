//! Routes: a requested model name (or glob) → provider and upstream model, with its fallback
//! chain; and the model list `GET /v1/models` derives from them.
//!
//! Not here: what happens when a target fails (the fallback loop is the responses handler's).

use std::collections::BTreeMap;

use super::Config;
use super::file::RouteFile;
use super::providers::Provider;
use crate::error::ConfigError;

/// A resolved route.
#[derive(Debug, Clone)]
pub struct Route {
    pub pattern: String,
    pub matcher: globset::GlobMatcher,
    pub provider: String,
    pub upstream_model: Option<String>,
    /// `(provider, upstream model)` to try in order after `provider`.
    pub fallbacks: Vec<(String, Option<String>)>,
}

/// One provider and model a request can be sent to.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub provider: &'a Provider,
    pub upstream_model: String,
}

impl Route {
    /// True when the pattern is a plain model name rather than a glob.
    pub fn is_exact(&self) -> bool {
        !self.pattern.contains(['*', '?', '[', '{'])
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

impl Config {
    /// The route for a requested model: the first route whose pattern matches.
    pub fn resolve(&self, model: &str) -> Option<(&Route, &Provider)> {
        let route = self.routes.iter().find(|r| r.matcher.is_match(model))?;
        let provider = self.providers.get(&route.provider)?;
        Some((route, provider))
    }

    /// Where a request for `model` goes: the route's provider, then its fallbacks.
    pub fn targets(&self, model: &str) -> Option<Vec<Target<'_>>> {
        let (route, provider) = self.resolve(model)?;
        let primary = route
            .upstream_model
            .clone()
            .unwrap_or_else(|| model.to_owned());
        let mut out = vec![Target {
            provider,
            upstream_model: primary.clone(),
        }];
        for (name, upstream) in &route.fallbacks {
            if let Some(provider) = self.providers.get(name) {
                out.push(Target {
                    provider,
                    upstream_model: upstream.clone().unwrap_or_else(|| primary.clone()),
                });
            }
        }
        Some(out)
    }

    /// Model names clients can ask for by name: exact routes, and the models a provider's preset
    /// or config knows that a glob route sends to it.
    pub fn known_models(&self) -> Vec<KnownModel> {
        let mut out: Vec<KnownModel> = Vec::new();
        let push = |out: &mut Vec<KnownModel>, id: String, provider: &Provider, upstream: &str| {
            if out.iter().all(|m| m.id != id) {
                out.push(KnownModel {
                    context_window: provider.context_window(upstream),
                    owned_by: provider.name.clone(),
                    id,
                });
            }
        };
        for route in &self.routes {
            let Some(provider) = self.providers.get(&route.provider) else {
                continue;
            };
            if route.is_exact() {
                let upstream = route.upstream_model.as_deref().unwrap_or(&route.pattern);
                push(&mut out, route.pattern.clone(), provider, upstream);
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
                    push(&mut out, model, provider, &upstream);
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
}
