//! The console at `/console` (served only when `[console] enabled`): what the gateway decided,
//! for a person. Server-rendered pages (`pages`, `sessions`, `providers`, laid out by `layout`,
//! charts drawn as inline SVG by `charts`), each with its JSON twin under `/console/api/`, all
//! built into the binary: nothing is fetched at run time.
//!
//! - Requests: the journal's latest model requests (`platform::ops::journal`), filtered by key,
//!   model and status; one request's plan, diagnostics, restored items, translated upstream
//!   body, and the client's request from its capture when capture is on.
//! - Sessions: the prompt-cache ledger's sessions (`toolbridge_store::CacheLedger`), each turn's
//!   cached share, tokens and cost (`[console.prices]`).
//! - Providers: each configured provider's capability matrix (`toolbridge providers`) and its
//!   health over the journal's requests.
//!
//! Who sees what: the key presented (`Authorization: Bearer`, or the `toolbridge_console`
//! cookie the login form sets: HttpOnly, SameSite=Strict, scoped to `/console`) is resolved like
//! an API key; a tenant's key sees its tenant's requests and sessions only, an admin key every
//! tenant's; on a gateway without keys, everything is the open tenant's. A page asked for
//! without a usable key goes to the login form; a JSON endpoint answers 401 in OpenAI's shape.

mod charts;
mod layout;
mod pages;
mod providers;
mod sessions;

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use toolbridge_store::Tenant;

use crate::error::GatewayError;
use crate::platform::ops::journal::Entry;
use crate::state::AppState;

/// The cookie holding the console key.
const COOKIE: &str = "toolbridge_console";
/// The most requests one list shows.
const LISTED: usize = 200;

/// The console's routes; empty when the console is off.
pub(super) fn router(state: &AppState) -> Router<AppState> {
    if !state.config.console.enabled {
        return Router::new();
    }
    Router::new()
        .route("/console", get(pages::requests))
        .route("/console/requests/{id}", get(pages::request))
        .route("/console/sessions", get(sessions::list))
        .route("/console/sessions/{id}", get(sessions::one))
        .route("/console/providers", get(providers::page))
        .route("/console/login", get(login_form).post(login))
        .route("/console/logout", axum::routing::post(logout))
        .route("/console/api/requests", get(api_requests))
        .route("/console/api/requests/{id}", get(api_request))
        .route("/console/api/sessions", get(sessions::api_list))
        .route("/console/api/sessions/{id}", get(sessions::api_one))
        .route("/console/api/providers", get(providers::api))
}

/// Who is looking: the tenant whose objects they see.
pub(super) struct Viewer {
    pub tenant: Tenant,
    /// The key's id; `None` on a gateway without keys.
    pub key_id: Option<String>,
}

impl Viewer {
    /// What the page header says of the viewer.
    fn describe(&self) -> String {
        match (&self.key_id, self.tenant.reads_all()) {
            (Some(key), true) => format!("{key} (admin: every tenant)"),
            (Some(key), false) => format!("{key} (tenant {})", self.tenant.name()),
            (None, _) => "open gateway".to_owned(),
        }
    }
}

/// The viewer of a console request, from its bearer key or its cookie.
pub(super) async fn viewer(state: &AppState, headers: &HeaderMap) -> Result<Viewer, GatewayError> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(super::bearer_token);
    let from_cookie = cookie(headers);
    let secret = bearer.or(from_cookie.as_deref());
    let auth = state.keys.resolve(secret).await?;
    Ok(match auth {
        Some(auth) => Viewer {
            tenant: auth.tenant,
            key_id: Some(auth.key_id),
        },
        None => Viewer {
            tenant: Tenant::open(),
            key_id: None,
        },
    })
}

/// The key the console cookie holds (hex, so that any key fits a cookie), if the request
/// carries it.
fn cookie(headers: &HeaderMap) -> Option<String> {
    let value = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())?;
    let bytes = hex::decode(value).ok()?;
    String::from_utf8(bytes).ok().filter(|k| !k.is_empty())
}

