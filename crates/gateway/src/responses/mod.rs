//! `POST /v1/responses`: parse, normalise, route, translate, send, reconstruct, emit.
//!
//! The handler holds no translation logic: it strings together the pure steps of the core and
//! the provider dialect with the I/O of [`crate::upstream`]. Failures before the upstream
//! accepted the request are HTTP errors in OpenAI's shape; once SSE headers are out, every
//! failure ends the stream with `response.failed` and a specific code.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt, stream};
use tokio::sync::watch;
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, codes, skeleton};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_core::plan::{plan as plan_tools, plan_with};
use toolbridge_core::reasoning::{ReasoningDisplay, open_sealed};
use toolbridge_core::repair::ToolSchemas;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::dialect::{Dialect, Flow, Outgoing, Raw, Source};
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::{CreateResponse, Diagnostic, StreamEvent};

use crate::app::AppState;
use crate::error::GatewayError;
use crate::upstream::{MAX_RESPONSE_BODY, StreamError, read_capped};
use crate::{ids, time};

mod abandoned;
mod chunks;
mod decode;
mod detach;
mod echo;
mod meter;
mod passthrough;
mod persist;
mod repair;
mod sse;
mod sync;
mod tool_loop;

use abandoned::estimate_used;
pub(crate) use decode::decode_whole;
use echo::{EchoRounds, MAX_ECHO_ROUNDS};
use meter::Meter;
use passthrough::Passthrough;
use persist::Persist;
pub(crate) use repair::record_repairs;
use repair::{RepairRounds, Review};
use sse::{Pump, PumpLimits, estimate_missing_usage, stream_response};
pub use sse::{frame, frames};
use sync::{Rounds, sync_response};
use tool_loop::{Continuation, OUT_OF_STEPS, PendingTools, ToolRounds};

/// What the upstream accepted: a stream (its first event already read) or a whole answer.
enum Answer {
    Stream(sse::UpstreamSse),
    Whole(reqwest::Response),
}

/// The header listing the diagnostics known when the answer started.
pub const DIAGNOSTICS_HEADER: &str = "x-toolbridge-diagnostics";

