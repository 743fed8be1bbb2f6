//! What a provider's profile lets the gateway do, read by running the real planner and the real
//! translator on probes (as `toolbridge providers` does), so the catalog cannot promise what
//! the gateway would not serve.
//!
//! Not here: the catalog's JSON (the parent module).

use serde_json::{Value, json};
use toolbridge_core::plan::{Decision, plan};
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::dialect::{Dialect, Raw, Source};
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::{CreateResponse, Tool};

/// Where a web search runs for a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WebSearch {
    /// The provider's own search (a native tool of its profile, or a Responses upstream).
    Provider,
    /// The gateway's search backend (`[gateway_tools.web_search]`).
    Gateway,
    /// Nowhere: a declared `web_search` is left out with a diagnostic.
    None,
}

impl WebSearch {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Provider => "provider",
            Self::Gateway => "gateway",
            Self::None => "none",
        }
    }
}

/// What the catalog says of a route's models, derived from the profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// Codex's freeform `apply_patch` (a `custom` tool with a grammar) is served: taken natively,
    /// or degraded to a function whose input the gateway checks against the grammar.
    pub(crate) freeform_apply_patch: bool,
    /// How the planner serves a `custom` tool (`native`, `degraded`, …).
    pub(crate) custom_tools: &'static str,
    pub(crate) parallel_tool_calls: bool,
    /// The efforts that reach the provider as distinct requests, weakest first.
    pub(crate) reasoning_levels: Vec<&'static str>,
    pub(crate) images: bool,
    /// `tool_search` is served (natively, degraded or by the gateway).
    pub(crate) tool_search: bool,
    pub(crate) web_search: WebSearch,
}

impl Capabilities {
    /// The catalog's fields as `toolbridge providers` shows them: `(row name, value)`.
    pub(crate) fn rows(&self) -> Vec<(&'static str, String)> {
        let yes = |b: bool| if b { "yes" } else { "no" }.to_owned();
        let apply_patch = if self.freeform_apply_patch {
            "freeform"
        } else {
            "none"
        };
        vec![
            (
                "apply_patch_tool_type",
                format!("{apply_patch} (custom tools {})", self.custom_tools),
            ),
            (
                "reasoning levels",
                if self.reasoning_levels.is_empty() {
                    "none offered".to_owned()
                } else {
                    self.reasoning_levels.join(", ")
                },
            ),
            ("parallel tool calls", yes(self.parallel_tool_calls)),
            (
                "input_modalities",
                if self.images { "text, image" } else { "text" }.to_owned(),
            ),
            ("supports_search_tool", yes(self.tool_search)),
            (
                "web search",
                match self.web_search {
                    WebSearch::None => {
                        "none (gateway's when [gateway_tools.web_search] is set)".to_owned()
                    }
                    other => other.as_str().to_owned(),
                },
            ),
            ("prefer_websockets", "yes".to_owned()),
        ]
    }
}

