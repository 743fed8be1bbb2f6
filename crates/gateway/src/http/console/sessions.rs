//! The console's session pages, from the prompt-cache ledger: the latest sessions (a
//! conversation, a `prompt_cache_key` or a Codex session) and one session turn by turn, with
//! each turn's cached share, tokens and cost (`[console.prices]`, per route model), and a
//! chart of both.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::{Value, json};
use toolbridge_store::{CacheSession, CacheTurn};

use super::layout::{self, percent};
use super::pages::urlencode;
use super::{Viewer, charts, page, viewer};
use crate::error::GatewayError;
use crate::state::AppState;

async fn sessions_of(
    state: &AppState,
    viewer: &Viewer,
) -> Result<Option<Vec<CacheSession>>, GatewayError> {
    let Some(ledger) = &state.cache_turns else {
        return Ok(None);
    };
    let sessions = ledger
        .cache_sessions(&viewer.tenant)
        .await
        .map_err(|e| GatewayError::Store(e.to_string()))?;
    Ok(Some(sessions))
}

async fn turns_of(
    state: &AppState,
    viewer: &Viewer,
    session: &str,
) -> Result<Vec<CacheTurn>, GatewayError> {
    let ledger = state
        .cache_turns
        .as_ref()
        .ok_or_else(|| GatewayError::CacheSessionNotFound(session.to_owned()))?;
    let turns = ledger
        .cache_turns(&viewer.tenant, session)
        .await
        .map_err(|e| GatewayError::Store(e.to_string()))?;
    if turns.is_empty() {
        return Err(GatewayError::CacheSessionNotFound(session.to_owned()));
    }
    Ok(turns)
}

/// A turn's cost under the route's price, when one is set.
fn cost(state: &AppState, t: &CacheTurn) -> Option<f64> {
    let price = state.config.console.price(&t.model)?;
    Some(price.cost(
        t.input_tokens,
        t.cached_tokens,
        t.cache_write_tokens,
        t.output_tokens,
    ))
}

/// `GET /console/sessions`.
pub(super) async fn list(State(state): State<AppState>, headers: HeaderMap) -> Response {
    page(
        async {
            let viewer = viewer(&state, &headers).await?;
            let sessions = sessions_of(&state, &viewer).await?;
            Ok(list_page(&viewer, sessions.as_deref()))
        }
        .await,
    )
}

fn list_page(viewer: &Viewer, sessions: Option<&[CacheSession]>) -> Markup {
    let body = html! {
        @match sessions {
            None => p.muted { "The session ledger needs a store (`store_url`)." },
            Some([]) => p.muted { "No sessions yet: a request joins one by its conversation, \
                                   its prompt_cache_key or Codex's session header." },
            Some(sessions) => table {
                caption { "The latest sessions, by their last turn" }
                thead { tr {
                    th scope="col" { "Session" }
                    th scope="col" { "Tenant" }
                    th.num scope="col" { "Turns" }
                    th scope="col" { "Last turn (UTC)" }
                    th.num scope="col" { "Input" }
                    th.num scope="col" { "Cached" }
                    th.num scope="col" { "Cached share" }
                    th.num scope="col" { "Output" }
                } }
                tbody {
                    @for s in sessions {
                        tr {
                            td { a href=(format!("/console/sessions/{}", urlencode(&s.session))) {
                                (s.session) } }
                            td { (s.tenant.name()) }
                            td.num { (s.turns) }
                            td { (layout::time(u64::try_from(s.last_at).unwrap_or(0))) }
                            td.num { (s.input_tokens) }
                            td.num { (s.cached_tokens) }
                            td.num { (percent(s.cached_tokens, s.input_tokens)) }
                            td.num { (s.output_tokens) }
                        }
                    }
                }
            },
        }
    };
    layout::page("Sessions", "/console/sessions", &viewer.describe(), body)
}

/// `GET /console/sessions/{id}`.
pub(super) async fn one(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(session): Path<String>,
) -> Response {
    page(
        async {
            let viewer = viewer(&state, &headers).await?;
            let turns = turns_of(&state, &viewer, &session).await?;
            Ok(session_page(&state, &viewer, &session, &turns))
        }
        .await,
    )
}

