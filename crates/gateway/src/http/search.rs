//! `POST /v1/alpha/search`: Codex's standalone web search (`supports_standalone_web_search`),
//! for any model, answered by the gateway's search backend (`[gateway_tools.web_search]`,
//! `tools::standalone`) as `{"output": text}`. Behind the gateway key: a key must be allowed the
//! request's model and the `web_search` tool. Without a backend the request is refused with
//! `web_search_unavailable` (501), so Codex's model reads a clear error rather than a 404.
//!
//! Not here: running the operations (`tools::standalone`).

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use toolbridge_wire::search::{SearchRequest, SearchResponse};

use crate::error::GatewayError;
use crate::platform::auth::Authenticated;
use crate::state::AppState;
use crate::tools::Refusal;

/// The standalone search route.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/v1/alpha/search", post(search))
}

async fn search(
    State(state): State<AppState>,
    key: Option<axum::Extension<Authenticated>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match run(&state, key.as_deref(), body).await {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn run(
    state: &AppState,
    key: Option<&Authenticated>,
    body: Result<Bytes, BytesRejection>,
) -> Result<SearchResponse, GatewayError> {
    let body = body.map_err(|r| GatewayError::from_body_rejection(&r, state.config.body_limit))?;
    let request: SearchRequest = serde_json::from_slice(&body).map_err(|e| {
        GatewayError::Request(toolbridge_core::Error::InvalidJson {
            param: None,
            message: format!("the request body is not a search request: {e}"),
        })
    })?;
    if let Some(key) = key {
        if let Some(model) = &request.model {
            crate::platform::auth::check_model(&key.scopes, model)?;
        }
        if !key.scopes.allows_tool("web_search", None) {
            return Err(GatewayError::ToolNotAllowed {
                param: "commands".to_owned(),
                tool: "web_search".to_owned(),
            });
        }
    }
    let Some(tools) = state
        .config
        .gateway_tools
        .as_ref()
        .filter(|t| t.has_search())
    else {
        return Err(GatewayError::SearchUnavailable);
    };
    let output = tools
        .standalone_search(&request)
        .await
        .map_err(|refusal| match refusal {
            Refusal::NoBackend => GatewayError::SearchUnavailable,
            Refusal::NothingToRun { param } => {
                GatewayError::Request(toolbridge_core::Error::InvalidValue {
                    param,
                    message: "no search_query, open or find operation to run (this gateway serves those three)".to_owned(),
                })
            }
            Refusal::TooMany { count } => {
                GatewayError::Request(toolbridge_core::Error::InvalidValue {
                    param: "commands".to_owned(),
                    message: format!(
                        "{count} operations in one request; the most is {}",
                        crate::tools::MAX_OPERATIONS
                    ),
                })
            }
        })?;
    tracing::info!(
        search_id = request.id.as_deref().unwrap_or_default(),
        output_bytes = output.len(),
        "standalone search answered"
    );
    Ok(SearchResponse { output })
}
