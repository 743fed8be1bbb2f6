//! The console's request pages: the live list (`/console`) and one request
//! (`/console/requests/{id}`): its facts, the plan as a table (each declared tool, its
//! decision, the reason and the name it got upstream), diagnostics, the items restored, and
//! the client's request beside the translated upstream body.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};
use serde_json::Value;

use super::layout::{self, ms};
use super::{Filters, Viewer, charts, entry, listed, page, viewer};
use crate::error::GatewayError;
use crate::platform::ops::journal::Entry;
use crate::state::AppState;

/// `GET /console`.
pub(super) async fn requests(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(filters): Query<Filters>,
) -> Response {
    page(
        async {
            let viewer = viewer(&state, &headers).await?;
            let entries = listed(&state, &viewer, &filters);
            Ok(requests_page(&viewer, &filters, &entries))
        }
        .await,
    )
}

fn requests_page(viewer: &Viewer, filters: &Filters, entries: &[std::sync::Arc<Entry>]) -> Markup {
    let live = filters.live.as_deref() == Some("1");
    let latencies: Vec<f64> = entries.iter().rev().map(|e| e.latency_ms).collect();
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let body = html! {
        form.filters method="get" action="/console" {
            label { "Key" input name="key" value=(value(&filters.key)) size="14"; }
            label { "Model" input name="model" value=(value(&filters.model)) size="18"; }
            label { "Status" input name="status" value=(value(&filters.status)) size="10"
                placeholder="200, failed…"; }
            label { "Live"
                select name="live" {
                    option value="" selected[!live] { "off" }
                    option value="1" selected[live] { "every 5 s" }
                }
            }
            button.primary type="submit" { "Filter" }
        }
        @if entries.is_empty() {
            p.muted { "No requests yet (this process keeps its latest; another replica keeps \
                       its own)." }
        } @else {
            (charts::latency("Latency of the listed requests, oldest first", &latencies))
            table {
                caption { (entries.len()) " requests, newest first" }
                thead { tr {
                    th scope="col" { "Time (UTC)" }
                    th scope="col" { "Request" }
                    th scope="col" { "Key" }
                    th scope="col" { "Model" }
                    th scope="col" { "Provider" }
                    th scope="col" { "Upstream model" }
                    th scope="col" { "Status" }
                    th.num scope="col" { "Latency" }
                    th.num scope="col" { "First token" }
                    th.num scope="col" { "In" }
                    th.num scope="col" { "Cached" }
                    th.num scope="col" { "Out" }
                    th.num scope="col" { "Diagnostics" }
                } }
                tbody {
                    @for e in entries {
                        tr {
                            td { (layout::time(e.at_ms)) }
                            td { a href=(format!("/console/requests/{}", e.id)) { (e.id) } }
                            td { (e.key_id.as_deref().unwrap_or("–")) }
                            td { (e.model) }
                            td { (e.provider.as_deref().unwrap_or("–")) }
                            td { (e.upstream_model.as_deref().unwrap_or("–")) }
                            td { (status(e)) }
                            td.num { (ms(e.latency_ms)) }
                            td.num { (e.first_token_ms.map_or("–".to_owned(), ms)) }
                            td.num { (tokens(e, |t| t.input)) }
                            td.num { (tokens(e, |t| t.cached)) }
                            td.num { (tokens(e, |t| t.output)) }
                            td.num { (e.diagnostics.len()) }
                        }
                    }
                }
            }
        }
    };
    layout::page_with("Requests", "/console", &viewer.describe(), live, body)
}

/// A request's status as a badge: its HTTP status and the response's own.
fn status(e: &Entry) -> Markup {
    let failed = e.http_status >= 400 || matches!(e.status.as_deref(), Some("failed"));
    let class = if failed {
        "badge s-error"
    } else {
        "badge s-ok"
    };
    let text = match (&e.status, e.http_status) {
        (Some(status), 0) => status.clone(),
        (Some(status), code) => format!("{code} {status}"),
        (None, code) => code.to_string(),
    };
    html! { span class=(class) { (text) } }
}

fn tokens(e: &Entry, pick: fn(&crate::platform::ops::journal::Tokens) -> u64) -> String {
    e.tokens
        .as_ref()
        .map_or("–".to_owned(), |t| pick(t).to_string())
}

/// `GET /console/requests/{id}`.
pub(super) async fn request(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    page(
        async {
            let viewer = viewer(&state, &headers).await?;
            let entry = entry(&state, &viewer, &id)?;
            let captured = captured(&state, &viewer, &id).await;
            Ok::<_, GatewayError>(request_page(&viewer, &entry, captured.as_ref()))
        }
        .await,
    )
}

/// The capture of request `id`, when capture is on and kept it (the viewer's tenant only).
pub(super) async fn captured(state: &AppState, viewer: &Viewer, id: &str) -> Option<Value> {
    let store = state.captures.as_ref()?;
    let now = crate::platform::time::now();
    store.capture(&viewer.tenant, id, now).await.ok().flatten()
}

