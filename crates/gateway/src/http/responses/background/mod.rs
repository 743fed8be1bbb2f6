//! `background: true`: the request is checked now by the prepare stage (a bad one is still a
//! 400), stored `queued`, answered with that, and run detached through the same stages as any
//! other request (`respond`). The run is `in_progress` while it works and ends `completed`,
//! `incomplete` or `failed`, unless a cancel lands first. Any gateway process can answer polls
//! and cancels: the state is in the store; a cancel also stops the run at once when it lands on
//! the process running it. Not here: polling and cancelling (`crate::http::stored`).

use std::sync::Arc;

use axum::response::Response;
use toolbridge_core::assemble::{ResponseMeta, skeleton};
use toolbridge_wire::responses::{CreateResponse, ResponseStatus};

use super::prepare::check;
use super::stored::persist::Persist;
use super::{BackgroundRun, Caller, respond};
use crate::error::GatewayError;
use crate::platform::auth::Authenticated;
use crate::platform::{ids, time};
use crate::state::AppState;

/// Starts a background run of `req` and answers with its `queued` record.
pub(super) async fn start_background(
    state: &AppState,
    mut req: CreateResponse,
    request_id: &str,
    key: Option<Authenticated>,
) -> Result<Response, GatewayError> {
    let store = admissible(state, &req)?;
    let tenant = crate::platform::auth::tenant_of(key.as_ref());
    check(state, &tenant, &req).await?;
    let run = BackgroundRun {
        id: ids::new("resp"),
        created_at: time::now(),
    };
    let meta = ResponseMeta {
        id: run.id.clone(),
        created_at: run.created_at,
        stored: true,
    };
    let mut queued = skeleton(&req, &meta);
    queued.status = ResponseStatus::Queued;
    let persist = Persist {
        store,
        tenant,
        input_items: Vec::new(),
        expires_at: run.created_at + state.config.store_ttl.as_secs() as i64,
        guarded: true,
        max_bytes: state.config.store_max_bytes,
        keep_response: true,
        conversation: None,
        started: None,
        late: state.late_finals.clone(),
        // The run's history is expanded by the run itself, after this record is written.
        chain: None,
    };
    // The client is told to poll: the queued record must exist first.
    persist
        .save_started(&queued, request_id)
        .await
        .map_err(|e| GatewayError::Store(e.to_string()))?;
    req.stream = Some(false);
    let mut running = queued.clone();
    running.status = ResponseStatus::InProgress;
    spawn(state, req, request_id, run, key, persist, running);
    let body = serde_json::to_vec(&queued).unwrap_or_default();
    Ok(super::emit::json_ok(body))
}

/// The store a background run needs, or why the request cannot run in the background.
fn admissible(
    state: &AppState,
    req: &CreateResponse,
) -> Result<Arc<dyn toolbridge_store::ResponseStore>, GatewayError> {
    let Some(store) = state.store.clone() else {
        return Err(GatewayError::Request(toolbridge_core::Error::Unsupported {
            param: "background".to_owned(),
            message: "background responses need the response store, and storage is off".to_owned(),
        }));
    };
    if req.stream == Some(true) {
        return Err(GatewayError::Request(toolbridge_core::Error::Unsupported {
            param: "stream".to_owned(),
            message:
                "background responses are not streamed by this gateway; poll GET /v1/responses/{id}"
                    .to_owned(),
        }));
    }
    if req.store == Some(false) {
        return Err(GatewayError::Request(
            toolbridge_core::Error::InvalidValue {
                param: "store".to_owned(),
                message: "a background response is stored; `store: false` contradicts it"
                    .to_owned(),
            },
        ));
    }
    Ok(store)
}

/// Runs the request detached, in the request's observation context; a run that fails is stored
/// `failed`. The run's task is kept by id so a cancel on this process stops it.
fn spawn(
    state: &AppState,
    req: CreateResponse,
    request_id: &str,
    run: BackgroundRun,
    key: Option<Authenticated>,
    persist: Persist,
    running: toolbridge_wire::responses::Response,
) {
    let worker_state = state.clone();
    let worker_request = request_id.to_owned();
    let worker_run = run.clone();
    let observed = crate::platform::ops::observe::current();
    let task = tokio::spawn(crate::platform::ops::observe::carry(observed, async move {
        let _ = persist.save_started(&running, &worker_request).await;
        let caller = Caller {
            key: key.clone(),
            session: None,
            framing: super::framing::Framing::Sse,
            signals: crate::config::RouteSignals::default(),
        };
        if let Err(e) = respond(
            &worker_state,
            req,
            &worker_request,
            Some(worker_run.clone()),
            None,
            caller,
        )
        .await
        {
            crate::http::responses::admission::release(&worker_state, key.as_ref()).await;
            tracing::warn!(
                request_id = worker_request,
                code = e.code(),
                "background response failed: {e}"
            );
            let mut failed = running;
            failed.status = ResponseStatus::Failed;
            failed.error = Some(toolbridge_core::assemble::codes::response_error(
                e.code(),
                e.to_string(),
            ));
            let failed = serde_json::to_value(&failed).unwrap_or_default();
            // Logged by the write; a background run has nobody to tell.
            let _ = persist.save(&failed, &worker_request).await;
            if let Some(ctx) = crate::platform::ops::observe::current() {
                ctx.write_capture(Some(&failed), 200).await;
            }
        }
        // A run that ended without a final response still leaves its capture (written once:
        // this does nothing after the response's own write).
        if let Some(ctx) = crate::platform::ops::observe::current() {
            ctx.write_capture(None, 200).await;
        }
        if let Ok(mut running) = worker_state.running.lock() {
            running.remove(&worker_run.id);
        }
    }));
    if let Ok(mut running) = state.running.lock() {
        running.insert(run.id.clone(), task.abort_handle());
        if task.is_finished() {
            running.remove(&run.id);
        }
    }
}
