//! Conversation state on the request side: `previous_response_id` chains and `item_reference`
//! inputs resolved from the store, and the bookkeeping of what a stored response will keep.
//!
//! Only the current request's `instructions` apply: earlier turns contribute their input and
//! output items, never their instructions.

use std::sync::Arc;

use serde_json::{Map, Value};
use toolbridge_store::{ResponseStore, StoreError, Tenant};
use toolbridge_wire::responses::{CreateResponse, Input, InputItem};

use super::recent::{Link, RecentChains};
use crate::error::GatewayError;
use crate::platform::ops::metrics::names;

/// The longest chain of previous responses followed.
pub(crate) const MAX_CHAIN: usize = 256;

/// What [`expand`] found: this turn's items as they will be stored, and the chain continued.
#[derive(Default)]
pub(crate) struct Expanded {
    /// This turn's items with ids (empty unless kept).
    pub(crate) turn_items: Vec<Value>,
    /// The `previous_response_id` chain, for the response continuing it to extend.
    pub(crate) chain: Option<Arc<Link>>,
}

/// Rebuilds `req.input` from the store: the chain's items first, then this turn's items with
/// every `item_reference` replaced by the stored item. With `keep`, returns this turn's items as
/// they will be stored (each with an `id`); otherwise nothing is copied. Only `tenant`'s stored
/// objects are found: another tenant's id reads as not found. A chain `recent` holds is used
/// once the store confirms it (`recent`'s module doc); one read whole is held there.
pub(crate) async fn expand(
    store: Option<&dyn ResponseStore>,
    recent: &RecentChains,
    tenant: &Tenant,
    req: &mut CreateResponse,
    keep: bool,
) -> Result<Expanded, GatewayError> {
    let has_references =
        matches!(&req.input, Some(Input::Items(items)) if items.iter().any(is_reference));
    let conversation = toolbridge_core::assemble::conversation_id(req);
    if conversation.is_some() && req.previous_response_id.is_some() {
        return Err(GatewayError::Request(
            toolbridge_core::Error::InvalidValue {
                param: "conversation".to_owned(),
                message: "`conversation` and `previous_response_id` cannot be used together"
                    .to_owned(),
            },
        ));
    }
    let keep = keep || conversation.is_some();
    if req.previous_response_id.is_none() && conversation.is_none() && !has_references && !keep {
        // Nothing to resolve and nothing to keep: the request goes on as it came (Codex).
        return Ok(Expanded::default());
    }
    let mut current = take_items(req);
    resolve_references(store, tenant, &mut current).await?;

    let mut turn_items = Vec::with_capacity(if keep { current.len() } else { 0 });
    for item in current.iter().filter(|_| keep) {
        let mut value = serde_json::to_value(item).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            canonical_message(map);
            if !map.contains_key("id") {
                let prefix = match map.get("type").and_then(Value::as_str) {
                    Some("message") | None => "msg",
                    Some(_) => "item",
                };
                map.insert(
                    "id".to_owned(),
                    Value::String(crate::platform::ids::new(prefix)),
                );
            }
        }
        turn_items.push(value);
    }

    let mut items = Vec::new();
    let mut chain = None;
    if let Some(previous) = req.previous_response_id.clone() {
        let Some(store) = store else {
            return Err(not_found(&previous));
        };
        let link = continued(store, recent, tenant, &previous).await?;
        items = link
            .items()
            .map_err(|e| GatewayError::Store(format!("a stored item no longer parses: {e}")))?;
        chain = Some(link);
    }
    if let Some(id) = &conversation {
        let Some(store) = store else {
            return Err(GatewayError::ConversationNotFound(id.clone()));
        };
        for value in conversation_items(store, tenant, id).await? {
            items.push(to_item(value)?);
        }
    }
    items.extend(current);
    // A request with no input and no history stays without input: normalising names it.
    req.input = (!items.is_empty()).then_some(Input::Items(items));
    Ok(Expanded { turn_items, chain })
}

/// The request's input as items, taken out of it (a text input is one user message): what a
/// continuation, from the store or a WebSocket's own chain, puts its history before.
pub(crate) fn take_items(req: &mut CreateResponse) -> Vec<InputItem> {
    match req.input.take() {
        None => Vec::new(),
        Some(Input::Items(items)) => items,
        Some(Input::Text(text)) => vec![user_message(text)],
    }
}

/// A text input as the one user message it stands for.
pub(crate) fn user_message(text: String) -> InputItem {
    InputItem::Message(toolbridge_wire::responses::MessageItem {
        id: None,
        role: "user".to_owned(),
        content: toolbridge_wire::responses::MessageContent::Text(text),
        status: None,
        extra: Map::new(),
    })
}

/// The chain ending at `previous`: the one `recent` holds when the store confirms it link for
/// link, else read whole (and then held). A response not ended is refused either way.
async fn continued(
    store: &dyn ResponseStore,
    recent: &RecentChains,
    tenant: &Tenant,
    previous: &str,
) -> Result<Arc<Link>, GatewayError> {
    if let Some(held) = recent.get(tenant, previous) {
        let links = store
            .chain_links(tenant, previous, MAX_CHAIN)
            .await
            .map_err(chain_error)?;
        refuse_open(links.iter().map(|l| (l.id.as_str(), l.status.as_str())))?;
        if links.iter().map(|l| l.id.as_str()).eq(held.ids()) {
            metrics::counter!(names::CHAIN_READS, "source" => "memory").increment(1);
            return Ok(held);
        }
    }
    let chain = store
        .chain(tenant, previous, MAX_CHAIN)
        .await
        .map_err(chain_error)?;
    refuse_open(chain.iter().map(|r| (r.id.as_str(), r.status.as_str())))?;
    let link = Link::from_chain(&chain).ok_or_else(|| not_found(previous))?;
    metrics::counter!(names::CHAIN_READS, "source" => "store").increment(1);
    recent.put(tenant, link.clone());
    Ok(link)
}

