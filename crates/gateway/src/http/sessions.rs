//! `GET /v1/sessions/{session_id}/events`: a session's events as SSE (`event: <type>`,
//! `data: <json>`), with keep-alive comments every `keepalive_secs`.
//!
//! The subscription is open before the 200 is sent, so a client that has the headers receives
//! every event published after that. The stream ends when the subscriber lags (after the
//! `stream.lagged` marker), when the backend's connection is lost, or when the shutdown grace
//! period runs out.

use std::convert::Infallible;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use toolbridge_wire::error::{ErrorBody, ErrorObject};

use crate::error::ErrorCode;
use crate::platform::sessions::SubscribeError;
use crate::state::AppState;
use axum::Router;
use axum::routing::get;

/// A session events request that failed, in OpenAI's error shape.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(super) struct SessionError(#[from] pub SubscribeError);

impl SessionError {
    pub(super) fn code(&self) -> &'static str {
        match self.0 {
            SubscribeError::InvalidSessionId(_) => "invalid_session_id",
            SubscribeError::TooManySessions(_) => "too_many_sessions",
            SubscribeError::TooManySubscribers(_) => "too_many_subscribers",
            SubscribeError::Unavailable(_) => "session_events_unavailable",
        }
    }

    pub(super) fn status(&self) -> StatusCode {
        match self.0 {
            SubscribeError::InvalidSessionId(_) => StatusCode::BAD_REQUEST,
            SubscribeError::TooManySessions(_)
            | SubscribeError::TooManySubscribers(_)
            | SubscribeError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub(super) fn body(&self) -> ErrorBody {
        let (kind, param) = match self.0 {
            SubscribeError::InvalidSessionId(_) => ("invalid_request_error", Some("session_id")),
            _ => ("server_error", None),
        };
        ErrorBody {
            error: ErrorObject {
                message: self.to_string(),
                kind: kind.to_owned(),
                param: param.map(str::to_owned),
                code: Some(self.code().to_owned()),
            },
        }
    }
}

impl IntoResponse for SessionError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut response = (self.status(), body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
            .extensions_mut()
            .insert(ErrorCode(self.code().to_owned()));
        response
    }
}

/// The session events route.
pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/events", get(events))
}

/// The route's handler.
pub(super) async fn events(
    State(state): State<AppState>,
    session_id: Result<Path<String>, PathRejection>,
) -> Result<Response, SessionError> {
    let Path(session_id) =
        session_id.map_err(|e| SubscribeError::InvalidSessionId(e.body_text()))?;
    // A subscriber sees only its own tenant's sessions: the same session id under another key
    // is another channel.
    let tenant = crate::platform::auth::current_tenant();
    let subscription = state.sessions.subscribe(&tenant, &session_id).await?;
    let mut shutdown = state.shutdown.clone();
    let stopped = async move {
        // A dropped sender means nobody can force a stop: wait forever, not end at once.
        if shutdown.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let frames = subscription
        .take_until(stopped)
        .filter_map(|event| async move {
            match serde_json::to_string(&event) {
                Ok(data) => Some(Ok::<_, Infallible>(
                    Event::default().event(event.kind()).data(data),
                )),
                Err(e) => {
                    tracing::warn!("session event not serialised: {e}");
                    None
                }
            }
        });
    let sse = Sse::new(frames);
    let mut response = match state.config.keepalive {
        Some(every) => sse
            .keep_alive(KeepAlive::new().interval(every).text("keep-alive"))
            .into_response(),
        None => sse.into_response(),
    };
    // Proxies must pass events on as they come.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}
