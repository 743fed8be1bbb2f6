//! Operations: what an operator sees of the gateway — Prometheus metrics ([`metrics`]), logs and
//! OpenTelemetry traces ([`telemetry`], [`spans`]), the per-request observer with its request id, overhead
//! header and opt-in capture ([`observe`]) and `toolbridge trace show` ([`trace_show`]). Their
//! config sections live in [`crate::config::ops`]; the config reload
//! on SIGHUP is `launch::reload`'s.
//!
//! Keys, budgets and rate limits are elsewhere (`auth`, `limits`).

pub(crate) mod genai;
pub(crate) mod journal;
mod log_line;
mod log_writer;
pub(crate) mod metrics;
pub(crate) mod observe;
pub mod spans;
pub(crate) mod telemetry;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `GET /metrics` (or the configured path): the Prometheus text exposition.
pub(crate) async fn metrics_handler() -> Response {
    match metrics::render() {
        Some(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            text,
        )
            .into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "metrics are unavailable").into_response(),
    }
}

/// `toolbridge trace show ID`: the capture of one request, as indented JSON.
pub(crate) async fn trace_show(config: &crate::Config, request_id: &str) -> Result<String, String> {
    let Some(url) = &config.store_url else {
        return Err("captures live in the store, and no `store_url` is configured".to_owned());
    };
    let store = toolbridge_store::SqlStore::open(url)
        .await
        .map_err(|e| format!("cannot open the store: {e}"))?;
    use toolbridge_store::CaptureStore;
    // The operator's command reads every tenant's captures.
    let operator = toolbridge_store::Tenant::open().reading_all();
    match store
        .capture(&operator, request_id, crate::platform::time::now())
        .await
    {
        Ok(Some(capture)) => serde_json::to_string_pretty(&capture)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| e.to_string()),
        Ok(None) => Err(format!(
            "no capture for `{request_id}` (capture off, expired, or another id; ids are the `x-request-id` header)"
        )),
        Err(e) => Err(format!("cannot read the capture: {e}")),
    }
}
