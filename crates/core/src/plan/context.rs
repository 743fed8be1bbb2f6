//! The conversation's own tools in the plan: an `additional_tools` item's (code-mode clients
//! declare their tools inside `input`) and every tool a `tool_search_output` found. They are
//! planned like declared tools — named, degraded and restored the same way, so a found
//! `namespace` member comes back as a `function_call` with `namespace` and `name` — after them:
//! a declared tool wins over a found one of the same identity, and a tool found twice (the model
//! searched again) is planned once. They count toward `max_tools`; past it the oldest found tools
//! are left out first, each with a diagnostic, so a long session keeps what it found last.
//!
//! Not here: reading them from the input (`request/turns`), and `tool_search` itself
//! (`search`).

use std::collections::HashSet;

use serde_json::{Map, Value};
use toolbridge_wire::responses::{Diagnostic, Tool};

use super::candidates::{Candidate, candidate, namespaced};
use super::{Decision, Identity, ToolCapabilities, UpstreamTool};
use crate::canonical::{ContextSource, ContextTool};
use crate::diagnostics::{TOOL_DEGRADED, TOOL_IGNORED, diag};

/// The parameter prefix of tools the gateway's own `tool_search` found within a response
/// (`tool_search_output.tools[0]`): conversation tools, left out first like those of the input.
pub const FOUND_PARAM: &str = "tool_search_output.tools";

/// The reason of a found tool left out for the provider's tool limit.
pub const OVER_TOOL_LIMIT: &str = "over_tool_limit";

/// The candidates of the conversation's tools, skipping identities already planned. A tool that
/// cannot be planned (an unsupported type under a rejecting profile, a name missing) is left out
/// with a diagnostic: the client cannot change what a search returned.
pub(super) fn candidates(
    context: &[ContextTool],
    caps: &ToolCapabilities,
    planned: &[Candidate],
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Candidate> {
    let mut seen: HashSet<Identity> = planned.iter().filter_map(|c| c.identity.clone()).collect();
    let mut out = Vec::new();
    for c in context {
        let found = match &c.tool {
            Tool::Namespace(ns) if !ns.name.is_empty() => {
                diagnostics.push(diag(
                    TOOL_DEGRADED,
                    Some(&c.param),
                    format!(
                        "namespace `{}` ({}) is flattened into `{}__<name>` functions; calls come back with namespace and name",
                        ns.name,
                        source_word(c.source),
                        ns.name
                    ),
                ));
                ns.tools
                    .iter()
                    .enumerate()
                    .map(|(j, child)| {
                        namespaced(
                            &format!("{}.tools[{j}]", c.param),
                            &ns.name,
                            child,
                            caps,
                            diagnostics,
                        )
                        .map(|one| vec![one])
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(|v| v.into_iter().flatten().collect())
            }
            tool => candidate(&c.param, tool, caps, flags, diagnostics),
        };
        match found {
            Ok(list) => {
                for one in list {
                    let fresh = one
                        .identity
                        .as_ref()
                        .is_none_or(|id| seen.insert(id.clone()));
                    if fresh {
                        out.push(one);
                    }
                }
            }
            Err(e) => diagnostics.push(diag(
                TOOL_IGNORED,
                Some(&c.param),
                format!(
                    "a tool declared in the conversation ({}) was left out: {e}",
                    source_word(c.source)
                ),
            )),
        }
    }
    out
}

fn source_word(source: ContextSource) -> &'static str {
    match source {
        ContextSource::Additional => "additional_tools",
        ContextSource::Found => "found by tool_search",
    }
}

/// Leaves out the oldest conversation tools while more than `max` tools would go upstream; the
/// declared tools are never left out here (too many of them is the client's error, reported by
/// the caller). Returns the parameters left out.
pub(super) fn fit_limit(
    upstream: &mut Vec<(String, UpstreamTool)>,
    max: usize,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<String> {
    let mut dropped = Vec::new();
    while upstream.len() > max {
        let Some(at) = upstream
            .iter()
            .position(|(param, _)| param.starts_with("input[") || param.starts_with(FOUND_PARAM))
        else {
            break;
        };
        let (param, _) = upstream.remove(at);
        diagnostics.push(diag(
            TOOL_IGNORED,
            Some(&param),
            format!(
                "the provider takes at most {max} tools; this tool from the conversation (the oldest) was left out"
            ),
        ));
        dropped.push(param);
    }
    dropped
}

/// Marks the plan entries of tools [`fit_limit`] left out.
pub(super) fn mark_dropped(entries: &mut [super::PlanEntry], dropped: &[String]) {
    for entry in entries.iter_mut() {
        if dropped.contains(&entry.param) {
            entry.decision = Decision::Ignored;
            entry.reason = OVER_TOOL_LIMIT;
        }
    }
}