/// Translates the request into `dialect`'s, in the `translate` span: every caller (the first
/// round, the gateway's own rounds, compaction, the CLI's plan and matrix) goes through here.
pub(crate) fn translate(
    dialect: Dialect,
    source: &Source<'_>,
    plan: &toolbridge_core::plan::ToolPlan,
    profile: &Profile,
    upstream_model: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Outgoing {
    let _span = tracing::info_span!("translate", dialect = dialect.as_str()).entered();
    dialect.build(source, plan, profile, upstream_model, diagnostics)
}

/// Whether an `encrypted_content` blob was sealed by this gateway (reasoning of another
/// provider, which a Responses upstream cannot open).
pub(crate) fn sealed_by_gateway(blob: &str) -> bool {
    blob.starts_with(crate::seal::PREFIX)
}

/// The handler.
pub async fn create(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request_id = crate::ops::observe::request_id();
    let started = Instant::now();
    let session = crate::sessions::session_id_from_headers(&headers);
    let mut response = match handle(&state, body, &request_id, session).await {
        Ok(response) => response,
        Err(error) => {
            tracing::info!(
                request_id,
                status = error.status().as_u16(),
                code = error.code(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "request refused: {error}"
            );
            error.into_response()
        }
    };
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    response
}

/// Parses the body, naming the JSON path of the first problem.
pub fn parse_request(bytes: &[u8]) -> Result<CreateResponse, toolbridge_core::Error> {
    let _span = tracing::info_span!("parse").entered();
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

async fn handle(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    request_id: &str,
    session: Option<String>,
) -> Result<Response, GatewayError> {
    let bytes = body.map_err(|rejection| {
        GatewayError::from_body_rejection(&rejection, state.config.body_limit)
    })?;
    let req = parse_request(&bytes)?;
    // The gateway key's scopes (models, tools) and budget.
    let key = crate::auth::admit(state, &req).await?;
    let answer = if req.background == Some(true) {
        start_background(state, req, request_id, key.clone()).await
    } else {
        let caller = Caller {
            key: key.clone(),
            session,
        };
        respond(state, req, request_id, None, Some(&bytes), caller).await
    };
    if answer.is_err() {
        // Refused before any answer went out: nothing was used, the reservation is returned.
        crate::auth::release(state, key.as_ref()).await;
    }
    answer
}

/// Who asked: the gateway key (charged for the tokens) and the session whose side channel
/// shows the response's progress.
#[derive(Clone, Default)]
struct Caller {
    key: Option<crate::auth::Authenticated>,
    session: Option<String>,
}

/// A background run's identity, fixed before it starts.
#[derive(Debug, Clone)]
struct BackgroundRun {
    id: String,
    created_at: i64,
}

/// `background: true`: checks the request now (a bad one is still a 400), stores it `queued`,
/// answers with that, and runs it detached. The run is `in_progress` while it works and ends
/// `completed`, `incomplete` or `failed`, unless a cancel lands first. Any gateway process can
/// answer polls and cancels: the state is in the store; a cancel also stops the run at once when
/// it lands on the process running it.
async fn start_background(
    state: &AppState,
    mut req: CreateResponse,
    request_id: &str,
    key: Option<crate::auth::Authenticated>,
) -> Result<Response, GatewayError> {
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
    let tenant = crate::auth::tenant_of(key.as_ref());
    {
        let mut probe = req.clone();
        crate::history::expand(Some(store.as_ref()), &tenant, &mut probe, false).await?;
        let canonical = normalize(&probe, &Limits::default())?;
        let targets =
            state
                .config
                .targets(&canonical.model)
                .ok_or_else(|| GatewayError::ModelNotFound {
                    model: canonical.model.clone(),
                    known: known_list(state),
                })?;
        if let Some(primary) = targets.first() {
            let profile = primary.provider.profile_for(&primary.upstream_model);
            plan_tools(
                &canonical.tools,
                canonical.tool_choice.as_ref(),
                &profile.tools,
            )?;
        }
    }
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
    queued.status = toolbridge_wire::responses::ResponseStatus::Queued;
    let persist = Persist {
        store: store.clone(),
        tenant,
        input_items: Vec::new(),
        expires_at: run.created_at + state.config.store_ttl.as_secs() as i64,
        guarded: true,
        max_bytes: state.config.store_max_bytes,
        keep_response: true,
        conversation: None,
    };
    // The client is told to poll: the queued record must exist first.
    persist
        .save_started(&queued, request_id)
        .await
        .map_err(|e| GatewayError::Store(e.to_string()))?;

    req.stream = Some(false);
    let worker_state = state.clone();
    let worker_request = request_id.to_owned();
    let worker_run = run.clone();
    let mut running = queued.clone();
    running.status = toolbridge_wire::responses::ResponseStatus::InProgress;
    let observed = crate::ops::observe::current();
    let task = tokio::spawn(crate::ops::observe::carry(observed, async move {
        let _ = persist.save_started(&running, &worker_request).await;
        if let Err(e) = respond(
            &worker_state,
            req,
            &worker_request,
            Some(worker_run.clone()),
            None,
            Caller {
                key: key.clone(),
                session: None,
            },
        )
        .await
        {
            crate::auth::release(&worker_state, key.as_ref()).await;
            tracing::warn!(
                request_id = worker_request,
                code = e.code(),
                "background response failed: {e}"
            );
            let mut failed = running;
            failed.status = toolbridge_wire::responses::ResponseStatus::Failed;
            failed.error = Some(toolbridge_wire::responses::ResponseError {
                code: e.code().to_owned(),
                message: e.to_string(),
            });
            let failed = serde_json::to_value(&failed).unwrap_or_default();
            // Logged by the write; a background run has nobody to tell.
            let _ = persist.save(&failed, &worker_request).await;
            if let Some(ctx) = crate::ops::observe::current() {
                ctx.write_capture(Some(&failed), 200).await;
            }
        }
        // A run that ended without a final response still leaves its capture (written once:
        // this does nothing after the response's own write).
        if let Some(ctx) = crate::ops::observe::current() {
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
    let body = serde_json::to_vec(&queued).unwrap_or_default();
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response())
}

/// Serves one request (not a background start).
async fn respond(
    state: &AppState,
    mut req: CreateResponse,
    request_id: &str,
    run: Option<BackgroundRun>,
    body: Option<&Bytes>,
    caller: Caller,
) -> Result<Response, GatewayError> {
    let stored = run.is_some() || (req.store.unwrap_or(true) && state.store.is_some());
    // A native Responses upstream gets the client's own JSON, not a re-serialisation of it.
    let raw = raw_request(state, &req, body);
    let tenant = crate::auth::tenant_of(caller.key.as_ref());
    let turn_items =
        crate::history::expand(state.store.as_deref(), &tenant, &mut req, stored).await?;
    // The request's own MCP servers the gateway serves, connected and listed once; then the
    // calls the client approved run, before the model's turn.
    let early_targets = match &state.config.gateway_tools {
        Some(_) => req
            .model
            .as_deref()
            .and_then(|m| state.config.targets(m))
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let (listed, mut listings) = connect_request_mcp(state, &req, &early_targets).await;
    listings.extend(resolve_approvals(state, &mut req, &listed).await);
    let listed = Arc::new(listed);
    let mut compaction_diagnostics = Vec::new();
    crate::compact::expand_compactions(
        &mut req,
        state.sealer.as_ref(),
        &mut compaction_diagnostics,
    );
    let mut canonical = normalize(&req, &Limits::default())?;
    canonical.diagnostics.extend(compaction_diagnostics);
    open_sealed(
        &mut canonical.turns,
        state.sealer.as_ref(),
        &mut canonical.diagnostics,
    );
    let targets =
        state
            .config
            .targets(&canonical.model)
            .ok_or_else(|| GatewayError::ModelNotFound {
                model: canonical.model.clone(),
                known: known_list(state),
            })?;
    let display = ReasoningDisplay::for_request(&req);
    // The request's tool checks, compiled once whatever the target (on first need).
    let mut schemas: Option<Arc<ToolSchemas>> = None;
    let mut failures: Vec<String> = Vec::new();
    let mut last_error = None;
    for (i, target) in targets.iter().enumerate() {
        let provider = target.provider;
        let upstream_model = &target.upstream_model;
        let profile = provider.profile_for(upstream_model);
        // The one plan of this request for this provider: the translator and the
        // reconstruction both read it.
        // What the gateway runs itself for this request, if anything.
        let mut offer = state
            .config
            .gateway_tools
            .as_ref()
            .map(|t| t.offer_for(&canonical.model, &canonical.tools, &profile.tools, &listed))
            .unwrap_or_default();
        // A gateway key sees only the gateway tools its scope allows: a search as
        // `web_search`, any other as `mcp:<server label>` (built-ins: `mcp:toolbridge`).
        if let Some(key) = &caller.key {
            offer.tools.retain(|t| {
                if crate::gateway_tools::GatewayTools::is_search(&t.server, &t.name) {
                    key.scopes.allows_tool("web_search", None)
                } else {
                    key.scopes.allows_tool("mcp", Some(&t.server))
                }
            });
        }
        let plan = match tracing::info_span!("plan").in_scope(|| {
            plan_with(
                &canonical.tools,
                canonical.tool_choice.as_ref(),
                &profile.tools,
                &offer,
            )
        }) {
            Ok(plan) => crate::ops::metrics::plan(&provider.name, plan),
            // The primary's refusal is the client's answer; a fallback that cannot take the
            // request is passed over.
            Err(e) if i == 0 => return Err(e.into()),
            Err(e) => {
                failures.push(format!("`{}` cannot take the request ({e})", provider.name));
                continue;
            }
        };
        let mut diagnostics = canonical.diagnostics.clone();
        diagnostics.extend(plan.diagnostics.iter().cloned());
        // A native Responses upstream's calls are relayed as they come, never repaired.
        let repairs = provider.repair.enabled && !provider.dialect.passes_through();
        let repair_checks = repairs.then(|| {
            Arc::clone(schemas.get_or_insert_with(|| state.schema_cache.schemas(&canonical.tools)))
        });
        if let Some(checks) = &repair_checks {
            diagnostics.extend(checks.diagnostics());
        }
        let outgoing = translate(
            provider.dialect,
            &Source {
                req: &req,
                raw: raw.as_ref(),
                canonical: &canonical,
                stored,
                sealed_by_gateway: &sealed_by_gateway,
            },
            &plan,
            &profile,
            upstream_model,
            &mut diagnostics,
        );
        tracing::info!(
            request_id,
            model = canonical.model,
            provider = provider.name,
            upstream_model,
            stream = canonical.stream,
            "forwarding"
        );
        let payload = Bytes::from(outgoing.payload());
        // Kept (shared, not copied) for a usage estimate should the upstream report none.
        let usage_basis = outgoing.estimates_usage().then(|| payload.clone());
        // The provider's own request and token limits: a provider at its limit passes the
        // request to the route's fallbacks.
        if let Err(e) = state.limits.check_upstream(&provider.name).await {
            if i + 1 < targets.len() {
                failures.push(format!("`{}` is at its rate limit", provider.name));
                last_error = Some(e);
                continue;
            }
            return Err(e);
        }
        let sent = match state
            .upstreams
            .send(provider, upstream_model, &payload, outgoing.stream())
            .await
        {
            // Peek before committing: an error as the stream's first event is still an HTTP
            // error, and can still fall back.
            Ok(upstream) if outgoing.stream() => decode::peek(upstream, provider.dialect, &profile)
                .await
                .map(Answer::Stream),
            Ok(upstream) => Ok(Answer::Whole(upstream)),
            Err(e) => Err(e),
        };
        let answer = match sent {
            Ok(answer) => answer,
            Err(e) if e.allows_fallback() && i + 1 < targets.len() => {
                tracing::warn!(
                    request_id,
                    provider = provider.name,
                    code = e.code(),
                    "falling back: {e}"
                );
                failures.push(format!("`{}` failed ({e})", provider.name));
                last_error = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        if !failures.is_empty() {
            diagnostics.push(toolbridge_core::diagnostics::diag(
                toolbridge_core::diagnostics::UPSTREAM_FALLBACK,
                Some("model"),
                format!(
                    "{}; the request was served by `{}` as `{upstream_model}`",
                    failures.join("; "),
                    provider.name
                ),
            ));
        }
        for d in &diagnostics {
            tracing::info!(request_id, code = d.code, param = d.param, "{}", d.message);
        }
        let meta = match &run {
            Some(run) => ResponseMeta {
                id: run.id.clone(),
                created_at: run.created_at,
                stored,
            },
            None => ResponseMeta {
                id: ids::new("resp"),
                created_at: time::now(),
                stored,
            },
        };
        let meter = Meter::start(
            state,
            caller.key.clone(),
            (&provider.name, &canonical.model),
            caller.session.clone(),
            &meta.id,
        );
        let conversation = toolbridge_core::assemble::conversation_id(&req);
        let persist = match &state.store {
            Some(store) if stored || conversation.is_some() => Some(Persist {
                store: store.clone(),
                tenant: tenant.clone(),
                input_items: turn_items.clone(),
                expires_at: meta.created_at + state.config.store_ttl.as_secs() as i64,
                // Every write is guarded: a cancel (of any response in progress) is never undone.
                guarded: true,
                max_bytes: state.config.store_max_bytes,
                keep_response: stored,
                conversation: conversation.clone(),
            }),
            _ => None,
        };
        let header = diagnostics_header(&diagnostics);
        let flight = detach::Flight::start(
            state,
            persist.as_ref().is_some_and(|p| p.keep_response),
            &skeleton(&req, &meta),
            tenant.name().to_owned(),
        );
        let detach = flight.detach(state, persist.is_some());
        if provider.dialect.passes_through() {
            let limits = flight.limits(state, provider);
            let relay = Passthrough {
                skeleton: skeleton(&req, &meta),
                diagnostics,
                persist,
                meter,
                request_id: request_id.to_owned(),
                tolerate_unterminated: profile.tolerate_unterminated,
                registration: flight.registration,
            };
            let mut response = match answer {
                Answer::Stream(upstream) => relay.stream(upstream, limits, detach).await,
                Answer::Whole(upstream) => relay.whole(upstream, flight.cancel.subscribe()).await?,
            };
            if let Some(v) = header.and_then(|h| HeaderValue::from_str(&h).ok()) {
                response.headers_mut().insert(DIAGNOSTICS_HEADER, v);
            }
            return Ok(response);
        }
        // Provider builtin calls answered by echoing them back (Kimi's `$web_search`) are a
        // Chat round trip; for other dialects such calls stay ordinary function calls.
        let (echo_tools, echo) = if !plan.echo_tools.is_empty() && outgoing.echoes_builtins() {
            (
                plan.echo_tools.clone(),
                Some(EchoRounds {
                    upstreams: state.upstreams.clone(),
                    provider: provider.clone(),
                    upstream_model: upstream_model.clone(),
                    outgoing,
                    left: MAX_ECHO_ROUNDS,
                }),
            )
        } else {
            (Vec::new(), None)
        };
        let tools = match &state.config.gateway_tools {
            Some(tools) if !offer.tools.is_empty() => Some(ToolRounds {
                tools: tools.clone(),
                steps_left: tools.limits.max_steps,
                calls_left: req.max_tool_calls,
                deadline: tokio::time::Instant::now() + tools.limits.time_budget,
                meter: meter.clone(),
                step: 0,
                listed: listed.clone(),
            }),
            _ => None,
        };
        let repair = repair_checks
            .is_some()
            .then(|| RepairRounds::new(provider.repair));
        // Rounds of the gateway's own (the tool loop, a re-ask) continue the same conversation.
        let reasks = repairs && provider.repair.invalid_calls == crate::config::InvalidCalls::Reask;
        let continuation = (tools.is_some() || reasks).then(|| Continuation {
            upstreams: state.upstreams.clone(),
            provider: provider.clone(),
            profile: profile.clone(),
            upstream_model: upstream_model.clone(),
            req: req.clone(),
            canonical: canonical.clone(),
            plan: plan.clone(),
        });
        let assembler = Assembler::new(
            skeleton(&req, &meta),
            AssembleOptions {
                contract: canonical.output.clone(),
                diagnostics,
                names: Arc::new(plan.names),
                reasoning: display,
                sealer: Some(state.sealer.clone()),
                echo_tools,
                repair: repair_checks,
            },
        );
        // Listings of the request's MCP servers come first in the output.
        let prelude: Vec<toolbridge_wire::responses::OutputItem> = if listed_shown(state) {
            listings.clone()
        } else {
            Vec::new()
        };
        let mut assembler = assembler;
        let mut response = match answer {
            Answer::Stream(upstream) => {
                let decoder = decode::decoder(provider.dialect, &profile).ok_or_else(|| {
                    GatewayError::UpstreamUnreachable(format!(
                        "the {} dialect has no stream decoder",
                        provider.dialect.as_str()
                    ))
                })?;
                if let Some(persist) = &persist {
                    let _ = persist
                        .save_started(&assembler.snapshot(), request_id)
                        .await;
                }
                let limits = flight.limits(state, provider);
                let pump = Pump {
                    upstream,
                    decoder,
                    profile,
                    assembler: Some(assembler),
                    limits,
                    usage_basis,
                    echo,
                    tools,
                    continuation,
                    repair,
                    provider_name: provider.name.clone(),
                    upstream_model: upstream_model.clone(),
                    pending_tools: None,
                    prelude,
                    meter: Some(meter),
                    persist,
                    final_response: None,
                    terminal: None,
                    used: None,
                    pending: Vec::new(),
                    diagnostics: Vec::new(),
                    request_id: request_id.to_owned(),
                    _registration: flight.registration,
                };
                stream_response(pump, detach)
            }
            Answer::Whole(upstream) => {
                for item in prelude {
                    assembler.gateway_item(item, &mut Vec::new());
                }
                let mut cancelled = skeleton(&req, &meta);
                let mut cancel = flight.cancel.subscribe();
                // A cancel ends the answer at once (the upstream request is dropped).
                let response = tokio::select! {
                    biased;
                    () = sse::wait_for(&mut cancel) => {
                        cancelled.status = toolbridge_wire::responses::ResponseStatus::Cancelled;
                        cancelled
                    }
                    response = sync_response(
                        upstream,
                        assembler,
                        provider.dialect,
                        &profile,
                        usage_basis,
                        Rounds {
                            echo,
                            tools,
                            continuation,
                            repair,
                        },
                    ) => response?,
                };
                record_repairs(
                    &provider.name,
                    upstream_model,
                    &response.toolbridge_diagnostics,
                );
                let mut response = response;
                let mut stored = serde_json::to_value(&response).unwrap_or_default();
                if let Some(persist) = persist
                    && let Err(unsaved) = persist.save(&stored, request_id).await
                {
                    unsaved.mark(&mut response);
                    stored = serde_json::to_value(&response).unwrap_or_default();
                }
                meter.finish(&stored).await;
                let body = serde_json::to_vec(&response).unwrap_or_default();
                (
                    StatusCode::OK,
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    )],
                    body,
                )
                    .into_response()
            }
        };
        if let Some(v) = header.and_then(|h| HeaderValue::from_str(&h).ok()) {
            response.headers_mut().insert(DIAGNOSTICS_HEADER, v);
        }
        return Ok(response);
    }
    Err(last_error.unwrap_or_else(|| {
        GatewayError::UpstreamUnreachable(format!(
            "no provider could take the request: {}",
            failures.join("; ")
        ))
    }))
}

/// Whether gateway-run tools are shown as hosted items.
fn listed_shown(state: &AppState) -> bool {
    state.config.gateway_tools.as_ref().is_some_and(|t| t.show)
}

/// Runs the calls the client approved: each `mcp_approval_response` with its
/// `mcp_approval_request` earlier in the input becomes one `mcp_call` item there (the call and
/// its result, for the model), and a call that ran is shown in this response's output. A refusal
/// becomes a failed call whose error tells the model not to try again without asking.
async fn resolve_approvals(
    state: &AppState,
    req: &mut CreateResponse,
    listed: &[crate::gateway_tools::McpServer],
) -> Vec<toolbridge_wire::responses::OutputItem> {
    use toolbridge_wire::responses::{Input, InputItem, McpCallItem, OutputItem};
    let (Some(tools), Some(Input::Items(items))) = (&state.config.gateway_tools, &mut req.input)
    else {
        return Vec::new();
    };
    let answers: Vec<(usize, toolbridge_wire::responses::McpApprovalResponseItem)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            InputItem::McpApprovalResponse(answer) => Some((i, answer.clone())),
            _ => None,
        })
        .collect();
    let mut shown = Vec::new();
    let mut answered = Vec::new();
    for (at, answer) in answers {
        let Some(asked_at) = items.iter().position(|item| {
            matches!(item, InputItem::McpApprovalRequest(r) if r.id == answer.approval_request_id)
        }) else {
            continue;
        };
        let InputItem::McpApprovalRequest(request) = items[asked_at].clone() else {
            continue;
        };
        let (output, error) = if answer.approve {
            match tools
                .run(
                    &request.server_label,
                    &request.name,
                    &request.arguments,
                    tools.limits.tool_timeout,
                    listed,
                )
                .await
            {
                Ok(output) => (Some(output), None),
                Err(error) => (None, Some(error)),
            }
        } else {
            let why = answer
                .reason
                .clone()
                .unwrap_or_else(|| "the user did not approve this call".to_owned());
            (
                None,
                Some(crate::gateway_tools::error_result(
                    "approval_denied",
                    &format!("{why}; do not call it again without asking"),
                )),
            )
        };
        let call = McpCallItem {
            id: ids::new("mcp"),
            server_label: request.server_label.clone(),
            name: request.name.clone(),
            arguments: request.arguments.clone(),
            status: Some(
                if output.is_some() {
                    "completed"
                } else {
                    "failed"
                }
                .to_owned(),
            ),
            output,
            error,
            approval_request_id: Some(request.id.clone()),
        };
        items[asked_at] = InputItem::McpCall(call.clone());
        answered.push(at);
        if answer.approve {
            shown.push(OutputItem::McpCall(call));
        }
    }
    for at in answered.into_iter().rev() {
        items.remove(at);
    }
    shown
}

/// Connects the request's own `mcp` tools the gateway serves (when `request_mcp` is on and the
/// primary provider has no MCP of its own): the servers listed, and an `mcp_list_tools` item
/// for each (with its error when it could not be listed).
async fn connect_request_mcp(
    state: &AppState,
    req: &CreateResponse,
    targets: &[crate::config::Target<'_>],
) -> (
    Vec<crate::gateway_tools::McpServer>,
    Vec<toolbridge_wire::responses::OutputItem>,
) {
    let (Some(tools), Some(primary)) = (&state.config.gateway_tools, targets.first()) else {
        return (Vec::new(), Vec::new());
    };
    if primary.provider.profile.tools.mcp.is_some() {
        return (Vec::new(), Vec::new());
    }
    let mut servers = Vec::new();
    let mut listings = Vec::new();
    for tool in req.tools.iter().flatten() {
        let toolbridge_wire::responses::Tool::Other(map) = tool else {
            continue;
        };
        if map.get("type").and_then(|t| t.as_str()) != Some("mcp") {
            continue;
        }
        let Some(result) = tools.connect_request_tool(map).await else {
            continue;
        };
        let label = map
            .get("server_label")
            .and_then(|l| l.as_str())
            .unwrap_or_default()
            .to_owned();
        let (listing, error) = match result {
            Ok(server) => {
                let listing = server.listing();
                servers.push(server);
                (listing, None)
            }
            Err(e) => {
                tracing::warn!(
                    server = label,
                    "a request's MCP server could not be listed: {e}"
                );
                (Vec::new(), Some(e))
            }
        };
        listings.push(toolbridge_wire::responses::OutputItem::McpListTools(
            toolbridge_wire::responses::McpListToolsItem {
                id: ids::new("mcpl"),
                server_label: label,
                tools: listing,
                error,
            },
        ));
    }
    (servers, listings)
}

/// The client's JSON, parsed again only when the model routes to a Responses upstream.
fn raw_request(state: &AppState, req: &CreateResponse, body: Option<&Bytes>) -> Option<Raw> {
    let body = body?;
    let model = req.model.as_deref()?;
    let targets = state.config.targets(model)?;
    if !targets.iter().any(|t| t.provider.dialect.passes_through()) {
        return None;
    }
    let serde_json::Value::Object(request) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    Some(Raw::new(request))
}

fn known_list(state: &AppState) -> String {
    let known: Vec<String> = state
        .config
        .known_models()
        .into_iter()
        .map(|m| m.id)
        .collect();
    if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    }
}

/// `code` or `code:param` for each diagnostic, comma-separated; `None` when there are none.
pub fn diagnostics_header(diagnostics: &[Diagnostic]) -> Option<String> {
    if diagnostics.is_empty() {
        return None;
    }
    let parts: Vec<String> = diagnostics
        .iter()
        .map(|d| match &d.param {
            Some(p) => format!("{}:{p}", d.code),
            None => d.code.clone(),
        })
        .collect();
    Some(parts.join(","))
}
