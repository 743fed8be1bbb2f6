//! One complete call, repaired and restored: the single entry point the assembler needs.
//!
//! The order matters. A name the plan does not know is resolved first, so the call finds its
//! tool. Function arguments (and the degraded function forms of `local_shell`, `shell` and
//! `apply_patch`) are repaired *before* restoration, because restoration reads them as JSON. A
//! custom tool's input is repaired *after* it, because restoration is what unwraps it from the
//! function arguments the provider saw.

use toolbridge_wire::responses::Diagnostic;

use super::names::{NameMatch, resolve_provider_name};
use super::{Outcome, Subject, ToolSchemas};
use crate::canonical::CallKind;
use crate::diagnostics::{TOOL_NAME_MAPPED, diag};
use crate::plan::{Identity, NameMap};
use crate::restore::restore;

/// A restored call and what repair did to it.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairedCall {
    pub call: CallKind,
    /// How the called name was resolved, when the plan did not know it.
    pub name: Option<NameMatch>,
    /// What the payload's check found (`None` for a call restored to a typed built-in item whose
    /// arguments were already valid, or for an undeclared tool).
    pub outcome: Option<Outcome>,
    /// Everything to report: name mapping, repairs, invalid payloads, restoration fallbacks.
    pub diagnostics: Vec<Diagnostic>,
}

impl ToolSchemas {
    /// Resolves, repairs and restores one complete call made by `provider_name` with
    /// `arguments`. An invalid payload goes on as its best effort, with a diagnostic: what to
    /// do with it beyond that is the caller's policy.
    pub fn restore_repaired(
        &self,
        names: &NameMap,
        provider_name: &str,
        arguments: &str,
    ) -> RepairedCall {
        let mut diagnostics = Vec::new();
        let (name, resolution) = resolve(names, provider_name, &mut diagnostics);
        let identity = names.identity(&name);
        if let Some(Identity::Custom { .. }) = identity {
            let (mut call, restored) = restore(names, &name, arguments);
            let outcome = self.repair_restored(&mut call);
            if let Some(o) = &outcome {
                diagnostics.extend(o.diagnostics(Subject::CustomInput, &name));
            }
            diagnostics.extend(restored);
            return RepairedCall {
                call,
                name: resolution,
                outcome,
                diagnostics,
            };
        }
        let outcome = identity.map(|id| self.repair(Some(id), arguments));
        let payload = outcome.as_ref().map_or(arguments, Outcome::text);
        let (call, restored) = restore(names, &name, payload);
        if let Some(o) = &outcome {
            diagnostics.extend(o.diagnostics(Subject::Arguments, &name));
        }
        diagnostics.extend(restored);
        RepairedCall {
            call,
            name: resolution,
            outcome,
            diagnostics,
        }
    }
}

/// The provider name to restore under: as called when the plan knows it, else the one declared
/// name it resolves to, else as called (restoration then reports it undeclared).
fn resolve(
    names: &NameMap,
    called: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> (String, Option<NameMatch>) {
    if names.identity(called).is_some() {
        return (called.to_owned(), None);
    }
    let found = resolve_provider_name(names, called);
    let name = match &found {
        NameMatch::Mapped { name, reason } => {
            diagnostics.push(diag(
                TOOL_NAME_MAPPED,
                None,
                format!(
                    "the model called `{called}`; it was mapped to the declared `{name}` ({})",
                    reason.code()
                ),
            ));
            name.clone()
        }
        NameMatch::Exact | NameMatch::NoConfidentMatch => called.to_owned(),
    };
    (name, Some(found))
}
