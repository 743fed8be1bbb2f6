//! Tool planning: one [`ToolPlan`] per request, computed once, pure.
//!
//! Every declared tool gets a [`Decision`] with a stable reason code: passed natively, degraded to
//! a function the provider can take, reserved for the gateway, ignored, or rejected. Names are
//! allocated for the provider's charset and length and recorded in a [`NameMap`] in both
//! directions; the translator encodes history with it and the reconstruction restores every call
//! through it. Nothing else maps names or types back.

mod candidates;
mod capabilities;
mod choice;
mod context;
mod hosted;
mod names;
mod native;
mod passthrough;
mod responses;
pub(crate) mod schemas;
mod search;
mod tool_types;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolbridge_wire::RawJson;
use toolbridge_wire::responses::{Diagnostic, Tool};

use candidates::Candidate;
pub use capabilities::{
    FoundTools, NativeFileSearch, NativeMcp, NativeWebSearch, ResponsesTools, ToolCapabilities,
    UnsupportedPolicy,
};
pub use context::{FOUND_PARAM, OVER_TOOL_LIMIT};
pub use names::{NameMap, sanitize};
pub use native::{NativeMcpServer, NativeSearch, NativeTool};
pub use search::{
    CALL_FOUND_TOOL, TOOL_SEARCH_DESCRIPTION, TOOL_SEARCH_DISPATCHED_DESCRIPTION, is_deferred,
    is_hosted_search, tool_search_parameters,
};
pub use tool_types::{ToolTypeDecision, ToolTypes};
// The planning stages' helpers, for the tool-type decisions (`tool_types`).
use candidates::ignored;
use passthrough::drop_absent_fields;

use crate::Error;
use crate::canonical::{CanonicalRequest, ContextTool};

/// The decision for one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Native,
    Degraded,
    /// Run by the gateway (reserved for gateway-executed tools).
    Gateway,
    Ignored,
    Rejected,
}

impl Decision {
    /// The decision's word, as the diagnostics, metrics, matrix and console say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Degraded => "degraded",
            Self::Gateway => "gateway",
            Self::Ignored => "ignored",
            Self::Rejected => "rejected",
        }
    }
}

/// Who a provider-side tool name stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Identity {
    Function {
        namespace: Option<String>,
        name: String,
    },
    Custom {
        namespace: Option<String>,
        name: String,
    },
    LocalShell,
    Shell,
    ApplyPatch,
    /// A client-run `tool_search` sent as a function; its calls become `tool_search_call` items.
    ToolSearch,
    /// The function through which the tools a `tool_search` found are called
    /// ([`FoundTools::Dispatched`]); each call is restored as the found tool's.
    CallFound,
    /// A tool the gateway runs itself: a built-in (server `toolbridge`) or an MCP server's.
    Gateway {
        server: String,
        name: String,
    },
}

impl Identity {
    /// The name the tool was declared with (the Responses tool type for built-in types).
    pub fn declared_name(&self) -> &str {
        match self {
            Self::Function { name, .. }
            | Self::Custom { name, .. }
            | Self::Gateway { name, .. } => name,
            Self::LocalShell => "local_shell",
            Self::Shell => "shell",
            Self::ApplyPatch => "apply_patch",
            Self::ToolSearch => "tool_search",
            Self::CallFound => search::CALL_FOUND_TOOL,
        }
    }

    /// The provider name this identity would like: its own name when it is already valid,
    /// `namespace__name` for namespaced tools.
    fn desired_name(&self) -> String {
        match self {
            Self::Function {
                namespace: Some(ns),
                name,
            }
            | Self::Custom {
                namespace: Some(ns),
                name,
            } => format!("{ns}__{name}"),
            other => other.declared_name().to_owned(),
        }
    }
}

