//! `GET /healthz`: liveness, and readiness with `?ready` (the store asked, bounded by its
//! timeout). Outside `/v1` and outside authentication, for load balancers and orchestrators.

use axum::extract::{RawQuery, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

/// Liveness and readiness. `GET /healthz` is always `200 ok` while the process serves (a store
/// outage must not get a gateway restarted: requests that need no store still pass), with the
/// store's circuit state in `x-toolbridge-store` (`ok`, `degraded`, `unavailable`, `off`).
/// `GET /healthz?ready` asks the store (bounded by its timeout) and answers JSON
/// `{"status": "ready"|"not_ready", "store": …}`: 200 when ready, 503 when the store cannot
/// answer.
pub(crate) async fn healthz(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let ready = query.as_deref().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "ready" || p.starts_with("ready="))
    });
    let Some(store) = &state.store else {
        return health_answer(ready, "off", true);
    };
    if !ready {
        return health_answer(false, store.health().as_str(), true);
    }
    match store.ping().await {
        Ok(()) => health_answer(true, "ok", true),
        Err(e) => {
            tracing::warn!(code = e.code(), "readiness: the store did not answer: {e}");
            health_answer(true, store.health().as_str(), false)
        }
    }
}

fn health_answer(ready_asked: bool, store: &'static str, ready: bool) -> Response {
    let store = if ready { store } else { "unavailable" };
    let header = [(
        HeaderName::from_static("x-toolbridge-store"),
        HeaderValue::from_static(store),
    )];
    if !ready_asked {
        return (header, "ok").into_response();
    }
    let body = serde_json::json!({
        "status": if ready { "ready" } else { "not_ready" },
        "store": store,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, header, axum::Json(body)).into_response()
}
