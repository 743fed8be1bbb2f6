//! `GET /v1/models`: the models this gateway routes by name. Two shapes on one path, chosen by
//! the query: with `client_version` (Codex's catalog fetch,
//! `GET {model_catalog_url}?client_version=0.171.0`) the Codex catalog (`{"models": [...]}`,
//! [`crate::catalog`]); without it OpenAI's list (`{"object": "list", "data": [...]}`) with
//! context windows where known, for every other client. A key scoped to some models sees only
//! those.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::error::GatewayError;
use crate::platform::auth::Authenticated;
use crate::state::AppState;

/// The model list route.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/v1/models", get(list))
}

/// Which shape a query asks for: the Codex client version when it is the catalog.
fn wants_catalog(query: Option<&str>) -> Result<Option<String>, GatewayError> {
    let mut versions = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .filter(|(name, _)| name == "client_version");
    match (versions.next(), versions.next()) {
        (None, _) => Ok(None),
        (Some(_), Some(_)) => Err(GatewayError::Request(
            toolbridge_core::Error::InvalidValue {
                param: "client_version".to_owned(),
                message: "`client_version` is given more than once".to_owned(),
            },
        )),
        (Some((_, version)), None) => Ok(Some(version.into_owned())),
    }
}

pub(super) async fn list(
    State(state): State<AppState>,
    uri: Uri,
    key: Option<axum::Extension<Authenticated>>,
) -> Response {
    let catalog = match wants_catalog(uri.query()) {
        Ok(catalog) => catalog,
        Err(e) => return e.into_response(),
    };
    let allowed = |model: &str| key.as_ref().is_none_or(|k| k.scopes.allows_model(model));
    if let Some(version) = catalog {
        let mut body = crate::catalog::codex_catalog(&state.config);
        if let Some(models) = body.get_mut("models").and_then(Value::as_array_mut) {
            models.retain(|m| m["slug"].as_str().is_some_and(allowed));
            // The client's version as a bounded word: it is only ever logged.
            let version: String = version.chars().take(32).collect();
            tracing::info!(
                client_version = version,
                models = models.len(),
                "codex model catalog served"
            );
        }
        let mut response = Json(body).into_response();
        if let Ok(v) = axum::http::HeaderValue::from_str(state.catalog_etag()) {
            response.headers_mut().insert("x-models-etag", v);
        }
        return response;
    }
    let data: Vec<Value> = state
        .config
        .known_models()
        .into_iter()
        .filter(|m| allowed(&m.id))
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
    Json(json!({"object": "list", "data": data})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_asked_for_by_client_version() {
        assert_eq!(wants_catalog(None).unwrap(), None);
        assert_eq!(wants_catalog(Some("limit=3")).unwrap(), None);
        assert_eq!(
            wants_catalog(Some("client_version=0.171.0"))
                .unwrap()
                .as_deref(),
            Some("0.171.0")
        );
        assert!(wants_catalog(Some("client_version=0.171.0&client_version=1")).is_err());
    }
}