/// The capabilities of `profile` on `dialect`; `repair` is whether the provider's calls are
/// checked, `gateway_search` whether the gateway's search backend serves its requests.
pub(crate) fn capabilities(
    profile: &Profile,
    dialect: Dialect,
    repair: bool,
    gateway_search: bool,
) -> Capabilities {
    let custom = decision(
        profile,
        json!({"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}),
    );
    let freeform_apply_patch = match custom {
        Some(Decision::Native) => true,
        // Degraded to a function: the grammar is checked only when calls are repaired.
        Some(Decision::Degraded) => repair && !dialect.sends_client_request(),
        _ => false,
    };
    // Codex declares the client-run form (`execution: "client"`) and runs the search itself;
    // what matters is whether the gateway can offer that tool to this provider.
    let tool_search = matches!(
        decision(
            profile,
            json!({"type": "tool_search", "execution": "client"})
        ),
        Some(Decision::Native | Decision::Degraded | Decision::Gateway)
    );
    let web_search = if dialect.sends_client_request() || profile.tools.web_search.is_some() {
        WebSearch::Provider
    } else if gateway_search {
        WebSearch::Gateway
    } else {
        WebSearch::None
    };
    Capabilities {
        freeform_apply_patch,
        custom_tools: custom.map_or("rejected", Decision::as_str),
        parallel_tool_calls: profile.parallel_tool_calls || !dialect.reads_chat_profile(),
        reasoning_levels: reasoning_levels(profile, dialect),
        images: profile.image_input,
        tool_search,
        web_search,
    }
}

/// The planner's decision for one probe tool; `None` when the plan refuses it.
fn decision(profile: &Profile, probe: Value) -> Option<Decision> {
    let tool: Tool = serde_json::from_value(probe).ok()?;
    let plan = plan(std::slice::from_ref(&tool), None, &profile.tools).ok()?;
    plan.entries.last().map(|e| e.decision)
}

/// The efforts worth offering: each effort is translated, an effort the translator drops (a
/// diagnostic at `reasoning.effort`) is left out, and of the efforts that reach the provider as
/// the same request only one is kept (`medium` where it is one of them, else the weakest), so
/// Codex's picker shows only choices that change something. A native Responses upstream takes
/// efforts as sent.
fn reasoning_levels(profile: &Profile, dialect: Dialect) -> Vec<&'static str> {
    if dialect.sends_client_request() {
        return vec!["low", "medium", "high"];
    }
    let mut groups: Vec<(Value, Vec<&'static str>)> = Vec::new();
    for effort in toolbridge_providers::profile::EFFORTS {
        let Some((body, diagnostics)) = translate_effort(profile, dialect, effort) else {
            continue;
        };
        if diagnostics
            .iter()
            .any(|param| param.as_deref() == Some("reasoning.effort"))
        {
            continue;
        }
        match groups.iter_mut().find(|(b, _)| *b == body) {
            Some((_, efforts)) => efforts.push(effort),
            None => groups.push((body, vec![effort])),
        }
    }
    // One effort alone changes nothing a picker could show.
    if groups.len() < 2 {
        return Vec::new();
    }
    groups
        .into_iter()
        .filter_map(|(_, efforts)| {
            efforts
                .iter()
                .find(|e| **e == "medium")
                .or_else(|| efforts.first())
                .copied()
        })
        .collect()
}

/// The upstream body for a probe request with `effort`, and the params of its diagnostics.
fn translate_effort(
    profile: &Profile,
    dialect: Dialect,
    effort: &str,
) -> Option<(Value, Vec<Option<String>>)> {
    let request = json!({"model": "m", "input": "hi", "reasoning": {"effort": effort}});
    let req: CreateResponse = serde_json::from_value(request.clone()).ok()?;
    let raw = request.as_object().cloned().map(Raw::new);
    let canonical = normalize(&req, &Limits::default()).ok()?;
    let plan = plan(&canonical.tools, None, &profile.tools).ok()?;
    let mut diagnostics = canonical.diagnostics.clone();
    let outgoing = dialect.build(
        &Source {
            req: &req,
            raw: raw.as_ref(),
            canonical: &canonical,
            stored: false,
            sealed_by_gateway: &|_| false,
            provenance: None,
        },
        &plan,
        profile,
        "m",
        &mut diagnostics,
    );
    let body = serde_json::from_slice(&outgoing.payload()).ok()?;
    Some((body, diagnostics.into_iter().map(|d| d.param).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(preset: &str) -> Capabilities {
        let profile = Profile::preset(preset).expect("a preset");
        let dialect = Dialect::of_preset(preset);
        capabilities(&profile, dialect, true, false)
    }

    #[test]
    fn efforts_are_the_ones_that_change_the_request() {
        // `reasoning_effort` as sent: every effort is its own request.
        assert_eq!(
            of("openai").reasoning_levels,
            ["none", "minimal", "low", "medium", "high", "xhigh"]
        );
        // Thinking on or off, and DeepSeek's `max` for the strongest.
        assert_eq!(of("glm").reasoning_levels, ["none", "medium"]);
        assert_eq!(of("deepseek").reasoning_levels, ["none", "medium", "xhigh"]);
        // No way to say it: no picker.
        assert!(of("generic").reasoning_levels.is_empty());
        // Budgets: off, then four sizes.
        assert_eq!(
            of("anthropic").reasoning_levels,
            ["none", "low", "medium", "high", "xhigh"]
        );
    }

    #[test]
    fn freeform_apply_patch_needs_the_grammar_check_when_degraded() {
        let profile = Profile::preset("generic").expect("a preset");
        assert!(capabilities(&profile, Dialect::Chat, true, false).freeform_apply_patch);
        assert!(!capabilities(&profile, Dialect::Chat, false, false).freeform_apply_patch);
        assert_eq!(of("generic").custom_tools, "degraded");
    }

    #[test]
    fn web_search_is_the_providers_the_gateways_or_none() {
        assert_eq!(of("anthropic").web_search, WebSearch::Provider);
        let profile = Profile::preset("generic").expect("a preset");
        assert_eq!(
            capabilities(&profile, Dialect::Chat, true, true).web_search,
            WebSearch::Gateway
        );
        assert_eq!(of("generic").web_search, WebSearch::None);
        assert!(!of("deepseek").images);
        assert!(of("generic").images);
    }
}
