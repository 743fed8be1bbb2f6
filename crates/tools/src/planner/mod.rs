//! The capability planner: from an intent to a validated plan of registered tools, ranked by
//! evidence, and the bridge that executes named calls with a planner fallback.
//!
//! The pipeline, each stage in its own module:
//!
//! 1. [`intent`]: an [`IntentAnalyzer`] splits text into ordered parts at connectives and turns
//!    text into capability matches (word-boundary rules in English and Chinese by default,
//!    replaceable by a model-backed analyzer);
//! 2. [`capability`]: a [`CapabilityCatalog`] maps capabilities to the provider's tools
//!    (checked when the planner is built) and declares their data-flow types;
//! 3. [`evidence`]: an [`EvidenceScorer`] ranks a capability's tools from the most recent
//!    records of an [`EvidenceStore`] and the tools' static traits;
//! 4. [`plan`]: an [`ExecutionPlan`] is a DAG validated for cycles, missing dependencies, bad
//!    bindings and type compatibility;
//! 5. [`executor`]: a [`PlanExecutor`] runs a plan through the registry with output binding;
//! 6. [`bridge`]: a [`Bridge`] executes a named tool (validated), answers an unknown name with
//!    `unknown_tool` and close matches, falls back to the planner only when enabled, and records
//!    evidence on every execution.
//!
//! [`Planner`] ties 1–4 together over any [`crate::ToolProvider`] (the registry, the typed
//! source, an MCP tool set, a request's declared tools); it holds no mutable state besides the
//! evidence store. `decompose` plans a request of several ordered parts
//! ([`Planner::plan_request`]), each part's data flow written as output bindings; [`search`]
//! ranks a provider's tools for a query ([`ToolSearch`]), for a hosted `tool_search`.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use toolbridge_tools::planner::{Bridge, CapabilityDef, Planner, ValueType};
//! use toolbridge_tools::{FnTool, ToolContext, ToolRegistry};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), toolbridge_tools::ToolError> {
//! let mut registry = ToolRegistry::empty();
//! registry.register(Arc::new(FnTool::new(
//!     "calc",
//!     "Evaluates `a+b`.",
//!     json!({"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}),
//!     |args, _ctx| async move {
//!         let expr = args["expression"].as_str().unwrap_or_default().to_owned();
//!         let sum: i64 = expr.split('+').filter_map(|n| n.trim().parse::<i64>().ok()).sum();
//!         Ok(json!(sum))
//!     },
//! )))?;
//!
//! let planner = Planner::builder(Arc::new(registry))
//!     .capability(
//!         CapabilityDef::new("math", ["calc"]).text_argument("expression").output(ValueType::Number),
//!     )
//!     .build()?;
//! let bridge = Bridge::with_planner(Arc::new(planner), true);
//! let ctx = ToolContext::default();
//!
//! // Planned from text: "compute" asks for `math`, the rest becomes the expression.
//! let outcome = bridge.execute_intent("compute 1+1", &ctx).await?;
//! assert_eq!((outcome.tool.as_str(), outcome.output), ("calc", json!(2)));
//!
//! // A named call is validated and executed directly.
//! let outcome = bridge.execute("calc", json!({"expression": "2+3"}), &ctx).await?;
//! assert_eq!(outcome.output, json!(5));
//! # Ok(())
//! # }
//! ```

pub mod bridge;
pub mod capability;
mod decompose;
pub mod evidence;
pub mod executor;
pub mod intent;
pub mod plan;
pub mod search;
pub mod sqlite_evidence;

use std::sync::Arc;

use serde_json::Value;

pub use bridge::{Bridge, BridgeOutcome, Route};
pub use capability::{CapabilityCatalog, CapabilityDef, ToolTraits, ValueType};
pub use decompose::{PlannedPart, RequestPlan};
pub use evidence::{
    EvidenceRecord, EvidenceScorer, EvidenceStore, MemoryEvidenceStore, ScoreWeights, ToolScore,
};
pub use executor::{PlanExecutor, PlanRun};
pub use intent::{
    IntentAnalyzer, IntentMatch, IntentPart, IntentRule, MatchedTerm, RuleBasedAnalyzer,
    split_request,
};
pub use plan::{Binding, ExecutionPlan, PlanError, PlanStep};
pub use search::{MAX_SEARCH_RESULTS, ToolHit, ToolSearch};
pub use sqlite_evidence::SqliteEvidenceStore;

use crate::provider::{IntoToolProvider, ToolProvider};
use crate::registry::ToolRegistry;
use crate::tool::ToolError;

/// A plan made from an intent, with the reasons for it.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentPlan {
    /// The capability chosen.
    pub capability: String,
    /// The analyzer's match for it.
    pub matched: IntentMatch,
    /// The capability's tools, best first; the plan uses the first.
    pub ranking: Vec<ToolScore>,
    /// A one-step plan calling the best tool.
    pub plan: ExecutionPlan,
}

