//! Every error answer is OpenAI's JSON: the answers the router makes by itself (405 for a
//! method a route does not take, an extractor's rejection, anything else without a body of
//! ours) are rewritten here into `{"error":{"message","type","param","code"}}`.
//!
//! Our own errors carry an [`ErrorCode`] in their extensions and pass untouched, as does any
//! JSON answer. The rewritten message is ours, never axum's text, which can name Rust types.
//! Not here: errors hyper answers before a request reaches the router (a request line it
//! cannot parse), which it closes the connection on.

use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ErrorCode, GatewayError};

/// The middleware's work: `next` answers `request`, and an error answer not in OpenAI's shape
/// is rewritten (`body_limit` names the limit in a 413's message). See the module
/// documentation.
pub(crate) async fn json_errors(body_limit: usize, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if status < 400 || is_json || response.extensions().get::<ErrorCode>().is_some() {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let error = match status {
        405 => GatewayError::MethodNotAllowed {
            method,
            path,
            allowed: allow
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_owned),
        },
        404 => GatewayError::RouteNotFound(format!("{method} {path}")),
        413 => GatewayError::BodyTooLarge { limit: body_limit },
        other => GatewayError::Rejected(other),
    };
    let mut answer = error.into_response();
    if let Some(allow) = allow {
        answer.headers_mut().insert(header::ALLOW, allow);
    }
    answer
}
