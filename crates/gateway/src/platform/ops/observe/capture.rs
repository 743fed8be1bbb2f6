//! A request's opt-in capture (`[capture]`): the client's body, every upstream body and the
//! final response, each cut at the configured size, written once to the store under the
//! request's tenant when the answer is over (or with status 499 when its client left).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use toolbridge_store::CaptureStore;
use tracing::Instrument;

use crate::error::GatewayError;

use super::{CTX, Observer, RequestCtx};

/// The capture of a request of `route`, when capture is on for it: the body is read (bounded by
/// the body limit: past it the answer is 413) and handed on with its copy kept.
pub(super) async fn begin(
    state: &Observer,
    route: &str,
    request: Request,
) -> Result<(Request, Option<Capture>), Response> {
    let ops = &state.config.ops;
    let store = match &state.captures {
        Some(store) if ops.capture.enabled && route == "/v1/responses" => store,
        _ => return Ok((request, None)),
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, state.config.body_limit).await else {
        return Err(GatewayError::BodyTooLarge {
            limit: state.config.body_limit,
        }
        .into_response());
    };
    let captured = Parts {
        request: capped(&bytes, ops.capture.max_bytes),
        upstream: Vec::new(),
    };
    let capture = Capture {
        store: store.clone(),
        max_bytes: ops.capture.max_bytes,
        ttl: ops.capture.ttl,
        parts: Mutex::new(captured),
        written: AtomicBool::new(false),
    };
    Ok((Request::from_parts(parts, Body::from(bytes)), Some(capture)))
}

/// Records an upstream request body in the current capture (when capture is on).
pub(crate) fn capture_upstream(provider: &str, payload: &Bytes) {
    let _ = CTX.try_with(|c| {
        if let Some(capture) = &c.capture
            && let Ok(mut parts) = capture.parts.lock()
        {
            let body = capped(payload, capture.max_bytes);
            parts
                .upstream
                .push(json!({"provider": provider, "body": body}));
        }
    });
}

/// One request's capture, while it is served.
pub(super) struct Capture {
    pub(super) store: Arc<dyn CaptureStore>,
    pub(super) max_bytes: usize,
    pub(super) ttl: Duration,
    pub(super) parts: Mutex<Parts>,
    pub(super) written: AtomicBool,
}

#[derive(Default)]
pub(super) struct Parts {
    pub(super) request: Value,
    pub(super) upstream: Vec<Value>,
}

/// A body as JSON when it is JSON and fits `max_bytes`; else its first `max_bytes` as text,
/// marked truncated.
pub(super) fn capped(bytes: &[u8], max_bytes: usize) -> Value {
    if bytes.len() <= max_bytes {
        return serde_json::from_slice(bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()));
    }
    let head = String::from_utf8_lossy(&bytes[..max_bytes]).into_owned();
    json!({"truncated": true, "bytes": bytes.len(), "head": head})
}

impl RequestCtx {
    /// Whether a capture is on for this request and not written yet.
    pub(crate) fn capture_pending(&self) -> bool {
        self.capture
            .as_ref()
            .is_some_and(|c| !c.written.load(Ordering::Relaxed))
    }

    /// Writes the capture with the final response (once; later calls do nothing).
    pub(crate) async fn write_capture(&self, response: Option<&Value>, status: u16) {
        let text = match response {
            Some(r) if self.capture_pending() => serde_json::to_vec(r).ok(),
            _ => None,
        };
        self.write_capture_json(text.as_deref(), status).await;
    }

    /// [`Self::write_capture`] with the final response as its JSON text.
    pub(crate) async fn write_capture_json(&self, response: Option<&[u8]>, status: u16) {
        let Some(capture) = &self.capture else {
            return;
        };
        if capture.written.swap(true, Ordering::Relaxed) {
            return;
        }
        let record = match capture.parts.lock() {
            Ok(parts) => json!({
                "request_id": self.request_id,
                "route": self.route,
                "captured_at": crate::platform::time::now(),
                "status": status,
                "request": parts.request,
                "upstream": parts.upstream,
                "response": response.map(|text| capped(text, capture.max_bytes)),
            }),
            Err(_) => return,
        };
        let now = crate::platform::time::now();
        let expires = now.saturating_add(i64::try_from(capture.ttl.as_secs()).unwrap_or(i64::MAX));
        let tenant = self
            .tenant
            .get()
            .cloned()
            .unwrap_or_else(toolbridge_store::Tenant::open);
        if let Err(e) = capture
            .store
            .put_capture(&tenant, &self.request_id, &record, now, expires)
            .instrument(super::super::telemetry::stage_span!(
                "store",
                what = "capture"
            ))
            .await
        {
            tracing::warn!(
                request_id = self.request_id,
                "cannot store the request capture: {e}"
            );
        }
    }
}