/// One declared tool and what was decided for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEntry {
    /// Its request path (`tools[3]`, `tools[5].tools[1]`).
    pub param: String,
    /// Its Responses tool type.
    pub kind: String,
    /// Its declared name, if it has one.
    pub name: Option<String>,
    pub decision: Decision,
    /// A stable snake_case reason code.
    pub reason: &'static str,
    /// The name the provider sees, for tools sent as functions.
    pub provider_name: Option<String>,
}

/// A tool as it goes upstream, dialect-neutral.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamTool {
    Function {
        name: String,
        description: Option<String>,
        parameters: RawJson,
        strict: Option<bool>,
    },
    /// A tool the provider runs itself, neutral: each dialect renders it.
    Native(NativeTool),
}

/// The plan of one request's tools.
#[derive(Debug, Clone, Default)]
pub struct ToolPlan {
    pub entries: Vec<PlanEntry>,
    /// What goes upstream, in declaration order.
    pub upstream: Vec<UpstreamTool>,
    /// Extra top-level request fields a native tool needs (`enable_search`).
    pub request_flags: Map<String, Value>,
    /// `tool_choice` in the Chat shape; `None` to omit it.
    pub tool_choice: Option<Value>,
    /// False when tools must not be sent at all (`tool_choice: "none"` where the provider cannot
    /// say it).
    pub send_tools: bool,
    pub names: NameMap,
    /// Provider builtin functions (Kimi's `$web_search`) whose calls the gateway answers itself by
    /// echoing their arguments back, so the provider runs them; never returned to the client.
    pub echo_tools: Vec<String>,
    /// Tools a `tool_search` found that are called through `call_found_tool` instead of being
    /// declared ([`FoundTools::Dispatched`]).
    pub dispatched: Vec<Identity>,
    pub diagnostics: Vec<Diagnostic>,
}

impl ToolPlan {
    /// For a tool called through `call_found_tool`: that function's provider name and the
    /// tool's own, which its calls carry as `name`.
    pub fn dispatched(&self, identity: &Identity) -> Option<(&str, &str)> {
        if !self.dispatched.contains(identity) {
            return None;
        }
        Some((
            self.names.provider_name(&Identity::CallFound)?,
            self.names.provider_name(identity)?,
        ))
    }

    /// Whether every tool goes upstream as declared, names unchanged (a native Responses
    /// upstream that takes all of them): the request's tools and calls pass untouched.
    pub fn passes_tools_as_declared(&self) -> bool {
        self.entries
            .iter()
            .all(|e| e.reason == reasons::RESPONSES_NATIVE)
    }
}

