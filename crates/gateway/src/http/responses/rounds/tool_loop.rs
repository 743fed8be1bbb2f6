//! The gateway's tool loop: when the upstream calls tools the gateway runs itself, the gateway
//! runs them (concurrently when the calls are parallel), shows them as hosted items, appends the
//! calls and their results to the request, and calls the upstream again — within the same
//! response, up to a step limit and a time budget. A round that also calls client tools ends the
//! response after its gateway calls ran: the client gets its calls, and the gateway's exchange is
//! in the output as `mcp_call` items, which a stateless client replays (they become the call and
//! its result upstream again).
//!
//! Each call is resolved before it runs by the tool library's model transport over the
//! request's selection of the gateway's typed source (`ToolRounds::transport`): the provider
//! name mapped to the tool, the arguments checked and parsed into the action to run; a call that
//! does not resolve gets the transport's typed error as its result. The calls run in
//! `tool_calls`.
//!
//! A round that ran the gateway's `tool_search` (the hosted form, over the request's deferred
//! tools) adds the tools found to the conversation and replans, so the next round offers them;
//! the calls of later rounds restore by the new plan's names.
//!
//! [`Continuation`] is what every gateway-sent round shares (the tool loop's rounds and the
//! repair's re-ask): the conversation so far, the plan and the provider, and one `send` that
//! appends an exchange and sends the next request.

use std::sync::Arc;

use axum::body::Bytes;
use toolbridge_core::assemble::Assembler;
use toolbridge_providers::dialect::Source;
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::{CreateResponse, StreamEvent};

use crate::error::GatewayError;
use crate::http::responses::meter::Meter;
use crate::http::responses::{sealed_by_gateway, translate};

use toolbridge_core::assemble::{GatewayCall, Hosted, HostedSlot, RoundOutput};
use toolbridge_core::canonical::{AssistantTurn, CallKind, CanonicalRequest, ToolCall, Turn};
use toolbridge_core::plan::{GatewayOffer, NameMap, ToolPlan};
use toolbridge_wire::responses::Tool;

use crate::tools::images::{self, EarlierImages, ImageOptions, Partial};
use crate::tools::{Action, Deferred, GatewaySource, GatewayTools};
use toolbridge_tools::typed::{ModelTransport, ToolSelection};

use toolbridge_wire::responses::ImageGenerationCallItem;

/// Why a loop stopped short: the response's `incomplete_details.reason`.
pub(super) const OUT_OF_STEPS: &str = "max_tool_calls";

/// What a response needs to send another upstream round of its own: the conversation so far
/// and where to send it.
pub(in crate::http::responses) struct Continuation {
    pub(in crate::http::responses) upstreams: Arc<crate::upstream::Upstreams>,
    pub(in crate::http::responses) provider: crate::config::Provider,
    /// Which of the provider's keys every round sends (the first round's).
    pub(in crate::http::responses) affinity: crate::upstream::Affinity,
    pub(in crate::http::responses) profile: Profile,
    pub(in crate::http::responses) upstream_model: String,
    /// The client's request (its non-history fields are read by the translators).
    pub(in crate::http::responses) req: Arc<CreateResponse>,
    /// The conversation so far, growing by one exchange per round.
    pub(in crate::http::responses) canonical: CanonicalRequest,
    pub(in crate::http::responses) plan: ToolPlan,
    /// What the gateway runs itself for this request: a replan keeps it.
    pub(in crate::http::responses) offer: GatewayOffer,
}

impl Continuation {
    /// Appends one exchange (an assistant turn, then a result per call) to the conversation and
    /// sends the next request: the upstream's answer and the body sent.
    pub(super) async fn send(
        &mut self,
        turn: AssistantTurn,
        results: Vec<(String, String)>,
    ) -> Result<(reqwest::Response, Bytes), GatewayError> {
        self.canonical.turns.push(Turn::Assistant(turn));
        for (call_id, output) in results {
            self.canonical.turns.push(Turn::ToolResult {
                call_id,
                output: output.into(),
            });
        }
        // The first round's translation diagnostics are already on the response.
        let mut diagnostics = Vec::new();
        let outgoing = translate(
            self.provider.dialect,
            &Source {
                req: &self.req,
                raw: None,
                canonical: &self.canonical,
                stored: false,
                sealed_by_gateway: &sealed_by_gateway,
                provenance: None,
            },
            &self.plan,
            &self.profile,
            &self.upstream_model,
            &mut diagnostics,
        );
        let payload = Bytes::from(outgoing.payload());
        let response = self
            .upstreams
            .send(
                &self.provider,
                &self.upstream_model,
                &payload,
                outgoing.stream(),
                self.affinity,
            )
            .await?;
        Ok((response, payload))
    }
}

