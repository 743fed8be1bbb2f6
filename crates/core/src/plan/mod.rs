//! Tool planning: one [`ToolPlan`] per request, computed once, pure.
//!
//! Every declared tool gets a [`Decision`] with a stable reason code: passed natively, degraded to
//! a function the provider can take, reserved for the gateway, ignored, or rejected. Names are
//! allocated for the provider's charset and length and recorded in a [`NameMap`] in both
//! directions; the translator encodes history with it and the reconstruction restores every call
//! through it. Nothing else maps names or types back.

mod choice;
mod names;
mod native;
pub(crate) mod schemas;
mod tool_types;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use toolbridge_wire::responses::{CustomTool, Diagnostic, FunctionTool, Tool};

pub use names::{NameMap, sanitize};
pub use native::{NativeMcpServer, NativeSearch, NativeTool};
pub use tool_types::{ToolTypeDecision, ToolTypes};

use crate::Error;
use crate::diagnostics::{TOOL_DEGRADED, TOOL_IGNORED, diag};

/// What a provider accepts of tools, as data. Part of a provider profile, written in TOML by
/// presets and config (`"none"` turns an optional field off).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCapabilities {
    /// The most tools one request may declare upstream; `"none"` for no limit.
    #[serde(default, with = "tool_types::none_word")]
    pub max_tools: Option<usize>,
    /// The longest tool name.
    pub name_max_len: usize,
    /// Characters allowed in tool names besides ASCII letters and digits.
    pub name_punctuation: String,
    /// Accepts `strict` on functions.
    pub strict: bool,
    /// Accepts `tool_choice: "none"`.
    pub choice_none: bool,
    /// Accepts `tool_choice: "required"`.
    pub choice_required: bool,
    /// Accepts a named function in `tool_choice`.
    pub choice_named: bool,
    /// Accepts `tool_choice: {"type":"allowed_tools",…}`.
    pub choice_allowed_tools: bool,
    /// How `web_search` goes upstream natively, if it can.
    #[serde(default, with = "tool_types::none_word")]
    pub web_search: Option<NativeWebSearch>,
    /// How `file_search` goes upstream natively, if it can.
    #[serde(default, with = "tool_types::none_word")]
    pub file_search: Option<NativeFileSearch>,
    /// How `mcp` goes upstream natively, if it can.
    #[serde(default, with = "tool_types::none_word")]
    pub mcp: Option<NativeMcp>,
    /// What happens to a tool the provider cannot take in any form.
    pub unsupported: UnsupportedPolicy,
    /// What is decided for each tool type the client runs itself (`custom`, `local_shell`,
    /// `shell`, `apply_patch`).
    #[serde(default)]
    pub tool_types: ToolTypes,
    /// The provider speaks the Responses API itself: every declared tool goes upstream as
    /// declared (native, names unchanged), and `tool_choice` is passed as is. Set for the
    /// `responses` dialect only (the gateway's config enforces it).
    #[serde(default)]
    pub responses_native: bool,
}

impl Default for ToolCapabilities {
    fn default() -> Self {
        Self {
            max_tools: Some(128),
            name_max_len: 64,
            name_punctuation: "_-".to_owned(),
            strict: true,
            choice_none: true,
            choice_required: true,
            choice_named: true,
            choice_allowed_tools: false,
            web_search: None,
            file_search: None,
            mcp: None,
            unsupported: UnsupportedPolicy::Ignore,
            tool_types: ToolTypes::default(),
            responses_native: false,
        }
    }
}

/// Native forms of `web_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NativeWebSearch {
    /// Zhipu GLM: `{"type":"web_search","web_search":{…}}`.
    GlmTool,
    /// Qwen (DashScope): the request flag `enable_search: true`.
    QwenFlag,
    /// Moonshot Kimi: the builtin `$web_search` function, whose calls the caller echoes back as
    /// their own result so that Kimi runs the search (see [`ToolPlan::echo_tools`]).
    KimiBuiltin,
    /// Anthropic: the server tool `{"type":"web_search_20250305","name":"web_search"}`, run by
    /// Anthropic within the turn (allowed domains and the user's location carried over).
    AnthropicServerTool,
    /// Gemini: the `googleSearch` tool (grounding with Google Search), run by Gemini.
    GeminiGoogleSearch,
}

/// Native forms of `file_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NativeFileSearch {
    /// Zhipu GLM: `{"type":"retrieval","retrieval":{"knowledge_id":…}}` per vector store.
    GlmRetrieval,
}