/// A page's answer: the page, or the login form when the viewer has no usable key.
pub(super) fn page(result: Result<maud::Markup, GatewayError>) -> Response {
    match result {
        Ok(markup) => html(StatusCode::OK, markup),
        Err(GatewayError::Unauthorized) => Redirect::to("/console/login").into_response(),
        Err(e) => html(e.status(), layout::error_page(&e)),
    }
}

pub(super) fn html(status: StatusCode, markup: maud::Markup) -> Response {
    let mut response = (status, markup.into_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // Nothing is loaded from elsewhere, and no other site may frame the console.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'",
        ),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The request list's filters (`?key=…&model=…&status=…`).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filters {
    pub key: Option<String>,
    pub model: Option<String>,
    /// An HTTP status (`400`), or a response status (`completed`, `failed`, …).
    pub status: Option<String>,
    /// `1`: the list reloads itself every 5 s.
    pub live: Option<String>,
}

impl Filters {
    fn given(value: Option<&String>) -> Option<&str> {
        value.map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    pub(super) fn keeps(&self, entry: &Entry) -> bool {
        let key = Self::given(self.key.as_ref());
        let model = Self::given(self.model.as_ref());
        let status = Self::given(self.status.as_ref());
        key.is_none_or(|k| entry.key_id.as_deref() == Some(k))
            && model.is_none_or(|m| entry.model == m || entry.upstream_model.as_deref() == Some(m))
            && status.is_none_or(|s| match s.parse::<u16>() {
                Ok(code) => entry.http_status == code,
                Err(_) => entry.status.as_deref() == Some(s),
            })
    }
}

/// The journal's entries the viewer may see, newest first, filtered.
pub(super) fn listed(
    state: &AppState,
    viewer: &Viewer,
    filters: &Filters,
) -> Vec<std::sync::Arc<Entry>> {
    match &state.journal {
        Some(journal) => journal.list(&viewer.tenant, LISTED, |e| filters.keeps(e)),
        None => Vec::new(),
    }
}

/// One journal entry the viewer may see, or 404.
pub(super) fn entry(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
) -> Result<std::sync::Arc<Entry>, GatewayError> {
    state
        .journal
        .as_ref()
        .and_then(|j| j.get(&viewer.tenant, id))
        .ok_or_else(|| GatewayError::JournalRequestNotFound(id.to_owned()))
}

/// `GET /console/api/requests`.
async fn api_requests(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(filters): Query<Filters>,
) -> Response {
    match viewer(&state, &headers).await {
        Ok(viewer) => axum::Json(listed(&state, &viewer, &filters)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /console/api/requests/{id}`: the entry with its translated upstream body and, when
/// capture kept it, the client's request.
async fn api_request(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let result = async {
        let viewer = viewer(&state, &headers).await?;
        let entry = entry(&state, &viewer, &id)?;
        let captured = pages::captured(&state, &viewer, &id).await;
        let mut body = serde_json::to_value(&*entry).unwrap_or_default();
        body["upstream_body"] = pages::upstream_json(&entry);
        body["client_request"] = captured
            .as_ref()
            .map_or(serde_json::Value::Null, |c| c["request"].clone());
        Ok::<_, GatewayError>(axum::Json(body))
    };
    match result.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /console/login`.
async fn login_form() -> Response {
    html(StatusCode::OK, layout::login_page(None))
}

#[derive(Deserialize)]
struct Login {
    key: String,
}

/// `POST /console/login`: a key that resolves sets the cookie; another is refused (401).
async fn login(State(state): State<AppState>, Form(form): Form<Login>) -> Response {
    let key = form.key.trim();
    match state.keys.resolve(Some(key)).await {
        Ok(Some(_)) => {
            let mut response = Redirect::to("/console").into_response();
            let cookie = format!(
                "{COOKIE}={}; Path=/console; HttpOnly; SameSite=Strict; Max-Age=43200",
                hex::encode(key)
            );
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Ok(None) => Redirect::to("/console").into_response(),
        Err(_) => html(
            StatusCode::UNAUTHORIZED,
            layout::login_page(Some("That key is unknown or revoked.")),
        ),
    }
}

/// `POST /console/logout`: the cookie is cleared.
async fn logout() -> Response {
    let mut response = Redirect::to("/console/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "toolbridge_console=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    response
}
