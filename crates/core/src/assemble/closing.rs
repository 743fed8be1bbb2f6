//! Closing a round's calls for the client: each call restored to its declared type (repaired
//! first when repair is on) and completed by the closing function of its item kind — function,
//! custom, local shell or shell, apply_patch — or left out with a diagnostic (a builtin beside
//! client calls, a call without a name, a gateway call held after the tool loop stopped).
//!
//! Not here: the calls the gateway takes before this point (`rounds`).

use serde_json::Value;
use toolbridge_wire::responses::{
    ActionCallItem, ApplyPatchCallItem, CustomToolCallItem, EventKind, FunctionCallItem,
    OutputItem, StreamEvent, ToolSearchCallItem,
};

use super::calls::CallState;
use super::machine::Assembler;
use crate::canonical::CallKind;
use crate::diagnostics::{CALL_NOT_RESTORED, CHUNK_SKIPPED, diag};
use crate::plan::Identity;
use crate::repair::NameMatch;
use crate::restore::restore;

impl Assembler {
    /// Shows every call of the round, restored to its declared type and completed: the end of a
    /// round the client answers. Each kind of item has its own closing function below.
    pub(super) fn close_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for call in std::mem::take(&mut self.calls) {
            self.close_call(call, out);
        }
    }

    /// The upstream completed the call keyed `index`: a client call is closed now (held calls
    /// under repair, gateway calls and echoed builtins wait for the round's end, where the
    /// round's policy sees them together).
    pub(super) fn call_complete(&mut self, index: u32, out: &mut Vec<StreamEvent>) {
        if self.repair.is_some() {
            return;
        }
        let Some(position) = self.calls.iter().position(|c| c.key_index == Some(index)) else {
            return;
        };
        let client = self.calls[position].name.as_deref().is_some_and(|n| {
            !self.echo_tools.iter().any(|e| e == n)
                && !matches!(self.names.identity(n), Some(Identity::Gateway { .. }))
        });
        if client {
            let call = self.calls.remove(position);
            self.close_call(call, out);
        }
    }

    /// Restores one call and hands it to the closing function of its kind; a call that cannot
    /// be shown (a builtin beside client calls, no name, held for the gateway) is left out with
    /// a diagnostic.
    fn close_call(&mut self, mut call: CallState, out: &mut Vec<StreamEvent>) {
        if let Some(name) = call.name.as_deref()
            && self.echo_tools.iter().any(|e| e == name)
        {
            // A provider builtin next to client calls cannot be echoed in this turn.
            self.add_diagnostic(diag(
                CALL_NOT_RESTORED,
                None,
                format!("the provider's builtin `{name}` was called beside client tools; it was left out"),
            ));
            return;
        }
        let Some(called) = call.name.clone() else {
            self.add_diagnostic(diag(
                CHUNK_SKIPPED,
                None,
                "the upstream sent a tool call without a name; it was left out",
            ));
            return;
        };
        let (restored, provider_name) = self.restore_call(&mut call, called);
        let call_id = call.id();
        match restored {
            CallKind::Function {
                namespace,
                name,
                arguments,
            } => self.close_function(&call, call_id, (namespace, name), arguments, out),
            CallKind::Custom {
                namespace,
                name,
                input,
            } => self.close_custom(call_id, (namespace, name), input, out),
            CallKind::LocalShell { action } | CallKind::Shell { action } => {
                self.close_shell(&call, call_id, &provider_name, action, out);
            }
            CallKind::ApplyPatch { operation } => {
                self.close_apply_patch(&call, call_id, operation, out);
            }
            CallKind::ToolSearch { arguments } => self.close_tool_search(call_id, arguments, out),
            CallKind::Gateway { name, .. } => self.close_gateway_held(&name),
        }
    }

    /// The call restored to its declared type (repaired first when repair is on), with the
    /// provider name it was restored under (a mapped name when repaired); every step's
    /// diagnostics go on the response.
    fn restore_call(&mut self, call: &mut CallState, called: String) -> (CallKind, String) {
        let repaired = match (call.repaired.take(), &self.repair) {
            (Some(repaired), _) => Some(repaired),
            (None, Some(schemas)) => {
                Some(schemas.restore_repaired(&self.names, &called, &call.arguments))
            }
            (None, None) => None,
        };
        match repaired {
            Some(repaired) => {
                for d in repaired.diagnostics {
                    self.add_diagnostic(d);
                }
                let name = match repaired.name {
                    Some(NameMatch::Mapped { name, .. }) => name,
                    _ => called,
                };
                (repaired.call, name)
            }
            None => {
                let (restored, diagnostic) = restore(&self.names, &called, &call.arguments);
                if let Some(d) = diagnostic {
                    self.add_diagnostic(d);
                }
                (restored, called)
            }
        }
    }

    /// A `function_call`: completed in the slot it streamed into, or announced only now (a
    /// name with neither id nor arguments, a held call under repair, or a built-in call whose
    /// arguments did not fit and fell back).
    fn close_function(
        &mut self,
        call: &CallState,
        call_id: String,
        (namespace, name): (Option<String>, String),
        arguments: String,
        out: &mut Vec<StreamEvent>,
    ) {
        let item = FunctionCallItem {
            encrypted_function_args: None,
            id: Some(call.item_id.clone()),
            call_id,
            name,
            namespace,
            arguments: String::new(),
            status: Some("in_progress".to_owned()),
        };
        let index = match call.output_index {
            Some(index) => index,
            None => {
                let index = self.open_slot();
                self.push(
                    out,
                    EventKind::OutputItemAdded {
                        output_index: index,
                        item: OutputItem::FunctionCall(item.clone()),
                    },
                );
                if !arguments.is_empty() {
                    self.push(
                        out,
                        EventKind::FunctionCallArgumentsDelta {
                            item_id: call.item_id.clone(),
                            output_index: index,
                            delta: arguments.clone(),
                        },
                    );
                }
                index
            }
        };
        self.push(
            out,
            EventKind::FunctionCallArgumentsDone {
                item_id: call.item_id.clone(),
                output_index: index,
                name: item.name.clone(),
                arguments: arguments.clone(),
            },
        );
        let item = FunctionCallItem {
            encrypted_function_args: None,
            arguments,
            status: Some("completed".to_owned()),
            ..item
        };
        self.done(index, OutputItem::FunctionCall(item), out);
    }

    /// A `custom_tool_call`: announced only now, so it can carry the id prefix of its real type,
    /// with its whole input in one delta.
    fn close_custom(
        &mut self,
        call_id: String,
        (namespace, name): (Option<String>, String),
        input: String,
        out: &mut Vec<StreamEvent>,
    ) {
        let index = self.open_slot();
        let item_id = self.next_id("ctc");
        let item = CustomToolCallItem {
            id: Some(item_id.clone()),
            call_id,
            name,
            namespace,
            input: String::new(),
            status: Some("in_progress".to_owned()),
        };
        self.push(
            out,
            EventKind::OutputItemAdded {
                output_index: index,
                item: OutputItem::CustomToolCall(item.clone()),
            },
        );
        self.push(
            out,
            EventKind::CustomToolCallInputDelta {
                item_id: item_id.clone(),
                output_index: index,
                delta: input.clone(),
            },
        );
        self.push(
            out,
            EventKind::CustomToolCallInputDone {
                item_id,
                output_index: index,
                input: input.clone(),
            },
        );
        let item = CustomToolCallItem {
            input,
            status: Some("completed".to_owned()),
            ..item
        };
        self.done(index, OutputItem::CustomToolCall(item), out);
    }

    /// A `local_shell_call` or a `shell_call`: which one is the plan's identity of the provider
    /// name, added and done at once.
    fn close_shell(
        &mut self,
        call: &CallState,
        call_id: String,
        provider_name: &str,
        action: Value,
        out: &mut Vec<StreamEvent>,
    ) {
        let local = matches!(
            self.names.identity(provider_name),
            Some(Identity::LocalShell)
        );
        let make = |status: &str| {
            let item = ActionCallItem {
                id: Some(call.item_id.clone()),
                call_id: call_id.clone(),
                action: action.clone(),
                status: Some(status.to_owned()),
            };
            if local {
                OutputItem::LocalShellCall(item)
            } else {
                OutputItem::ShellCall(item)
            }
        };
        self.announce_and_finish(make("in_progress"), make("completed"), out);
    }

    /// An `apply_patch_call`, added and done at once.
    fn close_apply_patch(
        &mut self,
        call: &CallState,
        call_id: String,
        operation: Value,
        out: &mut Vec<StreamEvent>,
    ) {
        let make = |status: &str| {
            OutputItem::ApplyPatchCall(ApplyPatchCallItem {
                id: Some(call.item_id.clone()),
                call_id: call_id.clone(),
                operation: operation.clone(),
                status: Some(status.to_owned()),
            })
        };
        self.announce_and_finish(make("in_progress"), make("completed"), out);
    }

    /// A client-run `tool_search_call` (the degraded `tool_search` function's call): announced
    /// and done at once with its arguments as an object, as OpenAI shows it; the client answers
    /// with a `tool_search_output`.
    fn close_tool_search(&mut self, call_id: String, arguments: Value, out: &mut Vec<StreamEvent>) {
        let item_id = self.next_id("tsc");
        let make = |status: &str| {
            OutputItem::ToolSearchCall(ToolSearchCallItem {
                id: Some(item_id.clone()),
                call_id: Some(call_id.clone()),
                execution: Some("client".to_owned()),
                arguments: arguments.clone(),
                status: Some(status.to_owned()),
                extra: serde_json::Map::new(),
            })
        };
        self.announce_and_finish(make("in_progress"), make("completed"), out);
    }

    /// A call held for the gateway, which did not run it (its loop stopped first): not shown.
    fn close_gateway_held(&mut self, name: &str) {
        self.add_diagnostic(diag(
            CALL_NOT_RESTORED,
            None,
            format!(
                "the gateway tool `{name}` was called after the tool loop stopped; the call was not run"
            ),
        ));
    }
}
