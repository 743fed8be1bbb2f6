//! `POST /v1/responses`: parse, normalise, route, translate, send, reconstruct, emit.
//!
//! The handler holds no translation logic: it strings together the pure steps of the core and
//! the provider dialect with the I/O of [`crate::upstream`]. Failures before the upstream
//! accepted the request are HTTP errors in OpenAI's shape; once SSE headers are out, every
//! failure ends the stream with `response.failed` and a specific code.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt, stream};
use sse_stream::SseByteStream;
use tokio::sync::watch;
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_core::plan::plan as plan_tools;
use toolbridge_core::reasoning::{ReasoningDisplay, open_sealed};
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::chat::stream::{ChunkDecoder, Flow};
use toolbridge_providers::chat::{errors, request as chat_request, response as chat_response};
use toolbridge_providers::profile::Profile;
use toolbridge_wire::chat::ChatResponse;
use toolbridge_wire::responses::{CreateResponse, Diagnostic, StreamEvent};

use crate::app::AppState;
use crate::error::GatewayError;
use crate::upstream::{MAX_RESPONSE_BODY, StreamError, bounded_bytes, read_capped};
use crate::{ids, time};

/// The header listing the diagnostics known when the answer started.
pub const DIAGNOSTICS_HEADER: &str = "x-toolbridge-diagnostics";