/// The translated upstream body as JSON (its text when it is not JSON or was cut).
pub(super) fn upstream_json(entry: &Entry) -> Value {
    match &entry.upstream_body {
        Some(body) => serde_json::from_slice(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned())),
        None => Value::Null,
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn request_page(viewer: &Viewer, e: &Entry, captured: Option<&Value>) -> Markup {
    let body = html! {
        (facts(e))
        (plan_table(e))
        (diagnostics_table(e))
        (items_table(e))
        (bodies(e, captured))
    };
    layout::page(
        &format!("Request {}", e.id),
        "/console",
        &viewer.describe(),
        body,
    )
}

/// The request's facts: when, who, where it went, how it ended, what it cost.
fn facts(e: &Entry) -> Markup {
    html! {
        dl.facts {
            dt { "Time (UTC)" } dd { (layout::time(e.at_ms)) }
            dt { "Route" } dd { (e.route) @if e.stream { " (streamed)" } }
            dt { "Key" } dd { (e.key_id.as_deref().unwrap_or("–")) " · tenant " (e.tenant) }
            dt { "Model" } dd { (e.model) }
            dt { "Served by" } dd {
                (e.provider.as_deref().unwrap_or("–")) " as "
                (e.upstream_model.as_deref().unwrap_or("–"))
            }
            dt { "Status" } dd { (status(e))
                @if let Some(code) = &e.error_code { " " code { (code) } } }
            dt { "Latency" } dd { (ms(e.latency_ms))
                @if let Some(first) = e.first_token_ms { " · first token " (ms(first)) } }
            dt { "Tokens" } dd {
                @if let Some(t) = &e.tokens {
                    (t.input) " in (" (t.cached) " cached, " (layout::percent(t.cached, t.input))
                    "; " (t.cache_write) " written to the cache) · " (t.output) " out"
                } @else { "not reported" }
            }
            dt { "Retries" } dd { (e.retries) }
            dt { "Fallback" } dd { @if e.fallback { "yes: a fallback provider served it" }
                @else { "no" } }
            dt { "Repairs" } dd { (e.repairs()) }
            @if let Some(session) = &e.session {
                dt { "Session" } dd {
                    a href=(format!("/console/sessions/{}", urlencode(session))) { (session) }
                }
            }
        }
    }
}

/// The plan: each declared tool, its decision, the reason and its name upstream.
fn plan_table(e: &Entry) -> Markup {
    html! {
        h2 { "Plan" }
        @if e.plan.is_empty() {
            p.muted { "The request declared no tools." }
        } @else {
            table {
                caption { "Each declared tool and what the gateway did with it" }
                thead { tr {
                    th scope="col" { "Tool" }
                    th scope="col" { "Type" }
                    th scope="col" { "Decision" }
                    th scope="col" { "Reason" }
                    th scope="col" { "Name upstream" }
                } }
                tbody {
                    @for p in &e.plan {
                        tr {
                            td { (p.name.as_deref().unwrap_or(&p.param)) br;
                                 span.muted { (p.param) } }
                            td { (p.kind) }
                            td { span class=(format!("badge d-{}", p.decision)) { (p.decision) } }
                            td { code { (p.reason) } }
                            td { (p.upstream_name.as_deref().unwrap_or("–")) }
                        }
                    }
                }
            }
        }
    }
}

/// Every diagnostic the response carried.
fn diagnostics_table(e: &Entry) -> Markup {
    html! {
        h2 { "Diagnostics" }
        @if e.diagnostics.is_empty() {
            p.muted { "None." }
        } @else {
            table {
                thead { tr { th scope="col" { "Code" } th scope="col" { "Field" }
                             th scope="col" { "Message" } } }
                tbody {
                    @for d in &e.diagnostics {
                        tr { td { code { (d.code) } } td { (d.param.as_deref().unwrap_or("–")) }
                             td { (d.message) } }
                    }
                }
            }
        }
    }
}

/// The items restored for the client.
fn items_table(e: &Entry) -> Markup {
    html! {
        h2 { "Restored items" }
        @if e.output.is_empty() {
            p.muted { "None recorded." }
        } @else {
            table {
                thead { tr { th scope="col" { "Item" } th scope="col" { "Name" }
                             th scope="col" { "Call id" } } }
                tbody {
                    @for item in &e.output {
                        tr { td { (item.kind) } td { (item.name.as_deref().unwrap_or("–")) }
                             td { (item.call_id.as_deref().unwrap_or("–")) } }
                    }
                }
            }
        }
    }
}

/// The client's request (from its capture) beside the translated upstream body.
fn bodies(e: &Entry, captured: Option<&Value>) -> Markup {
    html! {
        h2 { "Client request and upstream body" }
        div.pair {
            section aria-label="The client's request" {
                h2 { "The client's request" }
                @match captured {
                    Some(c) => pre tabindex="0" { (pretty(&c["request"])) },
                    None => p.muted { "Not captured: turn `[capture] enabled` on to keep the \
                                       client's request and the upstream answer." },
                }
            }
            section aria-label="The translated upstream body" {
                h2 { "The translated upstream body" }
                @if e.upstream_body.is_some() {
                    pre tabindex="0" { (pretty(&upstream_json(e))) }
                } @else {
                    p.muted { "No upstream body (the request did not reach a provider)." }
                }
            }
        }
        @if let Some(c) = captured {
            @let rounds = c["upstream"].as_array().map_or(0, Vec::len);
            @if !c["response"].is_null() {
                details {
                    summary { "The response the client got (captured)" }
                    pre tabindex="0" { (pretty(&c["response"])) }
                }
            }
            @if rounds > 1 {
                details {
                    summary { "Every upstream body sent (" (rounds) " rounds, captured)" }
                    pre tabindex="0" { (pretty(&c["upstream"])) }
                }
            }
        }
    }
}

/// `text` made safe for a path segment.
pub(super) fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
