//! Stored responses: `GET /v1/responses/{id}`, `DELETE /v1/responses/{id}`,
//! `GET /v1/responses/{id}/input_items` and `POST /v1/responses/{id}/cancel`.

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use toolbridge_store::{Order, Page, ResponseStore};

use crate::error::GatewayError;
use crate::state::AppState;
use axum::Router;
use axum::routing;

fn store(state: &AppState, id: &str) -> Result<std::sync::Arc<dyn ResponseStore>, GatewayError> {
    // Without a store nothing was ever stored: every id is unknown.
    state
        .store
        .clone()
        .ok_or_else(|| GatewayError::ResponseNotFound(id.to_owned()))
}

/// `GET /v1/responses/{id}`.
/// The stored-response routes.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/responses/{id}", routing::get(get).delete(delete))
        .route("/v1/responses/{id}/input_items", routing::get(input_items))
        .route("/v1/responses/{id}/cancel", routing::post(cancel))
}

pub(crate) async fn get(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let result = async {
        let tenant = crate::platform::auth::current_tenant();
        let stored = store(&state, &id)?
            .get(&tenant, &id)
            .await
            .map_err(|e| GatewayError::Store(e.to_string()))?;
        match stored {
            Some(stored) => Ok::<_, GatewayError>(Json(stored.response)),
            // Running here and not stored yet: it is in progress.
            None => state
                .in_flight
                .started(&id, tenant.name())
                .map(Json)
                .ok_or_else(|| GatewayError::ResponseNotFound(id.clone())),
        }
    };
    match result.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// `DELETE /v1/responses/{id}`.
pub(crate) async fn delete(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let result = async {
        let tenant = crate::platform::auth::current_tenant();
        let deleted = store(&state, &id)?
            .delete(&tenant, &id)
            .await
            .map_err(|e| GatewayError::Store(e.to_string()))?;
        if !deleted {
            return Err(GatewayError::ResponseNotFound(id.clone()));
        }
        Ok(Json(
            json!({"id": id, "object": "response.deleted", "deleted": true}),
        ))
    };
    match result.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// Query of a list of items (`after`, `limit` 1–100 default 20, `order` default `desc`).
///
/// Read by hand rather than through axum's `Query`, whose rejection is plain text naming Rust
/// types: a bad value here is OpenAI's 400 naming the parameter. Unknown parameters are
/// ignored, as OpenAI does.
#[derive(Debug, Default)]
pub(crate) struct ListQuery {
    after: Option<String>,
    limit: Option<u32>,
    order: Option<String>,
}

impl ListQuery {
    /// Reads a query string (`None`: there is none).
    pub(crate) fn parse(query: Option<&str>) -> Result<Self, GatewayError> {
        let mut parsed = Self::default();
        let invalid = |param: &str, message: String| {
            GatewayError::Request(toolbridge_core::Error::InvalidValue {
                param: param.to_owned(),
                message,
            })
        };
        for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let repeated = match name.as_ref() {
                "after" => parsed.after.replace(value.into_owned()).is_some(),
                "order" => parsed.order.replace(value.into_owned()).is_some(),
                "limit" => {
                    let limit = value.trim().parse::<u32>().map_err(|_| {
                        invalid("limit", format!("`{value}` is not a whole number"))
                    })?;
                    parsed.limit.replace(limit).is_some()
                }
                _ => false,
            };
            if repeated {
                return Err(invalid(&name, format!("`{name}` is given more than once")));
            }
        }
        Ok(parsed)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ListQuery {
    type Rejection = GatewayError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, GatewayError> {
        Self::parse(parts.uri.query())
    }
}

impl ListQuery {
    /// The store's page for this query.
    pub(crate) fn page(self) -> Result<Page, GatewayError> {
        let order = match self.order.as_deref() {
            None | Some("desc") => Order::Desc,
            Some("asc") => Order::Asc,
            Some(other) => {
                return Err(GatewayError::Request(
                    toolbridge_core::Error::InvalidValue {
                        param: "order".to_owned(),
                        message: format!("`{other}` is not asc or desc"),
                    },
                ));
            }
        };
        let limit = self.limit.unwrap_or(20);
        if !(1..=100).contains(&limit) {
            return Err(GatewayError::Request(
                toolbridge_core::Error::InvalidValue {
                    param: "limit".to_owned(),
                    message: format!("{limit} is not between 1 and 100"),
                },
            ));
        }
        Ok(Page {
            after: self.after,
            limit,
            order,
        })
    }
}

/// A list body: `{"object":"list","data",…,"first_id","last_id","has_more"}`.
pub(crate) fn list_body(items: Vec<Value>, has_more: bool) -> Value {
    let id_of = |v: Option<&Value>| v.and_then(|i| i.get("id")).cloned().unwrap_or(Value::Null);
    json!({
        "object": "list",
        "first_id": id_of(items.first()),
        "last_id": id_of(items.last()),
        "has_more": has_more,
        "data": items,
    })
}

/// A store error for a page: an unknown `after` is the client's mistake.
pub(crate) fn page_error(e: toolbridge_store::StoreError) -> GatewayError {
    match e {
        toolbridge_store::StoreError::NotFound(after) => {
            GatewayError::Request(toolbridge_core::Error::InvalidValue {
                param: "after".to_owned(),
                message: format!("`{after}` is not an item of this list"),
            })
        }
        other => GatewayError::Store(other.to_string()),
    }
}

/// `GET /v1/responses/{id}/input_items?after&limit&order`.
pub(crate) async fn input_items(
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: ListQuery,
) -> Response {
    let result = async {
        let tenant = crate::platform::auth::current_tenant();
        let page = query.page()?;
        let page = store(&state, &id)?
            .input_items(&tenant, &id, &page)
            .await
            .map_err(page_error)?
            .ok_or_else(|| GatewayError::ResponseNotFound(id.clone()))?;
        Ok::<_, GatewayError>(Json(list_body(page.items, page.has_more)))
    };
    match result.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST /v1/responses/{id}/cancel`: cancels a response in progress, foreground (streamed or
/// whole) or background. One running here stops at once and stores itself `cancelled`; one
/// running on another process is cancelled in the store, which its end does not undo. A
/// finished background response is answered as it is; a finished foreground one is refused.
pub(crate) async fn cancel(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let result = async {
        let tenant = crate::platform::auth::current_tenant();
        let store = store(&state, &id)?;
        // Only the tenant's own response is cancelled, even by an admin key.
        let current = store
            .get(&tenant.own(), &id)
            .await
            .map_err(|e| GatewayError::Store(e.to_string()))?;
        // Heard by the response's pump at once when it runs here.
        let here = state.in_flight.cancel(&id, tenant.name());
        let current = match (current, here) {
            (Some(current), _) => current,
            // Not in the store yet (a whole answer is stored at its end): the start is the answer.
            (None, Some(here)) => return Ok(Json(here.response)),
            (None, None) => return Err(GatewayError::ResponseNotFound(id.clone())),
        };
        let background = current.response.get("background") == Some(&Value::Bool(true));
        let in_progress = matches!(current.status.as_str(), "queued" | "in_progress");
        if !background && !in_progress {
            return Err(GatewayError::Request(
                toolbridge_core::Error::InvalidValue {
                    param: "id".to_owned(),
                    message: "only a response in progress (or a background one) can be cancelled"
                        .to_owned(),
                },
            ));
        }
        let updated = store
            .cancel(&tenant, &id)
            .await
            .map_err(|e| GatewayError::Store(e.to_string()))?
            .ok_or_else(|| GatewayError::ResponseNotFound(id.clone()))?;
        // Stop the run at once when it runs here; the store already says it is cancelled.
        if let Ok(mut running) = state.running.lock()
            && let Some(handle) = running.remove(&id)
        {
            handle.abort();
        }
        Ok(Json(updated.response))
    };
    match result.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}
