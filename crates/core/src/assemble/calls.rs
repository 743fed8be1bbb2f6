//! Tool calls as they stream in: the per-call state keyed by the provider's index or id, and
//! when a call is announced. Only a `function_call` streams live (and only with repair off);
//! every other kind is announced when the round closes, because its item type and shape depend
//! on the whole arguments.
//!
//! Not here: restoring and completing calls (`closing`), and taking them out between rounds
//! (`rounds`).

use toolbridge_wire::responses::{EventKind, FunctionCallItem, OutputItem, StreamEvent};

use super::machine::Assembler;
use crate::events::ToolCallDelta;
use crate::repair::RepairedCall;
use crate::restore::{function_name, streams_as_function};

#[derive(Debug)]
pub(super) struct CallState {
    pub(super) key_index: Option<u32>,
    /// Set once the call streams as a `function_call`; calls of other types are announced only
    /// when complete (their item type and shape depend on the whole arguments).
    pub(super) output_index: Option<usize>,
    pub(super) item_id: String,
    pub(super) call_id: Option<String>,
    pub(super) name: Option<String>,
    pub(super) arguments: String,
    /// The call checked and repaired, once complete (repair on).
    pub(super) repaired: Option<RepairedCall>,
}

impl CallState {
    /// The call's id: the provider's, or one made from the item id.
    pub(super) fn id(&self) -> String {
        self.call_id
            .clone()
            .unwrap_or_else(|| format!("call_{}", self.item_id))
    }
}

impl Assembler {
    /// A call not seen before, keyed as `delta` says: its place in `calls`. Its item id is the
    /// upstream's when it gave one, else a fresh one.
    fn new_call(&mut self, delta: &ToolCallDelta) -> usize {
        let item_id = match &delta.item_id {
            Some(id) => id.clone(),
            None => self.next_id("fc"),
        };
        self.calls.push(CallState {
            key_index: delta.index,
            output_index: None,
            item_id,
            call_id: None,
            name: None,
            arguments: String::new(),
            repaired: None,
        });
        self.calls.len() - 1
    }

    /// One fragment of a call: a new call, its name, id or arguments; a function call streams
    /// once its name and id are known.
    pub(super) fn tool_call(&mut self, delta: ToolCallDelta, out: &mut Vec<StreamEvent>) {
        self.close_current(out);
        let position = match (delta.index, &delta.id) {
            (Some(i), _) => self.calls.iter().position(|c| c.key_index == Some(i)),
            (None, Some(id)) => self
                .calls
                .iter()
                .position(|c| c.call_id.as_deref() == Some(id.as_str())),
            // Neither index nor id: a continuation of the latest call.
            (None, None) => self.calls.len().checked_sub(1),
        };
        let position = match position {
            Some(p) => p,
            None => self.new_call(&delta),
        };
        let mut events = Vec::with_capacity(2);
        let mut new_slot = false;
        // With repair on, a call is announced only once complete and checked.
        let hold = self.repair.is_some();
        if let Some(call) = self.calls.get_mut(position) {
            if call.call_id.is_none() {
                call.call_id = delta.id.filter(|id| !id.is_empty());
            }
            if call.name.is_none() {
                call.name = delta.name.filter(|n| !n.is_empty());
            }
            call.arguments.push_str(&delta.arguments);
            match call.output_index {
                Some(index) => {
                    if !delta.arguments.is_empty() {
                        events.push(EventKind::FunctionCallArgumentsDelta {
                            item_id: call.item_id.clone(),
                            output_index: index,
                            delta: delta.arguments,
                        });
                    }
                }
                // The item is announced once its name and its id are known: a client keys on
                // both, and a provider's id may come after the first arguments (they are held
                // until then). A call that never gets an id is announced when the upstream ends,
                // with a generated one. Only function calls stream.
                None => {
                    new_slot = !hold
                        && call.name.as_deref().is_some_and(|n| {
                            streams_as_function(&self.names, n)
                                && !self.echo_tools.iter().any(|e| e == n)
                        })
                        && call.call_id.is_some()
                }
            }
        }
        if new_slot {
            let index = self.open_slot();
            if let Some(call) = self.calls.get_mut(position) {
                call.output_index = Some(index);
                if call.call_id.is_none() {
                    call.call_id = Some(format!("call_{}", call.item_id));
                }
                let (namespace, name) =
                    function_name(&self.names, call.name.as_deref().unwrap_or_default());
                events.push(EventKind::OutputItemAdded {
                    output_index: index,
                    item: OutputItem::FunctionCall(FunctionCallItem {
                        encrypted_function_args: None,
                        id: Some(call.item_id.clone()),
                        call_id: call.call_id.clone().unwrap_or_default(),
                        name,
                        namespace,
                        arguments: String::new(),
                        status: Some("in_progress".to_owned()),
                    }),
                });
                if !call.arguments.is_empty() {
                    events.push(EventKind::FunctionCallArgumentsDelta {
                        item_id: call.item_id.clone(),
                        output_index: index,
                        delta: call.arguments.clone(),
                    });
                }
            }
        }
        self.saw_output = true;
        for kind in events {
            self.push(out, kind);
        }
    }
}
