//! What a profile decides for each tool type a client runs itself (`custom`, `local_shell`,
//! `shell`, `apply_patch`): data in [`ToolCapabilities`], read by the planner. Degraded (sent as a
//! function, the shapes in `schemas`) is every type's default; a provider that takes a type as
//! declared says `native`. Also the serde of optional capabilities written as `"none"`.
//!
//! Not here: the degraded forms themselves (`schemas`) and the hosted types, whose native forms
//! are their own capability fields (`web_search`, `file_search`, `mcp`).

use serde::{Deserialize, Serialize};
use toolbridge_wire::responses::{Diagnostic, Tool};

use super::{
    Candidate, Decision, Identity, NativeTool, PlanEntry, ToolCapabilities, UpstreamTool,
    drop_absent_fields, ignored, reasons,
};
use crate::Error;
use crate::diagnostics::{TOOL_IGNORED, diag};

/// The decision for each tool type a client runs itself, as data: a provider that takes
/// `custom` or `apply_patch` as declared says `native`. Every type is `degraded` by default
/// (sent as a function, its calls restored as the declared item kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolTypes {
    pub custom: ToolTypeDecision,
    pub local_shell: ToolTypeDecision,
    pub shell: ToolTypeDecision,
    pub apply_patch: ToolTypeDecision,
    /// A client-run `tool_search` (`execution: "client"`): degraded to a function whose calls
    /// come back as `tool_search_call` items.
    pub tool_search: ToolTypeDecision,
}

impl ToolTypes {
    /// The decision for a tool type; `None` for a type this table does not cover.
    pub fn get(&self, kind: &str) -> Option<ToolTypeDecision> {
        match kind {
            "custom" => Some(self.custom),
            "local_shell" => Some(self.local_shell),
            "shell" => Some(self.shell),
            "apply_patch" => Some(self.apply_patch),
            "tool_search" => Some(self.tool_search),
            _ => None,
        }
    }
}

/// What a profile may decide for a client-run tool type: the [`Decision`]s that make sense for a
/// tool the gateway cannot run itself, with the same names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolTypeDecision {
    /// Sent upstream as declared (a provider-native tool), calls restored by name.
    Native,
    /// Sent as a function the provider can take (the built-ins' shapes in `schemas`).
    #[default]
    Degraded,
    /// Left out, with a diagnostic.
    Ignored,
    /// The request is refused with `unsupported_tool`.
    Rejected,
}

/// Serde for an optional capability written as its value or the word `"none"` (TOML has no null).
pub(super) mod none_word {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged, expecting = "one of the field's values, or \"none\"")]
    enum Written<T> {
        Value(T),
        Word(Word),
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Word {
        None,
    }

    pub fn serialize<T: Serialize, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => v.serialize(s),
            None => s.serialize_str("none"),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        Ok(match Written::<T>::deserialize(d)? {
            Written::Value(v) => Some(v),
            Written::Word(Word::None) => None,
        })
    }
}

/// The profile's decision for a client-run tool type (`caps.tool_types`) when it is not the
/// degraded form the caller builds: native (the declaration as is, calls restored by name),
/// ignored, or rejected.
pub(super) fn decide(
    param: &str,
    kind: &str,
    tool: &Tool,
    identity: &Identity,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Option<Candidate>, Error> {
    match caps.tool_types.get(kind).unwrap_or_default() {
        ToolTypeDecision::Degraded => Ok(None),
        ToolTypeDecision::Native => {
            let mut value =
                serde_json::to_value(tool).map_err(|e| Error::invalid(param, e.to_string()))?;
            drop_absent_fields(&mut value);
            let name = match identity {
                Identity::Custom { name, .. } => Some(name.clone()),
                _ => None,
            };
            Ok(Some(Candidate {
                entry: PlanEntry {
                    param: param.to_owned(),
                    kind: kind.to_owned(),
                    name,
                    decision: Decision::Native,
                    reason: native_reason(kind),
                    provider_name: None,
                },
                identity: Some(identity.clone()),
                upstream: Some(UpstreamTool::Native(NativeTool::AsDeclared(value))),
            }))
        }
        ToolTypeDecision::Ignored => {
            diagnostics.push(diag(
                TOOL_IGNORED,
                Some(param),
                format!("the provider's profile leaves `{kind}` tools out; it was left out"),
            ));
            Ok(Some(ignored(param, kind, reasons::NO_PROVIDER_SUPPORT)))
        }
        ToolTypeDecision::Rejected => Err(Error::UnsupportedTool {
            param: param.to_owned(),
            kind: kind.to_owned(),
        }),
    }
}

/// The reason a client-run tool type goes upstream as declared.
fn native_reason(kind: &str) -> &'static str {
    match kind {
        "custom" => reasons::NATIVE_CUSTOM,
        "local_shell" => reasons::NATIVE_LOCAL_SHELL,
        "shell" => reasons::NATIVE_SHELL,
        "tool_search" => reasons::NATIVE_TOOL_SEARCH,
        _ => reasons::NATIVE_APPLY_PATCH,
    }
}
