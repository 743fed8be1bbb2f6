//! The prepare stage: the request as every target sees it, computed once. History
//! (`previous_response_id`, `conversation`) and compaction items (`compactions`) are expanded,
//! the request's own MCP servers connected and the approved calls run (`request_mcp`), the
//! request normalised, sealed reasoning opened and provider state the client did not carry
//! back read from the store (`provider_state`); the route is looked up here, once. Not here:
//! anything that depends on the target (plans, tool checks, translation: `route`).

pub(super) mod compactions;
mod request_mcp;

use std::sync::Arc;

use axum::body::Bytes;
use toolbridge_core::plan::{GatewayOffer, plan_request};
use toolbridge_core::reasoning::{ReasoningDisplay, open_sealed};
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::dialect::Raw;
use toolbridge_store::Tenant;
use toolbridge_wire::responses::{CreateResponse, Diagnostic, Input, InputItem};

use self::request_mcp::{connect_request_mcp, resolve_approvals};
use super::route::{known_list, lookup};
use super::stored::history::Expanded;
use super::{Caller, Prepared};
use crate::error::GatewayError;
use crate::state::AppState;

/// Prepares `req` for the route. `stored` is whether the response is kept (history items are
/// then stored with it); `body` the client's bytes, for a native Responses upstream, which gets
/// them instead of a re-serialisation (returned beside the prepared request: only the route
/// stage reads it).
pub(super) async fn prepare<'a>(
    state: &'a AppState,
    mut req: CreateResponse,
    caller: &Caller,
    stored: bool,
    body: Option<&Bytes>,
) -> Result<(Prepared<'a>, Option<Raw>), GatewayError> {
    let tenant = crate::platform::auth::tenant_of(caller.key.as_ref());
    let (expanded, compaction_diagnostics) = expand(state, &tenant, &mut req, stored).await?;
    let turn_items = expanded.turn_items;
    // The one lookup of the route (history never changes the model), on the model and what
    // Codex says of the request.
    let signals = crate::config::RouteSignals::of_request(&req.extra, &caller.signals);
    let targets = req
        .model
        .as_deref()
        .and_then(|m| lookup(state, m, &signals));
    let raw = raw_request(targets.as_deref(), body);
    // The request's own MCP servers the gateway serves, connected and listed once; then the
    // calls the client approved run, before the model's turn.
    let (listed, mut listings) =
        connect_request_mcp(state, &req, targets.as_deref().unwrap_or_default()).await;
    let gateway_source = state
        .config
        .gateway_tools
        .as_ref()
        .map(|tools| tools.source_for(&listed));
    listings.extend(resolve_approvals(state, &mut req, &listed, gateway_source.as_deref()).await);
    let mut canonical = normalize(&req, &Limits::default())?;
    canonical.diagnostics.extend(compaction_diagnostics);
    open_sealed(
        &mut canonical.turns,
        state.sealer.as_ref(),
        &mut canonical.diagnostics,
    );
    let targets = targets.ok_or_else(|| GatewayError::ModelNotFound {
        model: canonical.model.clone(),
        known: known_list(state),
    })?;
    // Signatures the client did not carry back, from the gateway's store.
    if targets
        .iter()
        .any(|t| t.provider.dialect.checks_signatures())
    {
        super::stored::provider_state::fill(state, &tenant, &mut canonical.turns).await;
    }
    let display = ReasoningDisplay::for_request(&req);
    let conversation = toolbridge_core::assemble::conversation_id(&req);
    let named = req.prompt_cache_key.is_some()
        || conversation.is_some()
        || req.previous_response_id.is_some()
        || caller.session.is_some();
    let session = crate::upstream::session_key(
        req.prompt_cache_key.as_deref(),
        conversation
            .or_else(|| chain_root(&req, &turn_items))
            .as_deref(),
        caller.session.as_deref(),
    )
    .map(str::to_owned);
    let affinity = session.as_deref().map_or_else(
        crate::upstream::Affinity::spread,
        crate::upstream::Affinity::of,
    );
    // The ledger records the sessions a client named and the chains it continues, not every
    // stored request that might start one.
    let session = session.filter(|_| named);
    let prepared = Prepared {
        req,
        canonical,
        turn_items,
        chain: expanded.chain,
        listed: Arc::new(listed),
        gateway_source,
        listings,
        stored,
        tenant,
        display,
        targets,
        affinity,
        session,
    };
    Ok((prepared, raw))
}

/// A chain of `previous_response_id`s is one session, named by its first stored item: the first
/// item of the history for a request that continues one, this turn's first item (as it will be
/// stored) for a stored request that may start one.
fn chain_root(req: &CreateResponse, turn_items: &[serde_json::Value]) -> Option<String> {
    if req.previous_response_id.is_none() {
        return turn_items.first()?.get("id")?.as_str().map(str::to_owned);
    }
    match &req.input {
        Some(Input::Items(items)) => match items.first()? {
            InputItem::Message(m) => m.id.clone(),
            _ => None,
        },
        _ => None,
    }
}

/// The request's history (`previous_response_id`, item references, a conversation) and its
/// compaction items expanded: the items this turn adds (kept when `stored`) and the chain it
/// continues, and the diagnostics of compaction items that could not be opened. Every path
/// that reads a conversation — a response, a background check, a compaction — starts here.
pub(crate) async fn expand(
    state: &AppState,
    tenant: &Tenant,
    req: &mut CreateResponse,
    stored: bool,
) -> Result<(Expanded, Vec<Diagnostic>), GatewayError> {
    let expanded = crate::http::responses::stored::history::expand(
        state.store.as_deref(),
        &state.recent_chains,
        tenant,
        req,
        stored,
    )
    .await?;
    compactions::expand_compactions(req, state.sealer.as_ref());
    Ok((expanded, Vec::new()))
}

/// The checks a request fails before any answer, without running anything: its history, its
/// shape, its model and the primary provider's plan (a background start, so a bad request is
/// a 400 now rather than a failed run later).
pub(super) async fn check(
    state: &AppState,
    tenant: &Tenant,
    req: &CreateResponse,
) -> Result<(), GatewayError> {
    let mut probe = req.clone();
    expand(state, tenant, &mut probe, false).await?;
    let canonical = normalize(&probe, &Limits::default())?;
    let signals = crate::config::RouteSignals::of_request(&req.extra, &Default::default());
    let targets =
        lookup(state, &canonical.model, &signals).ok_or_else(|| GatewayError::ModelNotFound {
            model: canonical.model.clone(),
            known: known_list(state),
        })?;
    if let Some(primary) = targets.first() {
        let profile = primary.provider.profile_for(&primary.upstream_model);
        plan_request(&canonical, &profile.tools, &GatewayOffer::default())?;
    }
    Ok(())
}

/// The client's JSON, parsed again only when the model routes to a Responses upstream.
fn raw_request(targets: Option<&[crate::config::Target<'_>]>, body: Option<&Bytes>) -> Option<Raw> {
    let body = body?;
    if !targets?
        .iter()
        .any(|t| t.provider.dialect.sends_client_request())
    {
        return None;
    }
    let serde_json::Value::Object(request) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    Some(Raw::new(request))
}