/// Native forms of `mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NativeMcp {
    /// Zhipu GLM: `{"type":"mcp","mcp":{server_label, server_url, transport_type, …}}`.
    GlmMcp,
}

/// What happens to a tool a provider cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnsupportedPolicy {
    /// Leave it out, with a diagnostic.
    Ignore,
    /// Refuse the request with `unsupported_tool`.
    Reject,
}

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
        parameters: Value,
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
    pub diagnostics: Vec<Diagnostic>,
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
    /// `web_search` the provider lacks, served by the gateway's search tool.
    pub const GATEWAY_WEB_SEARCH: &str = "gateway_web_search";
    /// An `mcp` server the provider cannot reach, listed and called by the gateway.
    pub const GATEWAY_MCP: &str = "gateway_mcp";
}

/// The name of Kimi's builtin web search function.
pub const KIMI_WEB_SEARCH: &str = "$web_search";

/// Tool types the Responses API defines that toolbridge knows how to plan.
const HOSTED_TYPES: &[&str] = &[
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
    "file_search",
    "mcp",
    "tool_search",
    "computer",
    "computer_use",
    "computer_use_preview",
    "image_generation",
    "code_interpreter",
];

struct Candidate {
    entry: PlanEntry,
    identity: Option<Identity>,
    upstream: Option<UpstreamTool>,
}

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
    if caps.responses_native {
        return plan_passthrough(tools, tool_choice, caps);
    }
    let mut diagnostics = Vec::new();
    let mut flags = Map::new();
    let mut candidates = Vec::with_capacity(tools.len() + offer.tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let param = format!("tools[{i}]");
        if let Some(candidate) = served_by_gateway(&param, tool, caps, offer) {
            candidates.push(candidate);
            continue;
        }
        match tool {
            Tool::Namespace(ns) => {
                if ns.name.is_empty() {
                    return Err(Error::invalid(format!("{param}.name"), "must not be empty"));
                }
                diagnostics.push(diag(
                    TOOL_DEGRADED,
                    Some(&param),
                    format!(
                        "namespace `{}` is flattened into `{}__<name>` functions; calls come back with namespace and name",
                        ns.name, ns.name
                    ),
                ));
                for (j, child) in ns.tools.iter().enumerate() {
                    let child_param = format!("{param}.tools[{j}]");
                    candidates.push(namespaced(
                        &child_param,
                        &ns.name,
                        child,
                        caps,
                        &mut diagnostics,
                    )?);
                }
            }
            other => {
                candidates.extend(candidate(
                    &param,
                    other,
                    caps,
                    &mut flags,
                    &mut diagnostics,
                )?);
            }
        }
    }

    for (i, tool) in offer.tools.iter().enumerate() {
        candidates.push(Candidate {
            entry: PlanEntry {
                param: format!("gateway.tools[{i}]"),
                kind: "function".to_owned(),
                name: Some(format!("{}.{}", tool.server, tool.name)),
                decision: Decision::Gateway,
                reason: reasons::GATEWAY_TOOL,
                provider_name: None,
            },
            identity: Some(Identity::Gateway {
                server: tool.server.clone(),
                name: tool.name.clone(),
            }),
            upstream: Some(UpstreamTool::Function {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.parameters.clone(),
                strict: None,
            }),
        });
    }
    let mut names = NameMap::allocate(
        candidates
            .iter()
            .filter_map(|c| c.identity.clone().map(|id| (c.entry.param.clone(), id))),
        caps,
    )?;
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

    let mut plan = ToolPlan {
        entries,
        upstream: Vec::new(),
        request_flags: flags,
        tool_choice: None,
        send_tools: true,
        names: NameMap::default(),
        echo_tools: Vec::new(),
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

/// A declared hosted tool the provider lacks and the gateway serves: `web_search` by the
/// gateway's search, an `mcp` server the gateway listed. Its functions come from the offer.
fn served_by_gateway(
    param: &str,
    tool: &Tool,
    caps: &ToolCapabilities,
    offer: &GatewayOffer,
) -> Option<Candidate> {
    let Tool::Other(map) = tool else {
        return None;
    };
    let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
    let reason = if kind.starts_with("web_search") {
        let allowed = map.get("external_web_access") != Some(&Value::Bool(false));
        (offer.web_search && allowed && caps.web_search.is_none())
            .then_some(reasons::GATEWAY_WEB_SEARCH)?
    } else if kind == "mcp" {
        let label = map.get("server_label").and_then(Value::as_str)?;
        (caps.mcp.is_none() && offer.mcp_servers.iter().any(|l| l == label))
            .then_some(reasons::GATEWAY_MCP)?
    } else {
        return None;
    };
    Some(Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: kind.to_owned(),
            name: map
                .get("server_label")
                .and_then(Value::as_str)
                .map(str::to_owned),
            decision: Decision::Gateway,
            reason,
            provider_name: None,
        },
        identity: None,
        upstream: None,
    })
}