/// Reason codes of decisions.
pub mod reasons {
    pub const FUNCTION: &str = "function";
    pub const CUSTOM_AS_FUNCTION: &str = "custom_as_function";
    pub const NAMESPACE_FLATTENED: &str = "namespace_flattened";
    pub const LOCAL_SHELL_AS_FUNCTION: &str = "local_shell_as_function";
    pub const SHELL_AS_FUNCTION: &str = "shell_as_function";
    pub const APPLY_PATCH_AS_FUNCTION: &str = "apply_patch_as_function";
    pub const NATIVE_WEB_SEARCH: &str = "native_web_search";
    pub const NATIVE_FILE_SEARCH: &str = "native_file_search";
    pub const NATIVE_MCP: &str = "native_mcp";
    pub const NO_PROVIDER_SUPPORT: &str = "no_provider_support";
    pub const WEB_ACCESS_DISABLED: &str = "web_access_disabled_by_client";
    pub const NO_VECTOR_STORE: &str = "no_vector_store_ids";
    pub const NOT_IN_ALLOWED_TOOLS: &str = "not_in_allowed_tools";
    /// A native Responses upstream takes the tool as declared.
    pub const RESPONSES_NATIVE: &str = "responses_native";
    /// A tool the gateway runs itself (a built-in or an MCP server's), declared upstream as a
    /// function.
    pub const GATEWAY_TOOL: &str = "gateway_tool";
    /// A client-run tool type the profile says the provider takes as declared (`tool_types`).
    pub const NATIVE_CUSTOM: &str = "native_custom";
    pub const NATIVE_LOCAL_SHELL: &str = "native_local_shell";
    pub const NATIVE_SHELL: &str = "native_shell";
    pub const NATIVE_APPLY_PATCH: &str = "native_apply_patch";
    pub const NATIVE_TOOL_SEARCH: &str = "native_tool_search";
    /// A client-run `tool_search` sent as a function; calls restored as `tool_search_call`.
    pub const TOOL_SEARCH_AS_FUNCTION: &str = "tool_search_as_function";
    /// `web_search` the provider lacks, served by the gateway's search tool.
    pub const GATEWAY_WEB_SEARCH: &str = "gateway_web_search";
    /// An `mcp` server the provider cannot reach, listed and called by the gateway.
    pub const GATEWAY_MCP: &str = "gateway_mcp";
    /// `image_generation` the provider lacks, served by the gateway's images backend.
    pub const GATEWAY_IMAGE_GENERATION: &str = "gateway_image_generation";
    /// The hosted `tool_search`, run by the gateway over the deferred tools.
    pub const GATEWAY_TOOL_SEARCH: &str = "gateway_tool_search";
    /// A tool marked `defer_loading`, offered only once the gateway's `tool_search` finds it.
    pub const DEFERRED: &str = "deferred_until_found";
    /// A tool a client-run `tool_search` found, called through `call_found_tool`.
    pub const FOUND_DISPATCHED: &str = "found_tool_dispatched";
    /// `call_found_tool` itself, declared beside a `tool_search` sent as a function.
    pub const CALL_FOUND: &str = "call_found_tool";
}

/// The name of Kimi's builtin web search function.
pub const KIMI_WEB_SEARCH: &str = "$web_search";

/// A tool the gateway runs itself, offered to the model as a function.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayTool {
    /// `toolbridge` for built-ins, else the MCP server's label.
    pub server: String,
    pub name: String,
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
}

/// What the gateway runs itself for one request: the tools it offers the model, and which
/// declared hosted tools it serves in the provider's place.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayOffer {
    pub tools: Vec<GatewayTool>,
    /// The gateway serves `web_search` (with its own search tool, among `tools`).
    pub web_search: bool,
    /// Labels of declared `mcp` servers the gateway listed (their tools are among `tools`).
    pub mcp_servers: Vec<String>,
    /// The gateway serves `image_generation` (with its images backend, among `tools`).
    pub image_generation: bool,
    /// The gateway serves the hosted `tool_search` (its own `tool_search`, among `tools`): the
    /// tools marked `defer_loading` stay out of the upstream tool list until a search finds them.
    pub tool_search: bool,
}

/// Plans `tools` and `tool_choice` for a provider with `caps`.
pub fn plan(
    tools: &[Tool],
    tool_choice: Option<&Value>,
    caps: &ToolCapabilities,
) -> Result<ToolPlan, Error> {
    plan_with(tools, tool_choice, caps, &GatewayOffer::default())
}

/// Plans as [`plan`] does, with the tools the gateway runs itself: they get the `gateway`
/// decision, go upstream as functions (named after the client's tools, made unique), and their
/// calls are never handed to the client. A native Responses upstream gets no gateway tools.
pub fn plan_with(
    tools: &[Tool],
    tool_choice: Option<&Value>,
    caps: &ToolCapabilities,
    offer: &GatewayOffer,
) -> Result<ToolPlan, Error> {
    plan_all(tools, &[], tool_choice, caps, offer)
}

/// Plans a whole request: its declared tools, then the tools its conversation declares
/// (`additional_tools`, the findings of `tool_search_output` items; see `context`).
pub fn plan_request(
    req: &CanonicalRequest,
    caps: &ToolCapabilities,
    offer: &GatewayOffer,
) -> Result<ToolPlan, Error> {
    plan_all(
        &req.tools,
        &req.context_tools,
        req.tool_choice.as_ref(),
        caps,
        offer,
    )
}

