//! Items the gateway shows for work it does itself: a hosted call it runs (`mcp_call`,
//! `web_search_call`, `image_generation_call` with its partial images) shown as started and
//! finished around the call, an item it produced whole
//! (`mcp_list_tools`, `mcp_approval_request`), and a search the provider ran.
//!
//! Not here: running anything (the gateway does; this only shows it).

use toolbridge_wire::responses::{
    EventKind, ImageGenerationCallItem, McpCallItem, OutputItem, StreamEvent, Tool,
    ToolSearchCallItem, ToolSearchOutputItem, WebSearchCallItem,
};

use super::machine::Assembler;

/// A hosted item the gateway shows for a call it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Hosted {
    /// An `mcp_call` item (MCP tools, and built-ins under the `toolbridge` label).
    Mcp {
        server_label: String,
        name: String,
        arguments: String,
    },
    /// A `web_search_call` item (the gateway's search serving `web_search`).
    WebSearch { query: String },
    /// An `image_generation_call` item (the gateway's images backend serving
    /// `image_generation`): the options it is made with; its id and status are the slot's.
    Image(Box<ImageGenerationCallItem>),
    /// A `tool_search_call` item (`execution: "server"`: the gateway's search over the
    /// deferred tools), followed once it ran by a `tool_search_output` item.
    ToolSearch {
        call_id: String,
        arguments: serde_json::Value,
    },
}

/// A hosted item shown as started, to be finished when its call returns.
#[derive(Debug)]
pub struct HostedSlot {
    index: usize,
    id: String,
    hosted: Hosted,
}

impl HostedSlot {
    /// The item's id (`mcp_…`, `ws_…`, `ig_…`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// True for an `image_generation_call` item.
    pub fn is_image(&self) -> bool {
        matches!(self.hosted, Hosted::Image(_))
    }

    /// True for a gateway-run `tool_search_call` item.
    pub fn is_tool_search(&self) -> bool {
        matches!(self.hosted, Hosted::ToolSearch { .. })
    }
}

impl Assembler {
    /// Shows a call the gateway is about to run: the item, `in_progress`.
    pub fn hosted_start(&mut self, hosted: Hosted, out: &mut Vec<StreamEvent>) -> HostedSlot {
        self.close_current(out);
        self.saw_output = true;
        let index = self.open_slot();
        let id = match &hosted {
            Hosted::Mcp { .. } => self.next_id("mcp"),
            Hosted::WebSearch { .. } => self.next_id("ws"),
            Hosted::Image(_) => self.next_id("ig"),
            Hosted::ToolSearch { .. } => self.next_id("tsc"),
        };
        let slot = HostedSlot { index, id, hosted };
        let item = hosted_item(&slot, "in_progress", None);
        self.push(
            out,
            EventKind::OutputItemAdded {
                output_index: index,
                item,
            },
        );
        let (item_id, output_index) = (slot.id.clone(), index);
        let events = match &slot.hosted {
            Hosted::Mcp { arguments, .. } => vec![
                EventKind::McpCallArgumentsDelta {
                    item_id: item_id.clone(),
                    output_index,
                    delta: arguments.clone(),
                },
                EventKind::McpCallArgumentsDone {
                    item_id: item_id.clone(),
                    output_index,
                    arguments: arguments.clone(),
                },
                EventKind::McpCallInProgress {
                    item_id,
                    output_index,
                },
            ],
            Hosted::WebSearch { .. } => vec![
                EventKind::WebSearchCallInProgress {
                    item_id: item_id.clone(),
                    output_index,
                },
                EventKind::WebSearchCallSearching {
                    item_id,
                    output_index,
                },
            ],
            Hosted::Image(_) => vec![
                EventKind::ImageGenerationCallInProgress {
                    item_id: item_id.clone(),
                    output_index,
                },
                EventKind::ImageGenerationCallGenerating {
                    item_id,
                    output_index,
                },
            ],
            Hosted::ToolSearch { .. } => Vec::new(),
        };
        for kind in events {
            self.push(out, kind);
        }
        slot
    }