/// The plan for a native Responses upstream: every tool goes as declared, names unchanged (an
/// empty [`NameMap`] restores nothing), `tool_choice` as sent. Only the checks that keep a bad
/// request from reaching the upstream remain: names present and valid, and `max_tools`.
fn plan_passthrough(
    tools: &[Tool],
    tool_choice: Option<&Value>,
    caps: &ToolCapabilities,
) -> Result<ToolPlan, Error> {
    let mut entries = Vec::with_capacity(tools.len());
    let mut upstream = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let param = format!("tools[{i}]");
        let name = match tool {
            Tool::Function(f) => Some(f.name.clone()),
            Tool::Custom(c) => Some(c.name.clone()),
            Tool::Namespace(ns) => Some(ns.name.clone()),
            Tool::Other(map) => map.get("name").and_then(Value::as_str).map(str::to_owned),
        };
        if let Some(name) = &name
            && !matches!(tool, Tool::Other(_))
        {
            check_name(&param, name)?;
        }
        let mut value =
            serde_json::to_value(tool).map_err(|e| Error::invalid(&param, e.to_string()))?;
        drop_absent_fields(&mut value);
        upstream.push(UpstreamTool::Native(NativeTool::AsDeclared(value)));
        entries.push(PlanEntry {
            param,
            kind: tool.kind().to_owned(),
            name,
            decision: Decision::Native,
            reason: reasons::RESPONSES_NATIVE,
            provider_name: None,
        });
    }
    if let Some(max) = caps.max_tools
        && upstream.len() > max
    {
        return Err(Error::TooManyTools {
            count: upstream.len(),
            limit: max,
        });
    }
    Ok(ToolPlan {
        entries,
        upstream,
        request_flags: Map::new(),
        tool_choice: tool_choice.cloned(),
        send_tools: true,
        names: NameMap::default(),
        echo_tools: Vec::new(),
        diagnostics: Vec::new(),
    })
}

/// The typed tool writes an absent `description`, `parameters` or `strict` as `null` (the
/// response object's tools need them); a passed-through tool leaves them out, as the client did.
fn drop_absent_fields(tool: &mut Value) {
    if let Some(map) = tool.as_object_mut() {
        for key in ["description", "parameters", "strict"] {
            if map.get(key).is_some_and(Value::is_null) {
                map.remove(key);
            }
        }
        if let Some(Value::Array(children)) = map.get_mut("tools") {
            children.iter_mut().for_each(drop_absent_fields);
        }
    }
}

