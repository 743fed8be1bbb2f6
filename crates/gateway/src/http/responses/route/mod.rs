//! The route stage: where a request goes (looked up once, by `prepare`) and, per target, what
//! goes there: the gateway tools offered, the one tool plan, the tool checks and the translated
//! body. Not here: sending, limits and fallback (`dispatch`).

use std::sync::Arc;

use axum::body::Bytes;
use toolbridge_core::canonical::CanonicalRequest;
use toolbridge_core::plan::{GatewayOffer, plan_request};
use toolbridge_core::repair::ToolSchemas;
use toolbridge_providers::dialect::Provenance;
use toolbridge_providers::dialect::{Raw, Source};
use toolbridge_providers::profile::Profile;

use super::{Caller, GatewayStage, Prepared, Routed, sealed_by_gateway, translate};
use crate::config::Target;
use crate::state::AppState;

/// Where a request for `model` with `signals` goes: the route's provider, then its fallbacks.
pub(crate) fn lookup<'a>(
    state: &'a AppState,
    model: &str,
    signals: &crate::config::RouteSignals,
) -> Option<Vec<Target<'a>>> {
    state.config.targets_for(model, signals)
}

/// The models this gateway serves, for a `model_not_found` error.
pub(super) fn known_list(state: &AppState) -> String {
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

/// A request's compiled tool checks, and the JSON text of the tools they were keyed by (the
/// response echoing the same tools writes that text: `emit::assembled`).
pub(super) struct ToolChecks {
    schemas: Arc<ToolSchemas>,
    text: Option<toolbridge_wire::raw::RawJson>,
}

/// The request for one target: the offer, the plan, the checks and the outgoing body. A plan
/// the target refuses is the error (the caller decides whether it is the client's answer).
/// `schemas` holds the request's tool checks, compiled once whatever the target (on first need),
/// with the tools' JSON text they were keyed by.
pub(super) fn route<'a>(
    state: &AppState,
    prepared: &Prepared<'a>,
    raw: Option<&Raw>,
    caller: &Caller,
    target: &Target<'a>,
    schemas: &mut Option<ToolChecks>,
) -> Result<Routed<'a>, toolbridge_core::Error> {
    let provider = target.provider;
    let upstream_model = &target.upstream_model;
    let canonical = &prepared.canonical;
    let profile = provider.profile_for(upstream_model);
    let (offer, stage) = offer_and_stage(state, prepared, caller, &profile);
    // The one plan of this request for this provider: the translator and the
    // reconstruction both read it.
    let plan = crate::platform::ops::telemetry::stage_span!("plan")
        .in_scope(|| plan_request(canonical, &profile.tools, &offer))?;
    let plan = crate::platform::ops::metrics::plan(&provider.name, plan);
    let mut diagnostics = canonical.diagnostics.clone();
    diagnostics.extend(plan.diagnostics.iter().cloned());
    // The model is told which tools the gateway runs, so it calls them instead of improvising.
    let note = state
        .config
        .gateway_tools
        .as_ref()
        .and_then(|t| t.note_for(&offer));
    let noted;
    let canonical = match note.as_deref() {
        // The operator's own addition, like the tools offered: no diagnostic.
        Some(text) => {
            noted = with_note(canonical.clone(), Some(text));
            &noted
        }
        None => canonical,
    };
    // A request sent as the client's own cannot be continued by the gateway (no re-ask), so its
    // calls are not repaired.
    let repairs = provider.repair.enabled && !provider.dialect.sends_client_request();
    let (repair_checks, tools_text) = tool_checks(state, canonical, repairs, schemas);
    if let Some(checks) = &repair_checks {
        diagnostics.extend(checks.diagnostics());
    }
    let outgoing = translate(
        provider.dialect,
        &Source {
            req: &prepared.req,
            raw,
            canonical,
            stored: prepared.stored,
            sealed_by_gateway: &sealed_by_gateway,
            provenance: Some(Provenance {
                origin: &provider.name,
                sealer: &state.sealer,
            }),
        },
        &plan,
        &profile,
        upstream_model,
        &mut diagnostics,
    );
    let payload = Bytes::from(outgoing.payload());
    // Kept (shared, not copied) for a usage estimate should the upstream report none.
    let usage_basis = outgoing.estimates_usage().then(|| payload.clone());
    Ok(Routed {
        provider,
        affinity: prepared.affinity,
        upstream_model: upstream_model.clone(),
        profile,
        gateway_tools_offered: !offer.tools.is_empty(),
        offer,
        stage,
        note,
        plan,
        diagnostics,
        outgoing,
        payload,
        usage_basis,
        repairs,
        repair_checks,
        tools_text,
    })
}

