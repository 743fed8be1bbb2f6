//! The ingress stage: the body parsed (naming the JSON path of the first problem), the gateway key
//! admitted (scopes and budget: `admission`), and a background request split off to `background`.
//! A session's whole history resent over HTTP is parsed for what it adds (`resent`).
//! Not here: anything that reads the store or the route (`prepare`).

pub(crate) mod resent;

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
    // which costs about a third more on a large request. The body is checked as UTF-8 once, up
    // front: read from bytes, serde_json checks every string it reads and every raw value it
    // keeps (the schemas, the long texts) on its own, a second pass over most of the body.
    if let Ok(text) = std::str::from_utf8(bytes)
        && let Ok(req) = serde_json::from_str::<CreateResponse>(text)
    {
        refuse_duplicate_keys(text)?;
        return checked(req);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed: Result<CreateResponse, _> = serde_path_to_error::deserialize(&mut de);
    let req = parsed.map_err(invalid_json)?;
    de.end().map_err(|e| toolbridge_core::Error::InvalidJson {
        param: None,
        message: format!("the request body has trailing data: {e}"),
    })?;
    if std::str::from_utf8(bytes).is_err() {
        // serde_json checks the UTF-8 of every string it reads, not of one it skips (a field
        // the typed request drops, such as an unknown key of a custom tool's `format`): such a
        // body parsed, though it is not JSON. Read as plain JSON, its place is named.
        let mut de = serde_json::Deserializer::from_slice(bytes);
        return Err(
            match serde_path_to_error::deserialize::<_, serde_json::Value>(&mut de) {
                Err(e) => invalid_json(e),
                Ok(_) => toolbridge_core::Error::InvalidJson {
                    param: None,
                    message: "the request body is not valid UTF-8".to_owned(),
                },
            },
        );
    }
    refuse_duplicate_keys(&String::from_utf8_lossy(bytes))?;
    checked(req)
}

/// A body that did not parse, with the whole path to the leaf field at fault and serde's words
/// made plain (no Rust type names).
fn invalid_json(e: serde_path_to_error::Error<serde_json::Error>) -> toolbridge_core::Error {
    let path = e.path().to_string();
    let (param, inner) = toolbridge_wire::inbound::explain(&path, &e.into_inner().to_string());
    let message = match &param {
        Some(p) => format!("invalid request body at `{p}`: {inner}"),
        None => format!("the request body is not valid JSON: {inner}"),
    };
    toolbridge_core::Error::InvalidJson { param, message }
}

/// The bounds of what a parsed request carries into the store and back out on every read
/// (`metadata`), checked before anything else looks at it: a background request is stored
/// before its normalisation.
fn checked(req: CreateResponse) -> Result<CreateResponse, toolbridge_core::Error> {
    if let Some(metadata) = &req.metadata {
        toolbridge_core::request::check_metadata(metadata)?;
    }
    Ok(req)
}

/// Refuses a body with a key repeated in any object, naming its path. The typed parse refuses
/// a named field given twice; a key it keeps whole (`extra`, `metadata`, an unknown item) would
/// otherwise keep its last value silently (`wire::inbound::duplicate_key`).
pub(crate) fn refuse_duplicate_keys(text: &str) -> Result<(), toolbridge_core::Error> {
    match toolbridge_wire::inbound::duplicate_key(text) {
        None => Ok(()),
        Some((path, key)) => Err(toolbridge_core::Error::InvalidJson {
            message: format!("invalid request body at `{path}`: duplicate field `{key}`"),
            param: Some(path),
        }),
    }
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
    let tenant = crate::platform::auth::current_tenant();
    let req = state
        .resent_inputs
        .parse(&tenant, session.as_deref(), &bytes)?;
    // The gateway key's scopes (models, tools) and budget.
    let key = super::admission::admit(state, &req).await?;
    let answer = if req.background == Some(true) {
        // Boxed: the future of a background start should not make every request's larger.
        Box::pin(start_background(state, req, request_id, key.clone())).await
    } else {
        let caller = Caller {
            key: key.clone(),
            session,
            framing: super::framing::Framing::Sse,
            signals,
        };
        respond(state, req, request_id, None, Some(&bytes), caller).await
    };
    if answer.is_err() {
        // Refused before any answer went out: nothing was used, the reservation is returned.
        super::admission::release(state, key.as_ref()).await;
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::parse_request;

    /// A body that is not UTF-8, or not a request, is refused with its place named, as before
    /// the body was checked as UTF-8 up front; a valid one reads the same from either path.
    #[test]
    fn a_body_is_read_once_and_refused_with_its_place() {
        let text = r#"{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"é \"a\"\n"}]}]}"#;
        let req = parse_request(text.as_bytes()).unwrap();
        assert_eq!(req.model.as_deref(), Some("m"));
        let mut bytes = text.as_bytes().to_vec();
        // A lone continuation byte inside the text.
        let at = text.find('é').unwrap();
        bytes[at] = 0x80;
        let e = parse_request(&bytes).unwrap_err();
        assert_eq!(e.code(), "invalid_json");
        assert!(e.to_string().contains("input[0].content[0].text"), "{e}");
        let e = parse_request(br#"{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":7}]}]}"#)
            .unwrap_err();
        assert!(
            e.to_string().contains(
                "`input[0].content[0].text`: invalid type: integer `7`, expected a string"
            ),
            "{e}"
        );
    }

    /// Found by the inbound fuzz target (`tests/fuzz_inbound.rs`): a byte that is not UTF-8
    /// inside a string the typed request skips (an unknown key of a custom tool's `format`)
    /// was not checked, and the body, which is not JSON, was accepted.
    #[test]
    fn a_body_not_utf8_in_a_skipped_field_is_refused_with_its_place() {
        let body = b"{\"tools\":[{\"type\":\"custom\",\"name\":\"shell\",\"format\":{\"type\":\"grammar\",\"syntax\":\"lark\",\"definition\":\"start: WORD\",\"id\":[\"\xff\"]}}]}";
        let e = parse_request(body).unwrap_err();
        assert_eq!(e.code(), "invalid_json");
        assert_eq!(e.param(), Some("tools[0].format.id[0]"), "{e}");
    }
}