fn candidate(
    param: &str,
    tool: &Tool,
    caps: &ToolCapabilities,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    let entry = |kind: &str, name: Option<&str>, decision, reason| PlanEntry {
        param: param.to_owned(),
        kind: kind.to_owned(),
        name: name.map(str::to_owned),
        decision,
        reason,
        provider_name: None,
    };
    let one = |c: Candidate| Ok(vec![c]);
    match tool {
        Tool::Function(f) => {
            check_name(param, &f.name)?;
            one(Candidate {
                entry: entry(
                    "function",
                    Some(&f.name),
                    Decision::Native,
                    reasons::FUNCTION,
                ),
                identity: Some(Identity::Function {
                    namespace: None,
                    name: f.name.clone(),
                }),
                upstream: Some(function_upstream(param, f, caps, diagnostics)),
            })
        }
        Tool::Custom(c) => {
            check_name(param, &c.name)?;
            let identity = Identity::Custom {
                namespace: None,
                name: c.name.clone(),
            };
            if let Some(decided) =
                tool_types::decide(param, "custom", tool, &identity, caps, diagnostics)?
            {
                return one(decided);
            }
            diagnostics.push(diag(
                TOOL_DEGRADED,
                Some(param),
                format!(
                    "custom tool `{}` is sent as a function with one string parameter `input`",
                    c.name
                ),
            ));
            one(Candidate {
                entry: entry(
                    "custom",
                    Some(&c.name),
                    Decision::Degraded,
                    reasons::CUSTOM_AS_FUNCTION,
                ),
                identity: Some(Identity::Custom {
                    namespace: None,
                    name: c.name.clone(),
                }),
                upstream: Some(custom_upstream(c)),
            })
        }
        Tool::Namespace(_) => Ok(Vec::new()),
        Tool::Other(map) => {
            let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "local_shell" | "shell" | "apply_patch" => {
                    let (identity, reason, parameters, description) = schemas::builtin(kind);
                    if let Some(decided) =
                        tool_types::decide(param, kind, tool, &identity, caps, diagnostics)?
                    {
                        return one(decided);
                    }
                    diagnostics.push(diag(
                        TOOL_DEGRADED,
                        Some(param),
                        format!("`{kind}` is sent as a function and its calls are restored as `{kind}_call` items"),
                    ));
                    one(Candidate {
                        entry: entry(kind, None, Decision::Degraded, reason),
                        identity: Some(identity),
                        upstream: Some(UpstreamTool::Function {
                            name: kind.to_owned(),
                            description: Some(description.to_owned()),
                            parameters,
                            strict: None,
                        }),
                    })
                }
                k if k.starts_with("web_search") => {
                    web_search(param, map, caps, flags, diagnostics).map(|c| vec![c])
                }
                "file_search" => file_search(param, map, caps, diagnostics),
                "mcp" => mcp(param, map, caps, diagnostics).map(|c| vec![c]),
                k if HOSTED_TYPES.contains(&k) => {
                    unsupported(param, k, caps, diagnostics).map(|c| vec![c])
                }
                "" => Err(Error::invalid(format!("{param}.type"), "is missing")),
                other => Err(Error::UnsupportedToolType {
                    param: param.to_owned(),
                    kind: other.to_owned(),
                }),
            }
        }
    }
}

fn namespaced(
    param: &str,
    namespace: &str,
    tool: &Tool,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    let entry = |kind: &str, name: &str| PlanEntry {
        param: param.to_owned(),
        kind: kind.to_owned(),
        name: Some(format!("{namespace}.{name}")),
        decision: Decision::Degraded,
        reason: reasons::NAMESPACE_FLATTENED,
        provider_name: None,
    };
    match tool {
        Tool::Function(f) => {
            check_name(param, &f.name)?;
            Ok(Candidate {
                entry: entry("function", &f.name),
                identity: Some(Identity::Function {
                    namespace: Some(namespace.to_owned()),
                    name: f.name.clone(),
                }),
                upstream: Some(function_upstream(param, f, caps, diagnostics)),
            })
        }
        Tool::Custom(c) => {
            check_name(param, &c.name)?;
            Ok(Candidate {
                entry: entry("custom", &c.name),
                identity: Some(Identity::Custom {
                    namespace: Some(namespace.to_owned()),
                    name: c.name.clone(),
                }),
                upstream: Some(custom_upstream(c)),
            })
        }
        other => unsupported(param, other.kind(), caps, diagnostics),
    }
}

fn check_name(param: &str, name: &str) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{param}.name"), "must not be empty"));
    }
    Ok(())
}

fn function_upstream(
    param: &str,
    f: &FunctionTool,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> UpstreamTool {
    let strict = match f.strict {
        Some(true) if !caps.strict => {
            diagnostics.push(diag(
                crate::diagnostics::PARAM_DROPPED,
                Some(&format!("{param}.strict")),
                format!(
                    "the provider does not enforce `strict` schemas; `{}` was sent without it",
                    f.name
                ),
            ));
            None
        }
        Some(s) if caps.strict => Some(s),
        _ => None,
    };
    UpstreamTool::Function {
        name: f.name.clone(),
        description: f.description.clone(),
        parameters: f
            .parameters
            .clone()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        strict,
    }
}

fn custom_upstream(c: &CustomTool) -> UpstreamTool {
    UpstreamTool::Function {
        name: c.name.clone(),
        description: Some(schemas::custom_description(c)),
        parameters: schemas::custom_parameters(),
        strict: None,
    }
}

fn unsupported(
    param: &str,
    kind: &str,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    if caps.unsupported == UnsupportedPolicy::Reject {
        return Err(Error::UnsupportedTool {
            param: param.to_owned(),
            kind: kind.to_owned(),
        });
    }
    diagnostics.push(diag(
        TOOL_IGNORED,
        Some(param),
        format!("the provider has no `{kind}` tool; it was left out"),
    ));
    Ok(ignored(param, kind, reasons::NO_PROVIDER_SUPPORT))
}

fn ignored(param: &str, kind: &str, reason: &'static str) -> Candidate {
    Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: kind.to_owned(),
            name: None,
            decision: Decision::Ignored,
            reason,
            provider_name: None,
        },
        identity: None,
        upstream: None,
    }
}

