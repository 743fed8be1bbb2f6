//! The Conversations API: `POST /v1/conversations`, `GET`/`DELETE /v1/conversations/{id}`,
//! `POST`/`GET /v1/conversations/{id}/items`. A response naming `conversation` reads the
//! conversation's items before its input and appends its input and output at its end
//! (see `history` and `responses`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use toolbridge_store::{Conversation, ResponseStore};
use toolbridge_wire::responses::InputItem;

use crate::error::GatewayError;
use crate::http::stored::{ListQuery, list_body, page_error};
use crate::platform::{ids, time};
use crate::state::AppState;
use axum::Router;
use axum::routing;

/// The most items one call may add.
const MAX_ITEMS: usize = 1000;

fn store(state: &AppState, id: &str) -> Result<std::sync::Arc<dyn ResponseStore>, GatewayError> {
    state
        .store
        .clone()
        .ok_or_else(|| GatewayError::ConversationNotFound(id.to_owned()))
}

fn store_error(e: toolbridge_store::StoreError) -> GatewayError {
    GatewayError::Store(e.to_string())
}

fn object(c: &Conversation) -> Value {
    json!({"id": c.id, "object": "conversation", "created_at": c.created_at, "metadata": c.metadata})
}

/// Checks items as inputs and gives them their stored shape and ids.
fn items(value: Option<&Value>) -> Result<Vec<Value>, GatewayError> {
    let list = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(GatewayError::Request(
                toolbridge_core::Error::InvalidValue {
                    param: "items".to_owned(),
                    message: "must be a list of items".to_owned(),
                },
            ));
        }
    };
    if list.len() > MAX_ITEMS {
        return Err(GatewayError::Request(
            toolbridge_core::Error::InvalidValue {
                param: "items".to_owned(),
                message: format!("at most {MAX_ITEMS} items at once"),
            },
        ));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let parsed: Result<InputItem, _> = serde_path_to_error::deserialize(item);
        let parsed = parsed.map_err(|e| {
            // The path to the leaf field (`items[0].content[1].type`), in plain words.
            let tracked = match e.path().to_string() {
                inner if matches!(inner.as_str(), "" | "." | "?") => format!("items[{i}]"),
                inner if inner.starts_with('[') => format!("items[{i}]{inner}"),
                inner => format!("items[{i}].{inner}"),
            };
            let (param, message) =
                toolbridge_wire::inbound::explain(&tracked, &e.into_inner().to_string());
            let param = param.unwrap_or_else(|| format!("items[{i}]"));
            GatewayError::Request(toolbridge_core::Error::InvalidJson {
                message: format!("invalid item at `{param}`: {message}"),
                param: Some(param),
            })
        })?;
        out.push(serde_json::to_value(parsed).unwrap_or(Value::Null));
    }
    Ok(crate::http::responses::stored::history::stored_items(out))
}

async fn run(result: impl std::future::Future<Output = Result<Value, GatewayError>>) -> Response {
    match result.await {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}

/// A conversation request's body: a JSON object, with no key repeated at any depth.
fn parse_object(body: &[u8]) -> Result<Map<String, Value>, GatewayError> {
    let object: Map<String, Value> = serde_json::from_slice(body).map_err(|e| {
        GatewayError::Request(toolbridge_core::Error::InvalidJson {
            param: None,
            message: format!("the request body is not a JSON object: {e}"),
        })
    })?;
    crate::http::responses::ingress::refuse_duplicate_keys(&String::from_utf8_lossy(body))?;
    Ok(object)
}

/// `POST /v1/conversations` with optional `items` and `metadata`.
/// The conversation routes.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/conversations", routing::post(create))
        .route("/v1/conversations/{id}", routing::get(get).delete(delete))
        .route(
            "/v1/conversations/{id}/items",
            routing::get(list_items).post(add_items),
        )
}

pub(crate) async fn create(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    run(async move {
        let tenant = crate::platform::auth::current_tenant();
        let body =
            body.map_err(|r| GatewayError::from_body_rejection(&r, state.config.body_limit))?;
        let body: Map<String, Value> = if body.is_empty() {
            Map::new()
        } else {
            parse_object(&body)?
        };
        let metadata = match body.get("metadata") {
            None | Some(Value::Null) => json!({}),
            Some(Value::Object(metadata)) => {
                toolbridge_core::request::check_metadata(metadata)?;
                Value::Object(metadata.clone())
            }
            Some(_) => {
                return Err(GatewayError::Request(toolbridge_core::Error::InvalidJson {
                    param: Some("metadata".to_owned()),
                    message: "invalid request body at `metadata`: expected an object of strings"
                        .to_owned(),
                }));
            }
        };
        let conversation = Conversation {
            id: ids::new("conv"),
            created_at: time::now(),
            metadata,
        };
        let items = items(body.get("items"))?;
        store(&state, &conversation.id)?
            .create_conversation(&tenant, &conversation, &items)
            .await
            .map_err(store_error)?;
        Ok(object(&conversation))
    })
    .await
}

/// `GET /v1/conversations/{id}`.
pub(crate) async fn get(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    run(async move {
        let tenant = crate::platform::auth::current_tenant();
        let c = store(&state, &id)?
            .get_conversation(&tenant, &id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| GatewayError::ConversationNotFound(id.clone()))?;
        Ok(object(&c))
    })
    .await
}

/// `DELETE /v1/conversations/{id}`.
pub(crate) async fn delete(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    run(async move {
        let tenant = crate::platform::auth::current_tenant();
        if !store(&state, &id)?
            .delete_conversation(&tenant, &id)
            .await
            .map_err(store_error)?
        {
            return Err(GatewayError::ConversationNotFound(id));
        }
        Ok(json!({"id": id, "object": "conversation.deleted", "deleted": true}))
    })
    .await
}

/// `POST /v1/conversations/{id}/items` with `items`.
pub(crate) async fn add_items(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    run(async move {
        let tenant = crate::platform::auth::current_tenant();
        let body =
            body.map_err(|r| GatewayError::from_body_rejection(&r, state.config.body_limit))?;
        let body = parse_object(&body)?;
        let items = items(body.get("items"))?;
        if !store(&state, &id)?
            .append_conversation_items(&tenant, &id, &items)
            .await
            .map_err(store_error)?
        {
            return Err(GatewayError::ConversationNotFound(id));
        }
        Ok(list(items, false))
    })
    .await
}

/// `GET /v1/conversations/{id}/items?after&limit&order`.
pub(crate) async fn list_items(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: ListQuery,
) -> Response {
    run(async move {
        let tenant = crate::platform::auth::current_tenant();
        let page = query.page()?;
        let page = store(&state, &id)?
            .conversation_items(&tenant, &id, &page)
            .await
            .map_err(page_error)?
            .ok_or_else(|| GatewayError::ConversationNotFound(id.clone()))?;
        Ok(list(page.items, page.has_more))
    })
    .await
}

fn list(items: Vec<Value>, has_more: bool) -> Value {
    list_body(items, has_more)
}