fn chain_error(e: StoreError) -> GatewayError {
    match e {
        StoreError::NotFound(id) => not_found(&id),
        StoreError::Cycle(_) | StoreError::TooDeep(_) => {
            GatewayError::Request(toolbridge_core::Error::InvalidValue {
                param: "previous_response_id".to_owned(),
                message: e.to_string(),
            })
        }
        other => GatewayError::Store(other.to_string()),
    }
}

/// A response not ended yet (running elsewhere, or left unfinished by a store outage) has no
/// final output to continue from.
fn refuse_open<'a>(
    mut links: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<(), GatewayError> {
    match links.find(|(_, status)| matches!(*status, "queued" | "in_progress")) {
        None => Ok(()),
        Some((id, status)) => Err(GatewayError::Request(
            toolbridge_core::Error::InvalidValue {
                param: "previous_response_id".to_owned(),
                message: format!(
                    "response `{id}` is still {status}: continue it once it has ended"
                ),
            },
        )),
    }
}

/// Every item of a conversation, oldest first (bounded: at most 100 pages of 100).
async fn conversation_items(
    store: &dyn ResponseStore,
    tenant: &Tenant,
    id: &str,
) -> Result<Vec<Value>, GatewayError> {
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..100 {
        let page = toolbridge_store::Page {
            after: after.clone(),
            limit: 100,
            order: toolbridge_store::Order::Asc,
        };
        let Some(page) = store
            .conversation_items(tenant, id, &page)
            .await
            .map_err(|e| GatewayError::Store(e.to_string()))?
        else {
            return Err(GatewayError::ConversationNotFound(id.to_owned()));
        };
        after = page
            .items
            .last()
            .and_then(|i| i.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let more = page.has_more && after.is_some();
        all.extend(page.items);
        if !more {
            return Ok(all);
        }
    }
    Ok(all)
}

/// This turn's items with ids, as stored: messages in OpenAI's stored shape.
pub(crate) fn stored_items(items: Vec<Value>) -> Vec<Value> {
    items
        .into_iter()
        .map(|mut value| {
            if let Value::Object(map) = &mut value {
                canonical_message(map);
                if !map.contains_key("id") {
                    map.insert(
                        "id".to_owned(),
                        Value::String(crate::platform::ids::new("item")),
                    );
                }
            }
            value
        })
        .collect()
}

/// A message as OpenAI stores it: `type: "message"` and content as a list of parts, whichever
/// short form the client sent (`{"role":"user","content":"hi"}`).
fn canonical_message(map: &mut Map<String, Value>) {
    if map.get("type").and_then(Value::as_str) != Some("message") {
        return;
    }
    let part_type = match map.get("role").and_then(Value::as_str) {
        Some("assistant") => "output_text",
        _ => "input_text",
    };
    if let Some(Value::String(text)) = map.get("content") {
        let mut part = Map::new();
        part.insert("type".to_owned(), Value::String(part_type.to_owned()));
        part.insert("text".to_owned(), Value::String(text.clone()));
        if part_type == "output_text" {
            part.insert("annotations".to_owned(), Value::Array(Vec::new()));
        }
        map.insert(
            "content".to_owned(),
            Value::Array(vec![Value::Object(part)]),
        );
    }
}

fn is_reference(item: &InputItem) -> bool {
    matches!(item, InputItem::Other(map) if map.get("type").and_then(Value::as_str) == Some("item_reference"))
}

fn not_found(id: &str) -> GatewayError {
    GatewayError::PreviousResponseNotFound(id.to_owned())
}

fn to_item(value: Value) -> Result<InputItem, GatewayError> {
    serde_json::from_value(value)
        .map_err(|e| GatewayError::Store(format!("a stored item no longer parses: {e}")))
}

/// Replaces `{"type":"item_reference","id":…}` inputs with the stored items they name.
async fn resolve_references(
    store: Option<&dyn ResponseStore>,
    tenant: &Tenant,
    items: &mut [InputItem],
) -> Result<(), GatewayError> {
    let references: Vec<(usize, String)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            InputItem::Other(map)
                if map.get("type").and_then(Value::as_str) == Some("item_reference") =>
            {
                Some((
                    i,
                    map.get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                ))
            }
            _ => None,
        })
        .collect();
    if references.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = references.iter().map(|(_, id)| id.clone()).collect();
    let found = match store {
        Some(store) => store
            .items_by_id(tenant, &ids)
            .await
            .map_err(|e| GatewayError::Store(e.to_string()))?,
        None => Default::default(),
    };
    for (i, id) in references {
        let Some(value) = found.get(&id) else {
            return Err(GatewayError::ItemReferenceNotFound {
                param: format!("input[{i}]"),
                id,
            });
        };
        if let Some(slot) = items.get_mut(i) {
            *slot = to_item(value.clone())?;
        }
    }
    Ok(())
}