    /// Finishes a hosted item with its call's result (`Err`: the tool's error message).
    pub fn hosted_finish(
        &mut self,
        slot: HostedSlot,
        result: Result<String, String>,
        out: &mut Vec<StreamEvent>,
    ) {
        let ok = result.is_ok();
        if slot.is_image() {
            // An image's own outcome comes through `hosted_finish_image`; here only its status.
            let item = ImageGenerationCallItem {
                status: (if ok { "completed" } else { "failed" }).to_owned(),
                ..ImageGenerationCallItem::default()
            };
            return self.hosted_finish_image(slot, item, out);
        }
        let (item_id, output_index) = (slot.id.clone(), slot.index);
        let event = match (&slot.hosted, ok) {
            (Hosted::Mcp { .. }, true) => EventKind::McpCallCompleted {
                item_id,
                output_index,
            },
            (Hosted::Mcp { .. }, false) => EventKind::McpCallFailed {
                item_id,
                output_index,
            },
            (Hosted::WebSearch { .. }, _) => EventKind::WebSearchCallCompleted {
                item_id,
                output_index,
            },
            // Finished by `hosted_finish_image` above.
            (Hosted::Image(_), _) => return,
            // A search that could not run: the call failed, nothing found.
            (Hosted::ToolSearch { .. }, true) => {
                return self.hosted_finish_search(slot, Vec::new(), out);
            }
            (Hosted::ToolSearch { .. }, false) => {
                let item = hosted_item(&slot, "failed", None);
                return self.done(slot.index, item, out);
            }
        };
        self.push(out, event);
        let status = if ok { "completed" } else { "failed" };
        let item = hosted_item(&slot, status, Some(result));
        self.done(slot.index, item, out);
    }

    /// Finishes a gateway-run `tool_search_call` (completed) and shows the tools it found as a
    /// `tool_search_output` item after it.
    pub fn hosted_finish_search(
        &mut self,
        slot: HostedSlot,
        tools: Vec<Tool>,
        out: &mut Vec<StreamEvent>,
    ) {
        let item = hosted_item(&slot, "completed", None);
        self.done(slot.index, item, out);
        let Hosted::ToolSearch { call_id, .. } = &slot.hosted else {
            return;
        };
        let id = self.next_id("tso");
        let found = OutputItem::ToolSearchOutput(ToolSearchOutputItem {
            id: Some(id),
            call_id: Some(call_id.clone()),
            execution: Some("server".to_owned()),
            status: Some("completed".to_owned()),
            tools,
            extra: serde_json::Map::new(),
        });
        self.gateway_item(found, out);
    }

    /// Shows a partial image of an `image_generation_call` in progress (`index` from 0).
    pub fn hosted_partial_image(
        &mut self,
        slot: &HostedSlot,
        index: u32,
        b64: String,
        out: &mut Vec<StreamEvent>,
    ) {
        self.push(
            out,
            EventKind::ImageGenerationCallPartialImage {
                item_id: slot.id.clone(),
                output_index: slot.index,
                partial_image_index: index,
                partial_image_b64: b64,
            },
        );
    }

    /// Finishes an `image_generation_call` with its outcome (`item`: status, result or error,
    /// the options used; its id is the slot's): `.completed` when it has an image, then the
    /// item done.
    pub fn hosted_finish_image(
        &mut self,
        slot: HostedSlot,
        mut item: ImageGenerationCallItem,
        out: &mut Vec<StreamEvent>,
    ) {
        item.id = slot.id.clone();
        if let Hosted::Image(declared) = &slot.hosted {
            item.action = item.action.or_else(|| declared.action.clone());
            item.background = item.background.or_else(|| declared.background.clone());
            item.output_format = item
                .output_format
                .or_else(|| declared.output_format.clone());
            item.quality = item.quality.or_else(|| declared.quality.clone());
            item.size = item.size.or_else(|| declared.size.clone());
        }
        if item.status == "completed" {
            self.push(
                out,
                EventKind::ImageGenerationCallCompleted {
                    item_id: slot.id.clone(),
                    output_index: slot.index,
                },
            );
        }
        self.done(slot.index, OutputItem::ImageGenerationCall(item), out);
    }