/// What one response's tool loop needs besides its [`Continuation`].
pub(in crate::http::responses) struct ToolRounds {
    pub(in crate::http::responses) tools: Arc<GatewayTools>,
    /// Resolves the model's calls: provider name → the typed source's tool, arguments checked
    /// and parsed into the action to run, within this request's selection.
    pub(in crate::http::responses) transport: ModelTransport<ToolSelection<Action>>,
    /// The typed source the selection is of (its ids, for the names of a new plan).
    pub(in crate::http::responses) source: Arc<GatewaySource>,
    pub(in crate::http::responses) steps_left: u32,
    /// What is left of the request's `max_tool_calls`, when it set one.
    pub(in crate::http::responses) calls_left: Option<u64>,
    pub(in crate::http::responses) deadline: tokio::time::Instant,
    /// Reports each call on the session's side channel.
    pub(in crate::http::responses) meter: Meter,
    /// The loop's step, from 1 for the first round's calls.
    pub(in crate::http::responses) step: u32,
    /// The request's own MCP servers the gateway connected.
    pub(in crate::http::responses) listed: Arc<Vec<crate::tools::McpServer>>,
    /// The request's deferred tools, for the gateway's `tool_search`.
    pub(in crate::http::responses) deferred: Arc<Deferred>,
    /// How many more searches this response may run.
    pub(in crate::http::responses) searches_left: u32,
    /// The request's declared `image_generation` options.
    pub(in crate::http::responses) image_options: ImageOptions,
    /// Images of the conversation, for edits (bounded).
    pub(in crate::http::responses) earlier: EarlierImages,
}

/// One gateway call's outcome: what the model reads, and the image item of an image call.
pub(in crate::http::responses) struct CallOutcome {
    pub(super) text: Result<String, String>,
    pub(super) image: Option<ImageGenerationCallItem>,
    /// The tools a `tool_search` found, as declared.
    pub(super) found: Option<Vec<Tool>>,
}

/// A round's calls running: the future the transport polls (it owns the loop's state and
/// hands it back), and the partial images it streams.
pub(in crate::http::responses) type ToolRun =
    std::pin::Pin<Box<dyn std::future::Future<Output = (ToolRounds, Vec<CallOutcome>)> + Send>>;

/// Calls of one round, shown as started and waiting to run.
pub(in crate::http::responses) struct PendingTools {
    pub(super) calls: Vec<GatewayCall>,
    /// Each call's hosted item; `None` when gateway calls are hidden.
    pub(super) slots: Vec<Option<HostedSlot>>,
    pub(super) round: RoundOutput,
    /// Some calls wait for the client's approval: the response ends after this round.
    pub(super) ends: bool,
}

impl ToolRounds {
    /// Whether the loop may run these calls and go on: steps, `max_tool_calls` and time left.
    pub(super) fn allows(&self, calls: usize) -> bool {
        self.steps_left > 0
            && self.calls_left.is_none_or(|left| left >= calls as u64)
            && tokio::time::Instant::now() < self.deadline
    }

    /// Shows the calls as started (unless hidden): the hosted items go out before the calls
    /// run. A call that waits for the client's approval is not run: it becomes an
    /// `mcp_approval_request` item (shown whatever `show` says: the client must act on it), and
    /// the response ends after the round.
    pub(super) fn start(
        &self,
        calls: Vec<GatewayCall>,
        round: RoundOutput,
        assembler: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) -> PendingTools {
        let (asks, calls): (Vec<GatewayCall>, Vec<GatewayCall>) = calls
            .into_iter()
            .partition(|c| GatewayTools::needs_approval(&c.server, &c.name, &self.listed));
        for call in &asks {
            let id = assembler.item_id("mcpr");
            assembler.gateway_item(
                toolbridge_wire::responses::OutputItem::McpApprovalRequest(
                    toolbridge_wire::responses::McpApprovalRequestItem {
                        id,
                        server_label: call.server.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                    },
                ),
                out,
            );
        }
        let slots = calls
            .iter()
            .map(|call| {
                // An image is what the client asked for: shown whatever `show` says.
                (self.tools.show || GatewayTools::is_image(&call.server, &call.name))
                    .then(|| assembler.hosted_start(hosted(call, &self.image_options), out))
            })
            .collect();
        PendingTools {
            calls,
            slots,
            round,
            ends: !asks.is_empty(),
        }
    }

