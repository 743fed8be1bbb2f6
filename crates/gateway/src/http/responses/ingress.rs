//! The ingress stage: the body parsed (naming the JSON path of the first problem), the gateway
//! key admitted (scopes and budget), and a background request split off to `background`. Not
//! here: anything that reads the store or the route (`prepare`).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::response::Response;
use toolbridge_wire::responses::CreateResponse;

use super::background::start_background;
use super::{Caller, respond};
use crate::error::GatewayError;
use crate::state::AppState;

/// Parses the body, naming the JSON path of the first problem.
pub fn parse_request(bytes: &[u8]) -> Result<CreateResponse, toolbridge_core::Error> {
    let _span = crate::platform::ops::telemetry::stage_span!("parse").entered();
    // The fast path: a plain parse. Only a body that fails is parsed again with path tracking,
    // which costs about a third more on a large request.
    if let Ok(req) = serde_json::from_slice::<CreateResponse>(bytes) {
        return Ok(req);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed: Result<CreateResponse, _> = serde_path_to_error::deserialize(&mut de);
    let req = parsed.map_err(|e| {
        let path = e.path().to_string();
        // The whole path to the leaf field, and serde's words made plain (no Rust type names).
        let (param, inner) = toolbridge_wire::inbound::explain(&path, &e.into_inner().to_string());
        let message = match &param {
            Some(p) => format!("invalid request body at `{p}`: {inner}"),
            None => format!("the request body is not valid JSON: {inner}"),
        };
        toolbridge_core::Error::InvalidJson { param, message }
    })?;
    de.end().map_err(|e| toolbridge_core::Error::InvalidJson {
        param: None,
        message: format!("the request body has trailing data: {e}"),
    })?;
    Ok(req)
}

/// Parses and admits the request, then serves it (or starts it in the background). A request
/// refused before any answer went out returns the key's reservation.
pub(super) async fn ingress(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    request_id: &str,
    session: Option<String>,
    signals: crate::config::RouteSignals,
) -> Result<Response, GatewayError> {
    let bytes = body.map_err(|rejection| {
        GatewayError::from_body_rejection(&rejection, state.config.body_limit)
    })?;
    let req = parse_request(&bytes)?;
    // The gateway key's scopes (models, tools) and budget.
    let key = crate::http::responses::admission::admit(state, &req).await?;
    let answer = if req.background == Some(true) {
        // Boxed: the future of a background start should not make every request's larger.
        Box::pin(start_background(state, req, request_id, key.clone())).await
    } else {
        let caller = Caller {
            key: key.clone(),
            session,
            framing: super::transport::Framing::Sse,
            signals,
        };
        respond(state, req, request_id, None, Some(&bytes), caller).await
    };
    if answer.is_err() {
        // Refused before any answer went out: nothing was used, the reservation is returned.
        crate::http::responses::admission::release(state, key.as_ref()).await;
    }
    answer
}
