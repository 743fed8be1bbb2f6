//! The candidates of the client-run tools a provider may not take as declared: a function, a
//! custom tool (sent as a function with one string parameter `input` unless the provider's own
//! decision takes it), and `local_shell`, `shell` and `apply_patch` (sent as functions whose
//! calls are restored as their own items unless the provider's decision takes them).
//!
//! Not here: hosted tools (`hosted`), the providers' decisions for tool types (`tool_types`),
//! and the upstream form of a function or custom tool (the parent).

use toolbridge_wire::responses::{CustomTool, Diagnostic, FunctionTool, Tool};

use super::{Candidate, check_name, custom_upstream, function_upstream};
use crate::Error;
use crate::diagnostics::{TOOL_DEGRADED, diag};
use crate::plan::{
    Decision, Identity, PlanEntry, ToolCapabilities, UpstreamTool, reasons, schemas, tool_types,
};

/// The plan entry of the tool at `param`.
fn entry(
    param: &str,
    kind: &str,
    name: Option<&str>,
    decision: Decision,
    reason: &'static str,
) -> PlanEntry {
    PlanEntry {
        param: param.to_owned(),
        kind: kind.to_owned(),
        name: name.map(str::to_owned),
        decision,
        reason,
        provider_name: None,
    }
}

/// A function tool, sent upstream as a function.
pub(super) fn function(
    param: &str,
    f: &FunctionTool,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    check_name(param, &f.name)?;
    Ok(Candidate {
        entry: entry(
            param,
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

/// A custom tool: as the provider's decision for custom tools takes it, else degraded to a
/// function with one string parameter `input`.
pub(super) fn custom(
    param: &str,
    tool: &Tool,
    c: &CustomTool,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    check_name(param, &c.name)?;
    let identity = Identity::Custom {
        namespace: None,
        name: c.name.clone(),
    };
    if let Some(decided) = tool_types::decide(param, "custom", tool, &identity, caps, diagnostics)?
    {
        return Ok(decided);
    }
    diagnostics.push(diag(
        TOOL_DEGRADED,
        Some(param),
        format!(
            "custom tool `{}` is sent as a function with one string parameter `input`",
            c.name
        ),
    ));
    Ok(Candidate {
        entry: entry(
            param,
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

/// `local_shell`, `shell` or `apply_patch` (`kind`): as the provider's decision for its type
/// takes it, else degraded to a function whose calls are restored as `{kind}_call` items.
pub(super) fn builtin(
    param: &str,
    kind: &str,
    tool: &Tool,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    let (identity, reason, parameters, description) = schemas::builtin(kind);
    if let Some(decided) = tool_types::decide(param, kind, tool, &identity, caps, diagnostics)? {
        return Ok(decided);
    }
    diagnostics.push(diag(
        TOOL_DEGRADED,
        Some(param),
        format!("`{kind}` is sent as a function and its calls are restored as `{kind}_call` items"),
    ));
    Ok(Candidate {
        entry: entry(param, kind, None, Decision::Degraded, reason),
        identity: Some(identity),
        upstream: Some(UpstreamTool::Function {
            name: kind.to_owned(),
            description: Some(description.to_owned()),
            parameters: parameters.into(),
            strict: None,
        }),
    })
}