    /// Shows an item the gateway produced whole (an `mcp_list_tools` listing, an
    /// `mcp_approval_request`, an approved call it ran before the model's turn): added and done
    /// at once, with the listing's own events.
    pub fn gateway_item(&mut self, item: OutputItem, out: &mut Vec<StreamEvent>) {
        self.close_current(out);
        let index = self.open_slot();
        let id = item.id().unwrap_or_default().to_owned();
        self.push(
            out,
            EventKind::OutputItemAdded {
                output_index: index,
                item: item.clone(),
            },
        );
        if let OutputItem::McpListTools(listing) = &item {
            self.push(
                out,
                EventKind::McpListToolsInProgress {
                    item_id: id.clone(),
                    output_index: index,
                },
            );
            let end = if listing.error.is_some() {
                EventKind::McpListToolsFailed {
                    item_id: id,
                    output_index: index,
                }
            } else {
                EventKind::McpListToolsCompleted {
                    item_id: id,
                    output_index: index,
                }
            };
            self.push(out, end);
        }
        self.done(index, item, out);
    }

    /// Shows a search the provider ran as a completed `web_search_call` item.
    pub(super) fn web_search_item(&mut self, query: String, out: &mut Vec<StreamEvent>) {
        let id = self.next_id("ws");
        let index = self.open_slot();
        let item = |status: &str| {
            OutputItem::WebSearchCall(WebSearchCallItem {
                id: id.clone(),
                status: status.to_owned(),
                action: serde_json::json!({"type": "search", "query": query}),
            })
        };
        self.push(
            out,
            EventKind::OutputItemAdded {
                output_index: index,
                item: item("in_progress"),
            },
        );
        for kind in [
            EventKind::WebSearchCallInProgress {
                item_id: id.clone(),
                output_index: index,
            },
            EventKind::WebSearchCallSearching {
                item_id: id.clone(),
                output_index: index,
            },
            EventKind::WebSearchCallCompleted {
                item_id: id.clone(),
                output_index: index,
            },
        ] {
            self.push(out, kind);
        }
        self.done(index, item("completed"), out);
    }
}

/// The item of a hosted call, with its result once it has one.
fn hosted_item(
    slot: &HostedSlot,
    status: &str,
    result: Option<Result<String, String>>,
) -> OutputItem {
    match &slot.hosted {
        Hosted::Mcp {
            server_label,
            name,
            arguments,
        } => {
            let (output, error) = match result {
                Some(Ok(output)) => (Some(output), None),
                Some(Err(error)) => (None, Some(error)),
                None => (None, None),
            };
            OutputItem::McpCall(McpCallItem {
                id: slot.id.clone(),
                server_label: server_label.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                output,
                error,
                status: Some(status.to_owned()),
                approval_request_id: None,
            })
        }
        Hosted::WebSearch { query } => OutputItem::WebSearchCall(WebSearchCallItem {
            id: slot.id.clone(),
            status: status.to_owned(),
            action: serde_json::json!({"type": "search", "query": query}),
        }),
        Hosted::Image(declared) => OutputItem::ImageGenerationCall(ImageGenerationCallItem {
            id: slot.id.clone(),
            status: status.to_owned(),
            ..declared.as_ref().clone()
        }),
        Hosted::ToolSearch { call_id, arguments } => {
            OutputItem::ToolSearchCall(ToolSearchCallItem {
                id: Some(slot.id.clone()),
                call_id: Some(call_id.clone()),
                execution: Some("server".to_owned()),
                arguments: arguments.clone(),
                status: Some(status.to_owned()),
                extra: serde_json::Map::new(),
            })
        }
    }
}
