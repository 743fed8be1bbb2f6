//! The compaction items of a request, expanded: a `compaction` item this gateway sealed (its
//! summary written by `compact`) becomes a developer message carrying the summary. What the
//! sealed blob starts with ([`MARK`]) is here, beside its reader; `compact` seals with it.

use serde_json::{Map, Value};
use toolbridge_core::reasoning::Sealer;
use toolbridge_wire::responses::{CreateResponse, Input, InputItem, MessageContent, MessageItem};

/// What a sealed compaction blob starts with, so it is never taken for reasoning.
pub(in crate::http::responses) const MARK: &str = "toolbridge-compaction\n";

/// Replaces every `compaction` (or Codex's `context_compaction`) input item this gateway sealed
/// with a developer message carrying its summary; a blob that is not ours (or was altered)
/// stays in its place: a native Responses upstream reads it, a translating dialect's reducer
/// leaves it out with a diagnostic at its index.
pub(super) fn expand_compactions(req: &mut CreateResponse, sealer: &dyn Sealer) {
    let Some(Input::Items(items)) = &mut req.input else {
        return;
    };
    let mut kept = Vec::with_capacity(items.len());
    for item in std::mem::take(items) {
        let InputItem::Other(map) = &item else {
            kept.push(item);
            continue;
        };
        // Codex 0.171 also names the item `context_compaction`.
        if !matches!(
            map.get("type").and_then(Value::as_str),
            Some("compaction" | "context_compaction")
        ) {
            kept.push(item);
            continue;
        }
        let blob = map
            .get("encrypted_content")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match sealer
            .open(blob)
            .map(|text| text.strip_prefix(MARK).map(str::to_owned))
        {
            Ok(Some(summary)) => kept.push(InputItem::Message(MessageItem {
                id: None,
                role: "developer".to_owned(),
                content: MessageContent::Text(format!(
                    "Summary of the earlier conversation, which was compacted:\n{summary}"
                )),
                status: None,
                extra: Map::new(),
            })),
            // Not ours, or altered: kept in its place, so the reducer leaves it out with a
            // diagnostic naming its own index.
            Ok(None) | Err(_) => kept.push(item),
        }
    }
    *items = kept;
}