/// What the gateway runs itself for this request on `profile`, and the stage its tool loop
/// runs them from: the offer narrowed to what the caller may run; the image tool is served
/// only when the caller keeps it.
fn offer_and_stage(
    state: &AppState,
    prepared: &Prepared<'_>,
    caller: &Caller,
    profile: &Profile,
) -> (GatewayOffer, Option<GatewayStage>) {
    let canonical = &prepared.canonical;
    // What the gateway runs itself for this request, if anything.
    let mut offer = state
        .config
        .gateway_tools
        .as_ref()
        .map(|t| {
            t.offer_for(
                &canonical.model,
                &canonical.tools,
                &profile.tools,
                &prepared.listed,
            )
        })
        .unwrap_or_default();
    // The gateway tools this request's tool loop may run: the typed source's selection of the
    // offer, narrowed by the key's scope (`Scope::tool_view`); the offer keeps only those.
    let stage = gateway_stage(prepared, caller, &mut offer);
    // A key without `image_generation` does not get the declared tool served either.
    if !offer
        .tools
        .iter()
        .any(|t| crate::tools::GatewayTools::is_image(&t.server, &t.name))
    {
        offer.image_generation = false;
    }
    (offer, stage)
}

/// The request's tool checks when `repairs` is on, compiled once whatever the target (kept in
/// `schemas` on first need), with the tools' JSON text they were keyed by.
fn tool_checks(
    state: &AppState,
    canonical: &CanonicalRequest,
    repairs: bool,
    schemas: &mut Option<ToolChecks>,
) -> (
    Option<Arc<ToolSchemas>>,
    Option<toolbridge_wire::raw::RawJson>,
) {
    let checks = repairs.then(|| {
        schemas.get_or_insert_with(|| {
            let (schemas, text) = state
                .schema_cache
                .schemas_and_text(&canonical.planned_tools());
            ToolChecks { schemas, text }
        })
    });
    let tools_text = checks.as_ref().and_then(|c| c.text.clone());
    let repair_checks = checks.map(|c| Arc::clone(&c.schemas));
    (repair_checks, tools_text)
}

/// The selection of the offered gateway tools the request may run — all of them, or the key's
/// view — with the source it selects from; `offer` keeps only those tools. `None` when the
/// gateway offers nothing.
fn gateway_stage(
    prepared: &Prepared<'_>,
    caller: &Caller,
    offer: &mut toolbridge_core::plan::GatewayOffer,
) -> Option<GatewayStage> {
    let source = prepared.gateway_source.as_ref()?;
    if offer.tools.is_empty() {
        return None;
    }
    let selection = match &caller.key {
        Some(key) => key
            .scopes
            .tool_view(source.registry(), source.candidates(&offer.tools)),
        None => source.select(&offer.tools),
    };
    match selection {
        Ok(selection) => {
            offer.tools.retain(|t| {
                source
                    .id(&t.server, &t.name)
                    .is_some_and(|id| selection.contains(id))
            });
            Some(GatewayStage {
                source: Arc::clone(source),
                selection,
            })
        }
        Err(e) => {
            // Every candidate is the source's own: a bug, so the gateway offers nothing.
            tracing::error!("the gateway tools cannot be selected: {e}");
            offer.tools.clear();
            None
        }
    }
}

/// `canonical` with the gateway's system `note` (when there is one) at the end of its first
/// system turn, or as a system turn of its own before the conversation.
pub(super) fn with_note(
    mut canonical: toolbridge_core::canonical::CanonicalRequest,
    note: Option<&str>,
) -> toolbridge_core::canonical::CanonicalRequest {
    use toolbridge_core::canonical::Turn;
    let Some(note) = note else {
        return canonical;
    };
    match canonical.turns.first_mut() {
        Some(Turn::System { text, .. }) => {
            text.push_str("\n\n");
            text.push_str(note);
        }
        _ => {
            canonical.turns.insert(
                0,
                Turn::System {
                    text: note.to_owned(),
                    developer: false,
                },
            );
            // The client's cache marks name turns: one more is before them now.
            for mark in &mut canonical.cache_marks {
                *mark += 1;
            }
        }
    }
    canonical
}
