//! Provider state kept server-side: the signatures (Anthropic's signed `thinking`, Gemini's
//! `thoughtSignature`) and redacted reasoning a provider checks when a turn's calls come back.
//! At a response's end its states ([`Response::provider_states`]) are written to the store by
//! `call_id`, for the tenant — for as long as the response is kept when it is stored, for
//! [`STATELESS_TTL_SECS`] when it is not; before a request is translated, its assistant turns
//! whose calls came back without that state (no `encrypted_content`, or stored items) get it
//! from there ([`fill`]). Sealed `encrypted_content` stays the stateless path, which needs no
//! store; without a store it is the only one.
//!
//! Nothing here fails a request: a write or read that fails is logged and the request goes on
//! (the provider then refuses the turn as it would have).

use std::sync::Arc;

use toolbridge_core::canonical::Turn;
use toolbridge_core::reasoning::{apply_state, lacks_state};
use toolbridge_store::{ProviderStateStore, Tenant};
use toolbridge_wire::responses::{ProviderState, ProviderStateEntry, Response};

use crate::platform::time;
use crate::state::AppState;

/// How long the state of a response that is not stored is kept (a stateless client's next
/// tool turn comes within minutes).
pub(super) const STATELESS_TTL_SECS: i64 = 3600;
/// The most states one tenant keeps; the oldest go first.
pub(super) const MAX_PER_TENANT: u64 = 10_000;
/// The largest state kept (its reasoning text included); a larger one is not kept.
pub(super) const MAX_STATE_BYTES: usize = 256 * 1024;

/// Where a response's provider state goes at its end.
#[derive(Clone)]
pub(in crate::http::responses) struct StateSink {
    store: Arc<dyn ProviderStateStore>,
    tenant: Tenant,
    expires_at: i64,
}

impl StateSink {
    /// The sink of a response, when the gateway has a store; `stored_until` is the stored
    /// response's expiry, `None` when it is not stored.
    pub(in crate::http::responses) fn new(
        state: &AppState,
        tenant: &Tenant,
        stored_until: Option<i64>,
    ) -> Option<Self> {
        let store = state.provider_states.clone()?;
        let expires_at = stored_until.unwrap_or_else(|| time::now() + STATELESS_TTL_SECS);
        Some(Self {
            store,
            tenant: tenant.own(),
            expires_at,
        })
    }

    /// Writes the response's states (nothing when it has none).
    pub(in crate::http::responses) async fn save(&self, response: &Response, request_id: &str) {
        let rows = rows(&response.provider_states);
        if rows.is_empty() {
            return;
        }
        let written = self
            .store
            .put_provider_states(
                &self.tenant,
                &rows,
                time::now(),
                self.expires_at,
                MAX_PER_TENANT,
            )
            .await;
        if let Err(e) = written {
            tracing::warn!(request_id, code = e.code(), "provider state not kept: {e}");
        }
    }
}

/// One `(call_id, state JSON)` row per call; a state over [`MAX_STATE_BYTES`] is left out.
fn rows(entries: &[ProviderStateEntry]) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    for entry in entries {
        let Ok(json) = serde_json::to_string(&entry.state) else {
            continue;
        };
        if json.len() > MAX_STATE_BYTES {
            tracing::warn!(bytes = json.len(), "a provider state too large to keep");
            continue;
        }
        for call_id in &entry.call_ids {
            rows.push((call_id.clone(), json.clone()));
        }
    }
    rows
}

/// Gives the assistant turns whose calls lack their provider state the state kept for them (by
/// the turn's first call found), in one store read.
pub(in crate::http::responses) async fn fill(
    state: &AppState,
    tenant: &Tenant,
    turns: &mut [Turn],
) {
    let Some(store) = &state.provider_states else {
        return;
    };
    let wanted: Vec<String> = turns
        .iter()
        .filter_map(|t| match t {
            Turn::Assistant(a) if lacks_state(a) => Some(a),
            _ => None,
        })
        .flat_map(|a| a.tool_calls.iter().map(|c| c.call_id.clone()))
        .take(toolbridge_store::MAX_LOOKUP)
        .collect();
    if wanted.is_empty() {
        return;
    }
    let found = match store
        .provider_states(&tenant.own(), &wanted, time::now())
        .await
    {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(code = e.code(), "provider state not read: {e}");
            return;
        }
    };
    for turn in turns {
        let Turn::Assistant(assistant) = turn else {
            continue;
        };
        if !lacks_state(assistant) {
            continue;
        }
        let kept = assistant
            .tool_calls
            .iter()
            .find_map(|c| found.get(&c.call_id))
            .and_then(|json| serde_json::from_str::<ProviderState>(json).ok());
        if let Some(kept) = kept {
            apply_state(assistant, kept);
        }
    }
}
