//! Items an upstream produced in the client's vocabulary (a native Responses upstream's): their
//! events shown as they came ([`UpstreamEvent::Relayed`]), each with the `output_index` of the
//! slot the item takes here and the machine's `sequence_number`, and each item kept in the
//! output unchanged once its `output_item.done` came; the upstream's own response fields
//! ([`UpstreamEvent::ResponseFields`]) kept on the final response.
//!
//! [`UpstreamEvent::Relayed`]: crate::events::UpstreamEvent::Relayed
//! [`UpstreamEvent::ResponseFields`]: crate::events::UpstreamEvent::ResponseFields

use serde_json::{Map, Value, json};
use toolbridge_wire::responses::{EventKind, OutputItem, StreamEvent};

use super::machine::Assembler;

/// A relayed item of this round: the upstream's `output_index`, the slot it took here and the
/// id it was added with.
#[derive(Debug)]
pub(super) struct RelayedItem {
    upstream: Option<u64>,
    slot: usize,
    id: Option<String>,
    done: bool,
}

impl Assembler {
    /// Shows one relayed event: an `output_item.added` takes a fresh slot, an `output_item.done`
    /// fills its item's, any other event about an item points at its slot. An item done that
    /// was never added (or added under another id, or done already) is shown added first, in a
    /// fresh slot: every item the client sees is added once, then done once.
    pub(super) fn relayed(&mut self, mut event: Map<String, Value>, out: &mut Vec<StreamEvent>) {
        event.remove("sequence_number");
        let upstream = event.get("output_index").and_then(Value::as_u64);
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let item = match event.get("item") {
            Some(Value::Object(item)) => Some(item.clone()),
            _ => None,
        };
        let about_item = matches!(
            kind,
            "response.output_item.added" | "response.output_item.done"
        );
        if about_item && item.is_none() {
            // An item event without its item shows nothing (the decoder reports it).
            return;
        }
        let id = item
            .as_ref()
            .and_then(|i| i.get("id"))
            .and_then(Value::as_str);
        let slot = match (kind, item.as_ref()) {
            ("response.output_item.added", Some(_)) => Some(self.relayed_added(upstream, id, out)),
            ("response.output_item.done", Some(item)) => {
                let open = self
                    .relayed
                    .iter()
                    .position(|r| r.upstream == upstream && !r.done && r.id.as_deref() == id);
                let at = match open {
                    Some(at) => at,
                    None => {
                        let mut added = event.clone();
                        added.insert("type".to_owned(), json!("response.output_item.added"));
                        let slot = self.relayed_added(upstream, id, out);
                        added.insert("output_index".to_owned(), json!(slot));
                        self.push(out, EventKind::Relayed(added));
                        self.relayed.len() - 1
                    }
                };
                self.relayed[at].done = true;
                let slot = self.relayed[at].slot;
                if let Some(place) = self.slots.get_mut(slot) {
                    *place = Some(OutputItem::Other(item.clone()));
                }
                Some(slot)
            }
            _ => upstream.and_then(|u| {
                self.relayed
                    .iter()
                    .rev()
                    .find(|r| r.upstream == Some(u))
                    .map(|r| r.slot)
            }),
        };
        if let Some(slot) = slot {
            event.insert("output_index".to_owned(), json!(slot));
        }
        self.push(out, EventKind::Relayed(event));
    }

    /// A fresh slot for the upstream's item at `upstream` (its `output_index`), added as `id`.
    fn relayed_added(
        &mut self,
        upstream: Option<u64>,
        id: Option<&str>,
        out: &mut Vec<StreamEvent>,
    ) -> usize {
        self.saw_output = true;
        self.close_current(out);
        let slot = self.open_slot();
        self.relayed.push(RelayedItem {
            upstream,
            slot,
            id: id.map(str::to_owned),
            done: false,
        });
        slot
    }

    /// Keeps the upstream's own response fields for the final response (the first value of a
    /// field wins; a field the gateway sets itself never comes here).
    pub(super) fn response_fields(&mut self, fields: Map<String, Value>) {
        for (key, value) in fields {
            self.response.extra.entry(key).or_insert(value);
        }
    }
}
