//! `GET /v1/cache/sessions/{session_id}`: a session's prompt-cache report from the cache ledger
//! (`platform::cache_ledger`): each upstream answer with its provider, input tokens, cache
//! reads and writes and cached share, and the totals. A key sees its tenant's sessions only; an
//! admin key every tenant's.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error::GatewayError;
use crate::state::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/v1/cache/sessions/{session_id}", get(session))
}

async fn session(State(state): State<AppState>, Path(session): Path<String>) -> Response {
    let result = async {
        let ledger = state
            .cache_turns
            .clone()
            .ok_or_else(|| GatewayError::CacheSessionNotFound(session.clone()))?;
        let tenant = crate::platform::auth::current_tenant();
        let turns = ledger
            .cache_turns(&tenant, &session)
            .await
            .map_err(|e| GatewayError::Store(e.to_string()))?;
        if turns.is_empty() {
            return Err(GatewayError::CacheSessionNotFound(session.clone()));
        }
        Ok(Json(crate::platform::cache_ledger::report(
            &session, &turns,
        )))
    };
    match result.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}