fn plan_all(
    tools: &[Tool],
    context: &[ContextTool],
    tool_choice: Option<&Value>,
    caps: &ToolCapabilities,
    offer: &GatewayOffer,
) -> Result<ToolPlan, Error> {
    if caps.responses_native {
        // A Responses upstream reads the conversation's tools from the input it gets as is,
        // unless its `tool_search` goes as a function; its declared tools are planned per the
        // profile's `tools.responses`.
        return responses::plan(tools, context, tool_choice, caps, offer);
    }
    let mut diagnostics = Vec::new();
    let mut flags = Map::new();
    let mut candidates = candidates::declared(tools, caps, offer, &mut flags, &mut diagnostics)?;
    let found = context::candidates(context, caps, &candidates, &mut flags, &mut diagnostics);
    let dispatched = search::dispatch(&mut candidates, found, caps, context);
    candidates.extend(candidates::offered(offer));
    let mut names = NameMap::allocate(
        candidates
            .iter()
            .filter_map(|c| c.identity.clone().map(|id| (c.entry.param.clone(), id))),
        caps,
    )?;
    let (mut entries, mut upstream) = named(candidates, &names);
    if let Some(max) = caps.max_tools {
        let dropped = context::fit_limit(&mut upstream, max, &mut diagnostics);
        context::mark_dropped(&mut entries, &dropped);
    }

    let mut plan = ToolPlan {
        entries,
        upstream: Vec::new(),
        request_flags: flags,
        tool_choice: None,
        send_tools: true,
        names: NameMap::default(),
        echo_tools: Vec::new(),
        dispatched,
        diagnostics,
    };
    let upstream = choice::apply(&mut plan, upstream, tool_choice, caps, &names)?;
    plan.upstream = upstream;
    if let Some(max) = caps.max_tools
        && plan.send_tools
        && plan.upstream.len() > max
    {
        return Err(Error::TooManyTools {
            count: plan.upstream.len(),
            limit: max,
        });
    }
    if !plan.send_tools {
        plan.upstream.clear();
        plan.request_flags.clear();
    }
    for tool in &plan.upstream {
        if let UpstreamTool::Native(native) = tool
            && let Some(name) = native.echoed_builtin()
        {
            plan.echo_tools.push(name.to_owned());
        }
    }
    std::mem::swap(&mut plan.names, &mut names);
    Ok(plan)
}

/// The candidates under their allocated provider names: the plan's entries, and what goes
/// upstream by declared parameter.
fn named(
    candidates: Vec<Candidate>,
    names: &NameMap,
) -> (Vec<PlanEntry>, Vec<(String, UpstreamTool)>) {
    let mut entries = Vec::with_capacity(candidates.len());
    let mut upstream = Vec::with_capacity(candidates.len());
    for mut c in candidates {
        if let Some(identity) = &c.identity {
            let provider = names.provider_name(identity).map(str::to_owned);
            match (&provider, &mut c.upstream) {
                (Some(p), Some(UpstreamTool::Function { name, .. })) => name.clone_from(p),
                // A native custom tool goes as declared, under its provider-safe name.
                (
                    Some(p),
                    Some(UpstreamTool::Native(NativeTool::AsDeclared(Value::Object(tool)))),
                ) if tool.get("name").is_some_and(Value::is_string) => {
                    tool.insert("name".to_owned(), Value::String(p.clone()));
                }
                _ => {}
            }
            c.entry.provider_name = provider;
        }
        if let Some(u) = c.upstream {
            upstream.push((c.entry.param.clone(), u));
        }
        entries.push(c.entry);
    }
    (entries, upstream)
}

/// Identities by request path, for the translator.
pub type IdentityIndex = HashMap<String, Identity>;

#[cfg(test)]
mod context_tests;
#[cfg(test)]
mod tests;