/// The step id of plans made from an intent.
pub const INTENT_STEP_ID: &str = "intent";

/// Analyses intents, resolves capabilities to registered tools and ranks them by evidence.
pub struct Planner {
    provider: Arc<dyn ToolProvider>,
    registry: Arc<ToolRegistry>,
    analyzer: Arc<dyn IntentAnalyzer>,
    catalog: CapabilityCatalog,
    scorer: EvidenceScorer,
    evidence: Arc<dyn EvidenceStore>,
}

impl std::fmt::Debug for Planner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<String> = self
            .provider
            .list_tools()
            .into_iter()
            .map(|t| t.name)
            .collect();
        f.debug_struct("Planner")
            .field("tools", &tools)
            .field("catalog", &self.catalog)
            .field("scorer", &self.scorer)
            .finish_non_exhaustive()
    }
}

impl Planner {
    /// Starts building a planner over `tools` (an `Arc` of any [`ToolProvider`]): a
    /// [`ToolRegistry`], the sealed typed source, an MCP tool set or a request's declared tools.
    pub fn builder(tools: impl IntoToolProvider) -> PlannerBuilder {
        PlannerBuilder {
            provider: tools.into_provider(),
            registry: None,
            analyzer: None,
            defs: Vec::new(),
            from_tags: false,
            traits: Vec::new(),
            scorer: EvidenceScorer::default(),
            evidence: None,
        }
    }

    /// The tools the planner plans over.
    pub fn provider(&self) -> &Arc<dyn ToolProvider> {
        &self.provider
    }

    /// The registry plans run through: the provider's own ([`ToolProvider::registry`]), the one
    /// set with [`PlannerBuilder::executor_registry`], or an empty one (every step then fails
    /// with `unknown_tool`).
    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.registry
    }

    /// The capabilities.
    pub fn catalog(&self) -> &CapabilityCatalog {
        &self.catalog
    }

    /// The evidence store the planner reads (and the bridge writes).
    pub fn evidence(&self) -> &Arc<dyn EvidenceStore> {
        &self.evidence
    }

    /// An executor over the same registry and evidence store.
    pub fn executor(&self) -> PlanExecutor {
        PlanExecutor::new(Arc::clone(&self.registry), Arc::clone(&self.evidence))
    }

    /// The capabilities `text` asks for, best first.
    pub async fn analyze(&self, text: &str) -> Result<Vec<IntentMatch>, ToolError> {
        self.analyzer.analyze(text).await
    }

    /// The tools of `capability`, best first by evidence and traits.
    pub async fn rank(&self, capability: &str) -> Result<Vec<ToolScore>, ToolError> {
        let def = self
            .catalog
            .get(capability)
            .ok_or_else(|| ToolError::NoCapability {
                intent: capability.to_owned(),
            })?;
        self.scorer
            .rank(
                &def.tools,
                |tool| self.catalog.traits(tool),
                self.evidence.as_ref(),
            )
            .await
    }

    /// A typed step for `capability`, calling its best-ranked tool with `args`.
    pub async fn step(
        &self,
        id: &str,
        capability: &str,
        args: Value,
    ) -> Result<PlanStep, ToolError> {
        let best = self.best_tool(capability).await?;
        let def = self
            .catalog
            .get(capability)
            .ok_or_else(|| ToolError::NoCapability {
                intent: capability.to_owned(),
            })?;
        Ok(PlanStep::for_capability(id, def, best, args))
    }

    /// Plans `text`. A request of several parts ("compute 17+25 then sha256 the result") is
    /// planned by [`Planner::plan_request`] and described by its last part. Otherwise one
    /// call: the best-scoring match whose capability the catalog knows,
    /// its best tool, and the arguments — `args` when given, else the text minus the matched
    /// terms in the capability's `text_argument`, else `{}`. No match is
    /// [`ToolError::NoCapability`].
    pub async fn plan_intent(
        &self,
        text: &str,
        args: Option<Value>,
    ) -> Result<IntentPlan, ToolError> {
        // A request of several parts is decomposed; arguments given by the caller belong to
        // one call, so they keep the one-step plan.
        if args.is_none() && self.analyzer.decompose(text).len() > 1 {
            let planned = self.plan_request(text).await?;
            return planned
                .into_intent_plan()
                .ok_or_else(|| ToolError::NoCapability {
                    intent: text.to_owned(),
                });
        }
        let matches = self.analyze(text).await?;
        let no_capability = || ToolError::NoCapability {
            intent: text.to_owned(),
        };
        let (matched, def) = matches
            .into_iter()
            .find_map(|m| self.catalog.get(&m.capability).map(|def| (m, def)))
            .ok_or_else(no_capability)?;
        let ranking = self.rank(&def.id).await?;
        let best = ranking.first().ok_or_else(no_capability)?.tool.clone();
        let args = match (args, &def.text_argument) {
            (Some(args), _) => args,
            (None, Some(argument)) => {
                let mut map = serde_json::Map::new();
                map.insert(argument.clone(), Value::String(matched.remainder(text)));
                Value::Object(map)
            }
            (None, None) => Value::Object(serde_json::Map::new()),
        };
        let step = PlanStep::for_capability(INTENT_STEP_ID, def, best, args);
        let plan = ExecutionPlan::new(vec![step])?;
        Ok(IntentPlan {
            capability: def.id.clone(),
            matched,
            ranking,
            plan,
        })
    }

    async fn best_tool(&self, capability: &str) -> Result<String, ToolError> {
        let ranking = self.rank(capability).await?;
        ranking
            .into_iter()
            .next()
            .map(|score| score.tool)
            .ok_or_else(|| ToolError::NoCapability {
                intent: capability.to_owned(),
            })
    }
}

