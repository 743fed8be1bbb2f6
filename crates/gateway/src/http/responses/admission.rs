//! Admission and charging of one request against its gateway key: the model and tool scopes
//! and the token budget at the start ([`admit`], which reserves the estimate), the ledger and
//! the per-minute windows at the end ([`charge`]), and the unused reservation given back when a
//! request is refused before anything was spent ([`release`]). The key itself is resolved by the
//! authentication middleware ([`crate::platform::auth`]).
//!
//! Beside the stages, not in one: the ingress admits (HTTP and WebSocket), the meter charges,
//! and whoever refuses a request before its answer (the ingress, a background run, a WebSocket
//! frame) releases. It imports no stage.

use std::sync::Arc;

use toolbridge_wire::responses::CreateResponse;

use crate::error::GatewayError;
use crate::platform::auth::{Authenticated, budget, check_model, check_tools, current};
use crate::state::AppState;

/// 429 `budget_exhausted` when the key's daily or monthly tokens are used up; else reserves
/// `estimate` tokens on both periods at once (one conditional update per period, so concurrent
/// requests cannot all pass a check made before any of them is counted). The reservation, for
/// [`charge`] to settle; `None` when the key has no budget.
pub(crate) async fn check_budget(
    state: &AppState,
    auth: &Authenticated,
    estimate: impl FnOnce() -> u64,
) -> Result<Option<budget::Reservation>, GatewayError> {
    let scopes = &auth.scopes;
    if scopes.daily_tokens.is_none() && scopes.monthly_tokens.is_none() {
        return Ok(None);
    }
    let Some(store) = &state.key_store else {
        // Config validation refuses budgets without a store; nothing to count against here.
        return Ok(None);
    };
    // Only a key with a budget pays for the estimate (it serialises the input).
    let estimate = estimate();
    let now = crate::platform::time::now();
    let periods = budget::labels(now);
    let limit = |l: Option<u64>| l.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
    let limited = [
        (periods[0].clone(), limit(scopes.daily_tokens)),
        (periods[1].clone(), limit(scopes.monthly_tokens)),
    ];
    let tokens = i64::try_from(estimate).unwrap_or(i64::MAX);
    let reserved = store
        .reserve_usage(&auth.key_id, &limited, tokens)
        .await
        .map_err(|e| GatewayError::Store(e.to_string()))?;
    if reserved {
        return Ok(Some(budget::Reservation::new(periods, estimate)));
    }
    // Refused: say which period is used up, and how much was used.
    let used = store
        .usage(&auth.key_id, &periods)
        .await
        .map_err(|e| GatewayError::Store(e.to_string()))?;
    let day = used.first().copied().unwrap_or(0);
    let month = used.get(1).copied().unwrap_or(0);
    budget::verdict(budget::Period::Day, scopes.daily_tokens, day, now)?;
    budget::verdict(budget::Period::Month, scopes.monthly_tokens, month, now)?;
    // Settled back below the limit between the two reads: admitted, and charged at the end
    // without a reservation (as every request was before reservations).
    Ok(None)
}

/// Adds `tokens` to the key's daily and monthly ledger rows.
pub(crate) async fn record_usage(
    state: &AppState,
    key_id: &str,
    tokens: u64,
) -> Result<(), GatewayError> {
    let Some(store) = &state.key_store else {
        return Ok(());
    };
    if tokens == 0 {
        return Ok(());
    }
    let periods = budget::labels(crate::platform::time::now());
    add_usage(
        state,
        store.as_ref(),
        key_id,
        &periods,
        saturating_i64(tokens),
    )
    .await
}

/// Adds `tokens` to the key's ledger; a charge the store refuses because it is down waits in
/// `late_charges` for it to come back (the answer is out: the charge must not be lost).
async fn add_usage(
    state: &AppState,
    store: &dyn toolbridge_store::KeyStore,
    key_id: &str,
    periods: &[String],
    tokens: i64,
) -> Result<(), GatewayError> {
    match store.add_usage(key_id, periods, tokens).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_outage() => {
            tracing::warn!(
                key_id,
                tokens,
                "the store refused a budget charge ({e}); it is kept until the store is back"
            );
            state.late_charges.keep(key_id, periods, tokens);
            Ok(())
        }
        Err(e) => Err(GatewayError::Store(e.to_string())),
    }
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The handler's one admission check, once the body is parsed: the key's model scope, tool
/// scope and budget. The key is returned for [`charge`]; `None` when the gateway asks for no key.
pub async fn admit(
    state: &AppState,
    req: &CreateResponse,
) -> Result<Option<Authenticated>, GatewayError> {
    let Some(auth) = current() else {
        return Ok(None);
    };
    // A request without a model is refused by validation later, for every key alike.
    if let Some(model) = req.model.as_deref() {
        check_model(&auth.scopes, model)?;
    }
    check_tools(&auth.scopes, req.tools.as_deref().unwrap_or_default())?;
    let mut auth = auth;
    let estimate = || {
        let route = req.model.as_deref().map_or_else(
            || crate::platform::ops::metrics::OTHER.to_owned(),
            |model| crate::platform::ops::metrics::model_label(&state.config, model),
        );
        budget::estimate(req, state.observed_output.reserve(&route))
    };
    auth.reservation = check_budget(state, &auth, estimate).await?.map(Arc::new);
    Ok(Some(auth))
}

/// The handler's one charge, once a response's usage is known: the key's budget ledger (the
/// reservation made at admission is settled: replaced by `tokens`) and the per-minute token
/// windows of the key and the provider. A charge the store refuses while down is kept and
/// written once it is back (`late_charges`); other failures are logged, not returned: the
/// answer is already out.
pub async fn charge(state: &AppState, auth: Option<&Authenticated>, provider: &str, tokens: u64) {
    let key = auth.map_or(crate::platform::limits::ANONYMOUS, |a| a.key_id.as_str());
    state.limits.record_tokens(key, provider, tokens).await;
    let Some(auth) = auth else {
        return;
    };
    let result = match auth
        .reservation
        .as_deref()
        .and_then(budget::Reservation::take)
    {
        Some((periods, reserved)) => match (&state.key_store, tokens.cmp(&reserved)) {
            (None, _) | (_, std::cmp::Ordering::Equal) => Ok(()),
            (Some(store), _) => {
                let delta = saturating_i64(tokens).saturating_sub(saturating_i64(reserved));
                add_usage(state, store.as_ref(), &auth.key_id, &periods, delta).await
            }
        },
        None => record_usage(state, &auth.key_id, tokens).await,
    };
    if let Err(e) = result {
        tracing::warn!(key_id = auth.key_id, "recording token usage failed: {e}");
    }
}

/// Returns a reservation unused (the request was refused before anything was used upstream).
pub(crate) async fn release(state: &AppState, auth: Option<&Authenticated>) {
    if let Some(auth) = auth
        && auth.reservation.is_some()
    {
        charge(state, Some(auth), crate::platform::limits::ANONYMOUS, 0).await;
    }
}
