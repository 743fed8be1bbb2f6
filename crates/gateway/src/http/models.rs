//! `GET /v1/models`: the models this gateway routes by name, with context windows where known.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::state::AppState;
use axum::Router;
use axum::routing::get;

/// The model list route.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/models", get(list))
}

pub(super) async fn list(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .config
        .known_models()
        .into_iter()
        .map(|m| {
            let mut entry = json!({
                "id": m.id,
                "object": "model",
                "created": 0,
                "owned_by": m.owned_by,
            });
            if let (Some(window), Some(obj)) = (m.context_window, entry.as_object_mut()) {
                obj.insert("context_window".to_owned(), json!(window));
            }
            entry
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}