/// The handler.
pub async fn create(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request_id = ids::new("req");
    let started = Instant::now();
    let mut response = match handle(&state, body, &request_id).await {
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
    // The fast path: a plain parse. Only a body that fails is parsed again with path tracking,
    // which costs about a third more on a large request.
    if let Ok(req) = serde_json::from_slice::<CreateResponse>(bytes) {
        return Ok(req);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed: Result<CreateResponse, _> = serde_path_to_error::deserialize(&mut de);
    let req = parsed.map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let param = (path != "." && path != "?" && !path.is_empty()).then_some(path);
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
) -> Result<Response, GatewayError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            GatewayError::BodyTooLarge {
                limit: state.config.body_limit,
            }
        } else {
            GatewayError::BodyUnreadable(rejection.body_text())
        }
    })?;
    let req = parse_request(&bytes)?;
    if req.background == Some(true) {
        return start_background(state, req, request_id).await;
    }
    respond(state, req, request_id, None).await
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
    {
        let mut probe = req.clone();
        crate::history::expand(Some(store.as_ref()), &mut probe, false).await?;
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
        input_items: Vec::new(),
        expires_at: run.created_at + state.config.store_ttl.as_secs() as i64,
        guarded: true,
        max_bytes: state.config.store_max_bytes,
        keep_response: true,
        conversation: None,
    };
    persist.save_started(&queued, request_id).await;

    req.stream = Some(false);
    let worker_state = state.clone();
    let worker_request = request_id.to_owned();
    let worker_run = run.clone();
    let mut running = queued.clone();
    running.status = toolbridge_wire::responses::ResponseStatus::InProgress;
    let task = tokio::spawn(async move {
        persist.save_started(&running, &worker_request).await;
        if let Err(e) = respond(
            &worker_state,
            req,
            &worker_request,
            Some(worker_run.clone()),
        )
        .await
        {
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
            persist.save(&failed, &worker_request).await;
        }
        if let Ok(mut running) = worker_state.running.lock() {
            running.remove(&worker_run.id);
        }
    });
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
) -> Result<Response, GatewayError> {
    let stored = run.is_some() || (req.store.unwrap_or(true) && state.store.is_some());
    let turn_items = crate::history::expand(state.store.as_deref(), &mut req, stored).await?;
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
    let mut failures: Vec<String> = Vec::new();
    let mut last_error = None;
    for (i, target) in targets.iter().enumerate() {
        let provider = target.provider;
        let upstream_model = &target.upstream_model;
        let profile = provider.profile_for(upstream_model);
        // The one plan of this request for this provider: the translator and the
        // reconstruction both read it.
        let plan = match plan_tools(
            &canonical.tools,
            canonical.tool_choice.as_ref(),
            &profile.tools,
        ) {
            Ok(plan) => plan,
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
        let chat = chat_request::build(
            &canonical,
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
        // Kept (shared, not copied) for a usage estimate should the upstream report none.
        let payload = Bytes::from(serde_json::to_vec(&chat).unwrap_or_default());
        let upstream = match state
            .upstreams
            .send_chat(provider, &payload, chat.stream)
            .await
        {
            Ok(upstream) => upstream,
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
        let conversation = toolbridge_core::assemble::conversation_id(&req);
        let persist = match &state.store {
            Some(store) if stored || conversation.is_some() => Some(Persist {
                store: store.clone(),
                input_items: turn_items.clone(),
                expires_at: meta.created_at + state.config.store_ttl.as_secs() as i64,
                guarded: run.is_some(),
                max_bytes: state.config.store_max_bytes,
                keep_response: stored,
                conversation: conversation.clone(),
            }),
            _ => None,
        };
        let header = diagnostics_header(&diagnostics);
        let echo_tools = plan.echo_tools.clone();
        let echo = (!echo_tools.is_empty()).then(|| EchoRounds {
            upstreams: state.upstreams.clone(),
            provider: provider.clone(),
            chat,
            left: MAX_ECHO_ROUNDS,
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
            },
        );
        let mut response = if canonical.stream {
            if let Some(persist) = &persist {
                persist
                    .save_started(&assembler.snapshot(), request_id)
                    .await;
            }
            stream_response(Pump {
                upstream: Box::pin(SseByteStream::new(bounded_bytes(upstream))),
                decoder: ChunkDecoder::new(&profile),
                profile,
                assembler: Some(assembler),
                limits: PumpLimits {
                    keepalive: state.config.keepalive,
                    deadline: tokio::time::Instant::now() + provider.stream_timeout,
                    shutdown: state.shutdown.clone(),
                },
                payload,
                echo,
                persist,
                final_response: None,
                pending: Vec::new(),
                diagnostics: Vec::new(),
                request_id: request_id.to_owned(),
            })
        } else {
            let response = sync_response(upstream, assembler, &profile, payload, echo).await?;
            if let Some(persist) = persist {
                persist.save(&response, request_id).await;
            }
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

/// What storing one response needs, kept until its end.
struct Persist {
    store: Arc<dyn toolbridge_store::ResponseStore>,
    /// This turn's input items, with ids.
    input_items: Vec<serde_json::Value>,
    expires_at: i64,
    /// A background run: its writes never undo a cancel.
    guarded: bool,
    /// The largest response stored; a larger one is not kept (and its `in_progress` record is
    /// removed), so it is never half-visible.
    max_bytes: usize,
    /// Whether the response itself is stored (`store`); a conversation keeps its items either way.
    keep_response: bool,
    /// The conversation this turn's items and output are appended to.
    conversation: Option<String>,
}

impl Persist {
    /// Stores the final response with this turn's items. It runs before the terminal event is
    /// sent, so a client that sees `response.completed` can fetch the response at once. A failure
    /// is logged: the answer itself already went out.
    /// Records a stream's response as `in_progress` when it starts: if the process dies before
    /// the end, the next start marks it failed (never a half-written response, never a ghost).
    async fn save_started(
        &self,
        response: &toolbridge_wire::responses::Response,
        request_id: &str,
    ) {
        if !self.keep_response {
            return;
        }
        let stored = self.record(response, Vec::new());
        self.write(&stored, request_id).await;
    }

    /// Writes a record (guarded for background runs); a failure is logged.
    async fn write(&self, stored: &toolbridge_store::StoredResponse, request_id: &str) {
        let result = if self.guarded {
            self.store.put_unless_final(stored).await.map(|_| ())
        } else {
            self.store.put(stored).await
        };
        if let Err(e) = result {
            tracing::error!(
                request_id,
                code = e.code(),
                "storing the response failed: {e}"
            );
        }
    }

    fn record(
        &self,
        response: &toolbridge_wire::responses::Response,
        input_items: Vec<serde_json::Value>,
    ) -> toolbridge_store::StoredResponse {
        let status = serde_json::to_value(response.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        toolbridge_store::StoredResponse {
            id: response.id.clone(),
            created_at: response.created_at,
            status,
            model: response.model.clone(),
            previous_response_id: response.previous_response_id.clone(),
            expires_at: Some(self.expires_at),
            response: serde_json::to_value(response).unwrap_or_default(),
            input_items,
            output_items: response
                .output
                .iter()
                .filter_map(|item| serde_json::to_value(item).ok())
                .collect(),
        }
    }

    async fn save(mut self, response: &toolbridge_wire::responses::Response, request_id: &str) {
        let input_items = std::mem::take(&mut self.input_items);
        let stored = self.record(response, input_items);
        if let Some(conversation) = &self.conversation {
            // The turn's input and what the model produced join the conversation.
            let items: Vec<serde_json::Value> = stored
                .input_items
                .iter()
                .chain(&stored.output_items)
                .cloned()
                .collect();
            match self
                .store
                .append_conversation_items(conversation, &items)
                .await
            {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    request_id,
                    conversation,
                    "the conversation was deleted during the response"
                ),
                Err(e) => tracing::error!(
                    request_id,
                    code = e.code(),
                    "extending the conversation failed: {e}"
                ),
            }
        }
        if !self.keep_response {
            return;
        }
        let size = stored.response.to_string().len()
            + stored
                .input_items
                .iter()
                .chain(&stored.output_items)
                .map(|i| i.to_string().len())
                .sum::<usize>();
        if size > self.max_bytes {
            tracing::warn!(
                request_id,
                size,
                limit = self.max_bytes,
                "the response is larger than store_max_response_bytes and was not stored"
            );
            if let Err(e) = self.store.delete(&stored.id).await {
                tracing::error!(
                    request_id,
                    code = e.code(),
                    "removing the unstored response failed: {e}"
                );
            }
            return;
        }
        self.write(&stored, request_id).await;
    }
}

/// The most rounds of provider builtin calls answered within one response.
const MAX_ECHO_ROUNDS: u8 = 4;

/// What a response needs to answer provider builtin calls itself (Kimi's `$web_search`): the
/// request so far and where to send it again.
struct EchoRounds {
    upstreams: Arc<crate::upstream::Upstreams>,
    provider: crate::config::Provider,
    chat: toolbridge_wire::chat::ChatRequest,
    left: u8,
}

impl EchoRounds {
    /// Appends the builtin calls and their echoed results, and sends the request again.
    async fn send(
        &mut self,
        echoes: Vec<toolbridge_core::assemble::EchoCall>,
    ) -> Result<(reqwest::Response, Bytes), GatewayError> {
        use toolbridge_wire::chat::{ChatFunctionCall, ChatMessage, ChatToolCall};
        self.left = self.left.saturating_sub(1);
        self.chat.messages.push(ChatMessage {
            role: "assistant".to_owned(),
            tool_calls: Some(
                echoes
                    .iter()
                    .map(|e| ChatToolCall {
                        id: e.call_id.clone(),
                        kind: "function".to_owned(),
                        function: ChatFunctionCall {
                            name: e.name.clone(),
                            arguments: e.arguments.clone(),
                        },
                    })
                    .collect(),
            ),
            ..ChatMessage::default()
        });
        for e in echoes {
            self.chat.messages.push(ChatMessage {
                role: "tool".to_owned(),
                content: Some(serde_json::Value::String(e.arguments)),
                name: Some(e.name),
                tool_call_id: Some(e.call_id),
                ..ChatMessage::default()
            });
        }
        let payload = Bytes::from(serde_json::to_vec(&self.chat).unwrap_or_default());
        let response = self
            .upstreams
            .send_chat(&self.provider, &payload, self.chat.stream)
            .await?;
        Ok((response, payload))
    }
}

async fn sync_response(
    upstream: reqwest::Response,
    mut assembler: Assembler,
    profile: &Profile,
    mut payload: Bytes,
    mut echo: Option<EchoRounds>,
) -> Result<toolbridge_wire::responses::Response, GatewayError> {
    let mut upstream = upstream;
    let mut sink = Vec::new();
    loop {
        let body = read_capped(upstream, MAX_RESPONSE_BODY).await?;
        let chat: ChatResponse = serde_json::from_slice(&body).map_err(|e| {
            GatewayError::Upstream(toolbridge_providers::Error::Decode {
                message: format!("not a Chat Completions response: {e}"),
            })
        })?;
        if let Some(error) = errors::in_body(&chat) {
            return Err(GatewayError::Upstream(
                toolbridge_providers::Error::Upstream(Box::new(error)),
            ));
        }
        let mut diagnostics = Vec::new();
        let events = chat_response::decode(profile, chat, &mut diagnostics);
        for d in diagnostics {
            assembler.add_diagnostic(d);
        }
        for event in events {
            assembler.on_event(event, &mut sink);
            sink.clear();
        }
        let Some(rounds) = echo.as_mut().filter(|r| r.left > 0) else {
            break;
        };
        let Some(echoes) = assembler.take_echoes(&mut sink) else {
            break;
        };
        sink.clear();
        (upstream, payload) = rounds.send(echoes).await?;
    }
    estimate_missing_usage(&mut assembler, &payload, &mut sink);
    Ok(assembler.finish(time::now(), &mut sink))
}

type UpstreamSse = Pin<Box<dyn Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send>>;

/// Time limits and the forced-stop signal of one stream.
struct PumpLimits {
    /// Silence after which a keep-alive comment goes to the client.
    keepalive: Option<std::time::Duration>,
    /// When the stream must end, whatever the upstream does.
    deadline: tokio::time::Instant,
    /// Turns true when the gateway must end open streams now.
    shutdown: watch::Receiver<bool>,
}

/// The SSE comment sent during long upstream silences; clients skip comments.
const KEEPALIVE: &[u8] = b": keep-alive\n\n";

/// The per-response stream pump: pulls upstream events lazily (no task, no channel), feeds the
/// decoder and the assembler, and yields SSE frames.
struct Pump {
    upstream: UpstreamSse,
    decoder: ChunkDecoder,
    profile: Profile,
    assembler: Option<Assembler>,
    limits: PumpLimits,
    /// The request as sent upstream, for a usage estimate.
    payload: Bytes,
    /// Set when provider builtin calls are answered by the gateway.
    echo: Option<EchoRounds>,
    /// Set when the response is stored at its end.
    persist: Option<Persist>,
    /// The final response, between its terminal event and its storing.
    final_response: Option<toolbridge_wire::responses::Response>,
    pending: Vec<UpstreamEvent>,
    diagnostics: Vec<Diagnostic>,
    request_id: String,
}

enum Step {
    Item(Option<Result<sse_stream::Sse, sse_stream::Error>>),
    Silence,
    Deadline,
    Shutdown,
}

impl Pump {
    /// The next batch of frames; `None` after the terminal event. A stored response is written
    /// before its terminal event goes out.
    async fn next(&mut self) -> Option<Vec<Bytes>> {
        let frames = self.step().await?;
        if let Some(response) = self.final_response.take()
            && let Some(persist) = self.persist.take()
        {
            persist.save(&response, &self.request_id).await;
        }
        Some(frames)
    }

    async fn step(&mut self) -> Option<Vec<Bytes>> {
        let mut out = Vec::new();
        loop {
            self.assembler.as_ref()?;
            let keepalive = self.limits.keepalive;
            let step = tokio::select! {
                biased;
                () = wait_for(&mut self.limits.shutdown) => Step::Shutdown,
                () = tokio::time::sleep_until(self.limits.deadline) => Step::Deadline,
                item = next_or_silence(&mut self.upstream, keepalive) => item,
            };
            match step {
                Step::Item(Some(Ok(event))) => {
                    let Some(data) = event.data else { continue };
                    let flow = self.decoder.on_data(
                        &self.profile,
                        &data,
                        &mut self.pending,
                        &mut self.diagnostics,
                    );
                    let assembler = self.assembler.as_mut()?;
                    for d in self.diagnostics.drain(..) {
                        assembler.add_diagnostic(d);
                    }
                    for ev in self.pending.drain(..) {
                        assembler.on_event(ev, &mut out);
                    }
                    match flow {
                        Ok(Flow::Continue) if out.is_empty() => continue,
                        Ok(Flow::Continue) => return Some(frames(&out)),
                        Ok(Flow::Done) => match self.next_round(&mut out).await {
                            Ok(true) => continue,
                            Ok(false) => return Some(self.finish(out, true)),
                            Err(e) => return Some(self.fail(e.code(), e.to_string(), out)),
                        },
                        Err(e) => return Some(self.fail(e.code(), e.to_string(), out)),
                    }
                }
                Step::Item(Some(Err(e))) => {
                    let (code, message) = stream_failure(&e);
                    return Some(self.fail(code, message, out));
                }
                // The body ended without `[DONE]`.
                Step::Item(None) => match self.next_round(&mut out).await {
                    Ok(true) => continue,
                    Ok(false) => return Some(self.finish(out, false)),
                    Err(e) => return Some(self.fail(e.code(), e.to_string(), out)),
                },
                Step::Silence => {
                    let mut batch = frames(&out);
                    batch.push(Bytes::from_static(KEEPALIVE));
                    return Some(batch);
                }
                Step::Deadline => {
                    return Some(
                        self.fail(
                            "server_error",
                            "the upstream stream went on past its deadline (stream_timeout_secs)"
                                .to_owned(),
                            out,
                        ),
                    );
                }
                Step::Shutdown => {
                    return Some(self.fail(
                        "server_shutting_down",
                        "the gateway is shutting down; retry the request".to_owned(),
                        out,
                    ));
                }
            }
        }
    }

    /// When the round's only calls are provider builtins to echo, sends the next round and
    /// switches to its stream (`Ok(true)`); `Ok(false)` when the response ends here.
    async fn next_round(&mut self, out: &mut Vec<StreamEvent>) -> Result<bool, GatewayError> {
        let (Some(rounds), Some(assembler)) = (
            self.echo.as_mut().filter(|r| r.left > 0),
            self.assembler.as_mut(),
        ) else {
            return Ok(false);
        };
        self.decoder.finish(&mut self.pending);
        for ev in self.pending.drain(..) {
            assembler.on_event(ev, out);
        }
        let Some(echoes) = assembler.take_echoes(out) else {
            return Ok(false);
        };
        let (response, payload) = rounds.send(echoes).await?;
        self.upstream = Box::pin(SseByteStream::new(bounded_bytes(response)));
        self.decoder = ChunkDecoder::new(&self.profile);
        self.payload = payload;
        Ok(true)
    }

    /// Ends the response; `done` says whether the upstream sent `[DONE]`.
    fn finish(&mut self, mut out: Vec<StreamEvent>, done: bool) -> Vec<Bytes> {
        if let Some(mut assembler) = self.assembler.take() {
            self.decoder.finish(&mut self.pending);
            for ev in self.pending.drain(..) {
                assembler.on_event(ev, &mut out);
            }
            estimate_missing_usage(&mut assembler, &self.payload, &mut out);
            let response = if done {
                assembler.finish(time::now(), &mut out)
            } else {
                assembler.finish_unterminated(time::now(), &mut out)
            };
            self.final_response = Some(response.clone());
            tracing::info!(request_id = self.request_id, status = ?response.status, "stream ended");
        }
        frames(&out)
    }

    fn fail(&mut self, code: &str, message: String, mut out: Vec<StreamEvent>) -> Vec<Bytes> {
        if let Some(assembler) = self.assembler.take() {
            tracing::warn!(
                request_id = self.request_id,
                code,
                "stream failed: {message}"
            );
            let response = assembler.fail(code, message, time::now(), &mut out);
            self.final_response = Some(response);
        }
        frames(&out)
    }
}

/// Gives a response an estimated usage (marked as such) when the upstream reported none.
fn estimate_missing_usage(assembler: &mut Assembler, payload: &[u8], out: &mut Vec<StreamEvent>) {
    if !assembler.needs_usage() {
        return;
    }
    let produced = assembler.produced_text();
    if produced.is_empty() {
        // Nothing was produced: the response fails, and a guess would only mislead.
        return;
    }
    let usage = crate::usage::estimate(payload, &produced);
    assembler.on_event(UpstreamEvent::Usage(usage), out);
    assembler.add_diagnostic(toolbridge_core::diagnostics::diag(
        toolbridge_core::diagnostics::USAGE_ESTIMATED,
        Some("usage"),
        "the upstream reported no token usage; the counts are o200k estimates",
    ));
}

fn stream_failure(e: &sse_stream::Error) -> (&'static str, String) {
    if let sse_stream::Error::Body(inner) = e
        && let Some(inner) = inner.downcast_ref::<StreamError>()
    {
        return (
            "server_error",
            match inner {
                StreamError::Idle | StreamError::TooLong => inner.to_string(),
                StreamError::Http(_) => format!("the upstream stream broke: {inner}"),
            },
        );
    }
    (
        "server_error",
        format!("the upstream stream could not be read: {e}"),
    )
}

/// The next upstream event, or [`Step::Silence`] when none came within `keepalive`.
async fn next_or_silence(
    upstream: &mut UpstreamSse,
    keepalive: Option<std::time::Duration>,
) -> Step {
    match keepalive {
        None => Step::Item(upstream.next().await),
        Some(limit) => match tokio::time::timeout(limit, upstream.next()).await {
            Ok(item) => Step::Item(item),
            Err(_) => Step::Silence,
        },
    }
}

async fn wait_for(shutdown: &mut watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow_and_update() {
            return;
        }
        if shutdown.changed().await.is_err() {
            // The sender is gone: no forced stop will ever come.
            std::future::pending::<()>().await;
        }
    }
}

/// The SSE answer: `response.created` and `response.in_progress` at once, then what the pump
/// yields.
fn stream_response(mut pump: Pump) -> Response {
    let mut start = Vec::new();
    if let Some(assembler) = pump.assembler.as_mut() {
        assembler.start(&mut start);
    }
    let body = stream::iter(frames(&start))
        .chain(
            stream::unfold(pump, |mut pump| async move {
                let frames = pump.next().await?;
                Some((stream::iter(frames), pump))
            })
            .flatten(),
        )
        .map(Ok::<Bytes, std::convert::Infallible>);
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// One SSE frame per event: `event:` and `data:` lines, LF endings.
pub fn frames(events: &[StreamEvent]) -> Vec<Bytes> {
    events.iter().map(frame).collect()
}

/// Encodes one event as an SSE frame.
pub fn frame(event: &StreamEvent) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(event.name().as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    // Serialising our own types to a Vec cannot fail (string keys only).
    let _ = serde_json::to_writer(&mut buf, event);
    buf.extend_from_slice(b"\n\n");
    Bytes::from(buf)
}
