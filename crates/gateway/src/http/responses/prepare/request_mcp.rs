//! The request's own MCP servers the gateway serves and the calls the client approved: both
//! happen in the prepare stage, before the model's turn. Not here: the gateway's configured tools
//! and the tool loop (`tool_loop`).

use toolbridge_wire::responses::CreateResponse;

use crate::platform::ids;
use crate::state::AppState;

/// Runs the calls the client approved: each `mcp_approval_response` with its
/// `mcp_approval_request` earlier in the input becomes one `mcp_call` item there (the call and
/// its result, for the model), and a call that ran is shown in this response's output. A refusal
/// becomes a failed call whose error tells the model not to try again without asking.
pub(super) async fn resolve_approvals(
    state: &AppState,
    req: &mut CreateResponse,
    listed: &[crate::tools::McpServer],
    source: Option<&crate::tools::GatewaySource>,
) -> Vec<toolbridge_wire::responses::OutputItem> {
    use toolbridge_wire::responses::{Input, InputItem, McpCallItem, OutputItem};
    let (Some(tools), Some(source), Some(Input::Items(items))) =
        (&state.config.gateway_tools, source, &mut req.input)
    else {
        return Vec::new();
    };
    let answers: Vec<(usize, toolbridge_wire::responses::McpApprovalResponseItem)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            InputItem::McpApprovalResponse(answer) => Some((i, answer.clone())),
            _ => None,
        })
        .collect();
    let mut shown = Vec::new();
    let mut answered = Vec::new();
    for (at, answer) in answers {
        let Some(asked_at) = items.iter().position(|item| {
            matches!(item, InputItem::McpApprovalRequest(r) if r.id == answer.approval_request_id)
        }) else {
            continue;
        };
        let InputItem::McpApprovalRequest(request) = items[asked_at].clone() else {
            continue;
        };
        let (output, error) = if answer.approve {
            match tools
                .run_approved(
                    source,
                    (&request.server_label, &request.name, &request.arguments),
                    listed,
                )
                .await
            {
                Ok(output) => (Some(output), None),
                Err(error) => (None, Some(error)),
            }
        } else {
            let why = answer
                .reason
                .clone()
                .unwrap_or_else(|| "the user did not approve this call".to_owned());
            (
                None,
                Some(crate::tools::error_result(
                    "approval_denied",
                    &format!("{why}; do not call it again without asking"),
                )),
            )
        };
        let call = McpCallItem {
            id: ids::new("mcp"),
            server_label: request.server_label.clone(),
            name: request.name.clone(),
            arguments: request.arguments.clone(),
            status: Some(
                if output.is_some() {
                    "completed"
                } else {
                    "failed"
                }
                .to_owned(),
            ),
            output,
            error,
            approval_request_id: Some(request.id.clone()),
        };
        items[asked_at] = InputItem::McpCall(call.clone());
        answered.push(at);
        if answer.approve {
            shown.push(OutputItem::McpCall(call));
        }
    }
    for at in answered.into_iter().rev() {
        items.remove(at);
    }
    shown
}

/// Connects the request's own `mcp` tools the gateway serves (when `request_mcp` is on and the
/// primary provider has no MCP of its own): the servers listed, and an `mcp_list_tools` item
/// for each (with its error when it could not be listed).
pub(super) async fn connect_request_mcp(
    state: &AppState,
    req: &CreateResponse,
    targets: &[crate::config::Target<'_>],
) -> (
    Vec<crate::tools::McpServer>,
    Vec<toolbridge_wire::responses::OutputItem>,
) {
    let (Some(tools), Some(primary)) = (&state.config.gateway_tools, targets.first()) else {
        return (Vec::new(), Vec::new());
    };
    if primary.provider.profile.tools.mcp.is_some() {
        return (Vec::new(), Vec::new());
    }
    let mut servers = Vec::new();
    let mut listings = Vec::new();
    for tool in req.tools.iter().flatten() {
        let toolbridge_wire::responses::Tool::Other(map) = tool else {
            continue;
        };
        if map.get("type").and_then(|t| t.as_str()) != Some("mcp") {
            continue;
        }
        // Boxed: a request seldom names MCP servers, and the connect's future is large.
        let Some(result) = Box::pin(tools.connect_request_tool(map)).await else {
            continue;
        };
        let label = map
            .get("server_label")
            .and_then(|l| l.as_str())
            .unwrap_or_default()
            .to_owned();
        let (listing, error) = match result {
            Ok(server) => {
                let listing = server.listing();
                servers.push(server);
                (listing, None)
            }
            Err(e) => {
                tracing::warn!(
                    server = label,
                    "a request's MCP server could not be listed: {e}"
                );
                (Vec::new(), Some(e))
            }
        };
        listings.push(toolbridge_wire::responses::OutputItem::McpListTools(
            toolbridge_wire::responses::McpListToolsItem {
                id: ids::new("mcpl"),
                server_label: label,
                tools: listing,
                error,
            },
        ));
    }
    (servers, listings)
}
