//! The console's providers page: each configured provider's dialect, preset and routes, its
//! health over the journal's requests the viewer may see (requests, error rate, latency and
//! first-token percentiles), the store's circuit, and the capability matrix `toolbridge
//! providers` prints (tools, efforts, cache plan, catalog fields).

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Serialize;

use super::layout::{self, ms};
use super::{Filters, Viewer, listed, viewer};
use crate::error::GatewayError;
use crate::platform::ops::journal::Entry;
use crate::state::AppState;

/// One provider's health over the listed requests.
#[derive(Debug, Default, Serialize)]
struct Health {
    requests: usize,
    errors: usize,
    error_rate: f64,
    p50_ms: Option<f64>,
    p95_ms: Option<f64>,
    first_token_p50_ms: Option<f64>,
}

#[derive(Debug, Serialize)]
struct ProviderView {
    name: String,
    dialect: &'static str,
    preset: String,
    base_url: String,
    /// The route models that name it first.
    routes: Vec<String>,
    health: Health,
    matrix: String,
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted.get(rank).copied()
}

fn health(entries: &[Arc<Entry>], provider: &str) -> Health {
    let mine: Vec<&Arc<Entry>> = entries
        .iter()
        .filter(|e| e.provider.as_deref() == Some(provider))
        .collect();
    let errors = mine
        .iter()
        .filter(|e| e.http_status >= 400 || e.status.as_deref() == Some("failed"))
        .count();
    let mut latency: Vec<f64> = mine.iter().map(|e| e.latency_ms).collect();
    latency.sort_by(f64::total_cmp);
    let mut first: Vec<f64> = mine.iter().filter_map(|e| e.first_token_ms).collect();
    first.sort_by(f64::total_cmp);
    Health {
        requests: mine.len(),
        errors,
        error_rate: if mine.is_empty() {
            0.0
        } else {
            errors as f64 / mine.len() as f64
        },
        p50_ms: percentile(&latency, 0.5),
        p95_ms: percentile(&latency, 0.95),
        first_token_p50_ms: percentile(&first, 0.5),
    }
}

fn views(state: &AppState, viewer: &Viewer) -> Vec<ProviderView> {
    let entries = listed(state, viewer, &Filters::default());
    let config = &state.config;
    config
        .providers
        .values()
        .map(|p| ProviderView {
            name: p.name.clone(),
            dialect: p.dialect.as_str(),
            preset: p.profile.name.clone(),
            base_url: crate::config::redact_url(&p.base_url),
            routes: config
                .routes
                .iter()
                .filter(|r| r.provider == p.name)
                .map(|r| r.pattern.clone())
                .collect(),
            health: health(&entries, &p.name),
            matrix: crate::http::matrix::provider_matrix(config, &p.name),
        })
        .collect()
}

fn store_circuit(state: &AppState) -> &'static str {
    state.store.as_ref().map_or("off", |s| s.health().as_str())
}

/// `GET /console/providers`.
pub(super) async fn page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    super::page(
        async {
            let viewer = viewer(&state, &headers).await?;
            Ok::<_, GatewayError>(providers_page(&state, &viewer))
        }
        .await,
    )
}

fn providers_page(state: &AppState, viewer: &Viewer) -> Markup {
    let views = views(state, viewer);
    let body = html! {
        p { "Store circuit: " strong { (store_circuit(state)) }
            span.muted { " · health counts the requests this process keeps that you may see; \
                          providers have no circuit of their own: retries and fallbacks \
                          (per route) take their failures." } }
        table {
            caption { "Configured providers and their health" }
            thead { tr {
                th scope="col" { "Provider" }
                th scope="col" { "Dialect" }
                th scope="col" { "Preset" }
                th scope="col" { "Routes" }
                th.num scope="col" { "Requests" }
                th.num scope="col" { "Error rate" }
                th.num scope="col" { "p50" }
                th.num scope="col" { "p95" }
                th.num scope="col" { "First token p50" }
            } }
            tbody {
                @for v in &views {
                    tr {
                        td { a href=(format!("#matrix-{}", v.name)) { (v.name) } br;
                             span.muted { (v.base_url) } }
                        td { (v.dialect) }
                        td { (v.preset) }
                        td { (v.routes.join(", ")) }
                        td.num { (v.health.requests) }
                        td.num { (format!("{:.1}%", v.health.error_rate * 100.0)) }
                        td.num { (v.health.p50_ms.map_or("–".to_owned(), ms)) }
                        td.num { (v.health.p95_ms.map_or("–".to_owned(), ms)) }
                        td.num { (v.health.first_token_p50_ms.map_or("–".to_owned(), ms)) }
                    }
                }
            }
        }
        @for v in &views {
            section #(format!("matrix-{}", v.name)) aria-label=(format!("{} capabilities", v.name)) {
                h2 { "Capabilities of " (v.name) }
                pre tabindex="0" { (v.matrix) }
            }
        }
    };
    layout::page("Providers", "/console/providers", &viewer.describe(), body)
}

/// `GET /console/api/providers`.
pub(super) async fn api(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match viewer(&state, &headers).await {
        Ok(viewer) => axum::Json(serde_json::json!({
            "store_circuit": store_circuit(&state),
            "providers": views(&state, &viewer),
        }))
        .into_response(),
        Err(e) => e.into_response(),
    }
}