fn native(
    param: &str,
    kind: &str,
    reason: &'static str,
    upstream: Option<UpstreamTool>,
) -> Candidate {
    Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: kind.to_owned(),
            name: None,
            decision: Decision::Native,
            reason,
            provider_name: None,
        },
        identity: None,
        upstream,
    }
}

fn web_search(
    param: &str,
    map: &Map<String, Value>,
    caps: &ToolCapabilities,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    let kind = map
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("web_search");
    // Codex declares web search with `external_web_access: false` when its sandbox forbids the
    // network: the client has said no, whatever the provider could do.
    if map.get("external_web_access") == Some(&Value::Bool(false)) {
        diagnostics.push(diag(
            TOOL_IGNORED,
            Some(param),
            "web_search was declared with external_web_access: false; it was left out",
        ));
        return Ok(ignored(param, kind, reasons::WEB_ACCESS_DISABLED));
    }
    let search = |form: NativeWebSearch| {
        let allowed_domains = map
            .get("filters")
            .and_then(|f| f.get("allowed_domains"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let user_location = map.get("user_location").filter(|l| l.is_object()).cloned();
        Some(UpstreamTool::Native(NativeTool::WebSearch(NativeSearch {
            form,
            allowed_domains,
            user_location,
        })))
    };
    match caps.web_search {
        Some(NativeWebSearch::QwenFlag) => {
            flags.insert("enable_search".to_owned(), Value::Bool(true));
            Ok(native(param, kind, reasons::NATIVE_WEB_SEARCH, None))
        }
        Some(
            form @ (NativeWebSearch::GlmTool
            | NativeWebSearch::KimiBuiltin
            | NativeWebSearch::AnthropicServerTool
            | NativeWebSearch::GeminiGoogleSearch),
        ) => Ok(native(
            param,
            kind,
            reasons::NATIVE_WEB_SEARCH,
            search(form),
        )),
        None => unsupported(param, kind, caps, diagnostics),
    }
}

fn file_search(
    param: &str,
    map: &Map<String, Value>,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    let Some(form @ NativeFileSearch::GlmRetrieval) = caps.file_search else {
        return unsupported(param, "file_search", caps, diagnostics).map(|c| vec![c]);
    };
    let ids: Vec<&str> = map
        .get("vector_store_ids")
        .and_then(Value::as_array)
        .map(|ids| ids.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        diagnostics.push(diag(
            TOOL_IGNORED,
            Some(param),
            "file_search has no vector_store_ids to map to knowledge bases; it was left out",
        ));
        return Ok(vec![ignored(
            param,
            "file_search",
            reasons::NO_VECTOR_STORE,
        )]);
    }
    Ok(ids
        .into_iter()
        .map(|id| {
            native(
                param,
                "file_search",
                reasons::NATIVE_FILE_SEARCH,
                Some(UpstreamTool::Native(NativeTool::Retrieval {
                    form,
                    knowledge_id: id.to_owned(),
                })),
            )
        })
        .collect())
}

fn mcp(
    param: &str,
    map: &Map<String, Value>,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    let Some(form @ NativeMcp::GlmMcp) = caps.mcp else {
        return unsupported(param, "mcp", caps, diagnostics);
    };
    let Some(url) = map.get("server_url").and_then(Value::as_str) else {
        // A connector (`connector_id`) has no equivalent upstream.
        return unsupported(param, "mcp", caps, diagnostics);
    };
    Ok(native(
        param,
        "mcp",
        reasons::NATIVE_MCP,
        Some(UpstreamTool::Native(NativeTool::Mcp(NativeMcpServer {
            form,
            server_label: map.get("server_label").cloned(),
            server_url: url.to_owned(),
            allowed_tools: map.get("allowed_tools").cloned(),
            headers: map.get("headers").cloned(),
        }))),
    ))
}

/// Identities by request path, for the translator.
pub type IdentityIndex = HashMap<String, Identity>;

#[cfg(test)]
mod tests;