fn session_page(state: &AppState, viewer: &Viewer, session: &str, turns: &[CacheTurn]) -> Markup {
    let bars: Vec<charts::Turn> = turns
        .iter()
        .map(|t| charts::Turn {
            input: t.input_tokens,
            cached: t.cached_tokens,
        })
        .collect();
    let costs: Vec<Option<f64>> = turns.iter().map(|t| cost(state, t)).collect();
    let total_cost: Option<f64> = costs.iter().copied().sum();
    let sum = |pick: fn(&CacheTurn) -> u64| turns.iter().map(pick).sum::<u64>();
    let (input, cached) = (sum(|t| t.input_tokens), sum(|t| t.cached_tokens));
    let body = html! {
        p { (turns.len()) " turns · " (input) " input tokens, " (cached) " of them cached ("
            (percent(cached, input)) ") · " (sum(|t| t.output_tokens)) " output tokens"
            @if let Some(total) = total_cost { " · cost " (format!("{total:.4}")) } }
        (charts::turns("Input tokens per turn and their cached share", &bars))
        table {
            caption { "Each upstream answer of the session" }
            thead { tr {
                th.num scope="col" { "Turn" }
                th scope="col" { "Time (UTC)" }
                th scope="col" { "Provider" }
                th scope="col" { "Model" }
                th.num scope="col" { "Input" }
                th.num scope="col" { "Cached" }
                th.num scope="col" { "Cache write" }
                th.num scope="col" { "Output" }
                th.num scope="col" { "Cached share" }
                th.num scope="col" { "Cost" }
            } }
            tbody {
                @for (i, (t, c)) in turns.iter().zip(&costs).enumerate() {
                    tr {
                        td.num { (i + 1) }
                        td { (layout::time(u64::try_from(t.at).unwrap_or(0))) }
                        td { (t.provider) }
                        td { (t.model) }
                        td.num { (t.input_tokens) }
                        td.num { (t.cached_tokens) }
                        td.num { (t.cache_write_tokens) }
                        td.num { (t.output_tokens) }
                        td.num { (percent(t.cached_tokens, t.input_tokens)) }
                        td.num { (c.map_or("–".to_owned(), |c| format!("{c:.4}"))) }
                    }
                }
            }
        }
        @if total_cost.is_none() {
            p.muted { "Costs show once `[console.prices]` names this session's route models." }
        }
    };
    layout::page(
        &format!("Session {session}"),
        "/console/sessions",
        &viewer.describe(),
        body,
    )
}

/// `GET /console/api/sessions`.
pub(super) async fn api_list(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let result = async {
        let viewer = viewer(&state, &headers).await?;
        let sessions = sessions_of(&state, &viewer).await?.unwrap_or_default();
        let list: Vec<Value> = sessions
            .iter()
            .map(|s| {
                json!({
                    "session": s.session, "tenant": s.tenant.name(), "turns": s.turns,
                    "first_at": s.first_at, "last_at": s.last_at,
                    "input_tokens": s.input_tokens, "cached_tokens": s.cached_tokens,
                    "cache_write_tokens": s.cache_write_tokens,
                    "output_tokens": s.output_tokens,
                })
            })
            .collect();
        Ok::<_, GatewayError>(axum::Json(json!({"sessions": list})))
    };
    match result.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /console/api/sessions/{id}`: the ledger's report, with each turn's cost.
pub(super) async fn api_one(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(session): Path<String>,
) -> Response {
    let result = async {
        let viewer = viewer(&state, &headers).await?;
        let turns = turns_of(&state, &viewer, &session).await?;
        let mut report = crate::platform::cache_ledger::report(&session, &turns);
        if let Some(list) = report["turns"].as_array_mut() {
            for (turn, t) in list.iter_mut().zip(&turns) {
                turn["output_tokens"] = json!(t.output_tokens);
                turn["cost"] = json!(cost(&state, t));
            }
        }
        Ok::<_, GatewayError>(axum::Json(report))
    };
    match result.await {
        Ok(body) => body.into_response(),
        Err(e) => e.into_response(),
    }
}