    /// Finishes the hosted items with the outcomes.
    pub(super) fn finish_items(
        pending: &mut PendingTools,
        outcomes: &[CallOutcome],
        assembler: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) {
        for (slot, outcome) in std::mem::take(&mut pending.slots).into_iter().zip(outcomes) {
            match (slot, &outcome.image) {
                (Some(slot), Some(image)) if slot.is_image() => {
                    assembler.hosted_finish_image(slot, image.clone(), out);
                }
                (Some(slot), _) if slot.is_tool_search() && outcome.text.is_ok() => {
                    let found = outcome.found.clone().unwrap_or_default();
                    assembler.hosted_finish_search(slot, found, out);
                }
                (Some(slot), _) => assembler.hosted_finish(slot, outcome.text.clone(), out),
                (None, _) => {}
            }
        }
    }

    /// Shows a partial image of call `index` (its item must be shown).
    pub(in crate::http::responses) fn show_partial(
        pending: &PendingTools,
        index: usize,
        partial: Partial,
        assembler: &mut Assembler,
        out: &mut Vec<StreamEvent>,
    ) {
        if let Some(Some(slot)) = pending.slots.get(index) {
            assembler.hosted_partial_image(slot, partial.index, partial.b64, out);
        }
    }

    /// Appends the round (its text, reasoning and calls, then each result) to the conversation
    /// and sends the next request: the upstream's answer, the body sent, and the new plan's
    /// names when a search found tools (the loop replanned with them).
    pub(super) async fn send_next(
        &mut self,
        continuation: &mut Continuation,
        pending: PendingTools,
        mut outcomes: Vec<CallOutcome>,
    ) -> Result<(reqwest::Response, Bytes, Option<Arc<NameMap>>), GatewayError> {
        let found: Vec<Tool> = outcomes
            .iter_mut()
            .filter_map(|o| o.found.take())
            .flatten()
            .collect();
        let names = if found.is_empty() {
            None
        } else {
            let names = continuation.lift_found(found)?;
            // The new plan's names resolve the next rounds' calls.
            self.transport = self.transport.clone().with_names(self.source.names(&names));
            Some(names)
        };
        self.steps_left = self.steps_left.saturating_sub(1);
        if let Some(left) = &mut self.calls_left {
            *left = left.saturating_sub(pending.calls.len() as u64);
        }
        let PendingTools { calls, round, .. } = pending;
        let turn = AssistantTurn {
            text: round.text,
            reasoning: round.reasoning,
            reasoning_signature: round.reasoning_signature,
            redacted_reasoning: round.reasoning_redacted,
            sealed_reasoning: Vec::new(),
            tool_calls: calls
                .iter()
                .map(|c| ToolCall {
                    call_id: c.call_id.clone(),
                    kind: CallKind::Gateway {
                        server: c.server.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                })
                .collect(),
        };
        let results = calls
            .into_iter()
            .zip(outcomes)
            .map(|(call, outcome)| (call.call_id, outcome.text.unwrap_or_else(|error| error)))
            .collect();
        let (response, payload) = continuation.send(turn, results).await?;
        Ok((response, payload, names))
    }
}

/// The hosted item a gateway call shows as: a search as `web_search_call`, an image as
/// `image_generation_call`, any other tool as `mcp_call` under its server label.
fn hosted(call: &GatewayCall, options: &ImageOptions) -> Hosted {
    if GatewayTools::is_image(&call.server, &call.name) {
        let args = images::ImageArgs::parse(&call.arguments).unwrap_or_default();
        return Hosted::Image(Box::new(options.item(&args)));
    }
    if GatewayTools::is_search(&call.server, &call.name) {
        let query = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|v| v["query"].as_str().map(str::to_owned))
            .unwrap_or_default();
        return Hosted::WebSearch { query };
    }
    if GatewayTools::is_tool_search(&call.server, &call.name) {
        let arguments = serde_json::from_str(&call.arguments)
            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
        return Hosted::ToolSearch {
            call_id: call.call_id.clone(),
            arguments,
        };
    }
    Hosted::Mcp {
        server_label: call.server.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    }
}