/// Configures a [`Planner`]; [`PlannerBuilder::build`] checks the capabilities against the
/// registry.
pub struct PlannerBuilder {
    provider: Arc<dyn ToolProvider>,
    registry: Option<Arc<ToolRegistry>>,
    analyzer: Option<Arc<dyn IntentAnalyzer>>,
    defs: Vec<CapabilityDef>,
    from_tags: bool,
    traits: Vec<(String, ToolTraits)>,
    scorer: EvidenceScorer,
    evidence: Option<Arc<dyn EvidenceStore>>,
}

impl std::fmt::Debug for PlannerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlannerBuilder")
            .field("defs", &self.defs)
            .field("from_tags", &self.from_tags)
            .finish_non_exhaustive()
    }
}

impl PlannerBuilder {
    /// Replaces the default analyzer ([`RuleBasedAnalyzer::with_default_rules`]).
    pub fn analyzer(mut self, analyzer: impl IntentAnalyzer + 'static) -> Self {
        self.analyzer = Some(Arc::new(analyzer));
        self
    }

    /// Adds a capability definition.
    pub fn capability(mut self, def: CapabilityDef) -> Self {
        self.defs.push(def);
        self
    }

    /// Adds capability definitions.
    pub fn capabilities(mut self, defs: impl IntoIterator<Item = CapabilityDef>) -> Self {
        self.defs.extend(defs);
        self
    }

    /// Also derives untyped capabilities from the tools' capability tags; explicit definitions
    /// replace derived ones with the same id.
    pub fn capabilities_from_tool_tags(mut self) -> Self {
        self.from_tags = true;
        self
    }

    /// Declares a registered tool's static traits for scoring.
    pub fn tool_traits(mut self, tool: impl Into<String>, traits: ToolTraits) -> Self {
        self.traits.push((tool.into(), traits));
        self
    }

    /// Runs plans through `registry` instead of the provider's own (for providers that have
    /// none, such as an MCP tool set whose tools were registered separately).
    pub fn executor_registry(mut self, registry: Arc<ToolRegistry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Replaces the default scorer.
    pub fn scorer(mut self, scorer: EvidenceScorer) -> Self {
        self.scorer = scorer;
        self
    }

    /// Uses this evidence store (default: a new [`MemoryEvidenceStore`]).
    pub fn evidence(mut self, store: Arc<dyn EvidenceStore>) -> Self {
        self.evidence = Some(store);
        self
    }

    /// Checks every capability and trait against the provider (a capability naming a tool it
    /// does not have is an error here) and builds the planner.
    pub fn build(self) -> Result<Planner, ToolError> {
        let provider = self.provider.as_ref();
        let explicit = CapabilityCatalog::new(self.defs, provider)?;
        let mut catalog = if self.from_tags {
            let mut catalog = CapabilityCatalog::from_tool_tags(provider);
            catalog.extend(explicit.iter().cloned(), provider)?;
            catalog
        } else {
            explicit
        };
        for (tool, traits) in self.traits {
            catalog.set_traits(&tool, traits, provider)?;
        }
        let registry = self
            .registry
            .or_else(|| provider.registry())
            .unwrap_or_else(|| Arc::new(ToolRegistry::empty()));
        Ok(Planner {
            provider: self.provider,
            registry,
            analyzer: self
                .analyzer
                .unwrap_or_else(|| Arc::new(RuleBasedAnalyzer::with_default_rules())),
            catalog,
            scorer: self.scorer,
            evidence: self
                .evidence
                .unwrap_or_else(|| Arc::new(MemoryEvidenceStore::default())),
        })
    }
}
