//! The bridge: how an agent executes tools by name, with the planner as an optional fallback.
//!
//! - A registered name is validated against the tool's schema and executed through the
//!   registry (there is no path that skips validation).
//! - An unknown name is a structured [`ToolError::UnknownTool`] (code `unknown_tool`) listing
//!   close matches. Only when the bridge was built with the fallback enabled does it first ask
//!   the planner to interpret the name (separators read as spaces) as an intent; if that finds
//!   nothing, the caller still gets the `unknown_tool` error.
//! - [`Bridge::execute_intent`] plans from free text explicitly (it needs a planner, not the
//!   fallback flag).
//! - Evidence is recorded for every execution, successful or not, on every path; calls rejected
//!   before the tool ran (unknown name, invalid arguments) are not executions and leave none.

use std::sync::Arc;

use serde_json::Value;

use super::Planner;
use super::evidence::EvidenceStore;
use super::executor::{PlanExecutor, PlanRun};
use super::plan::ExecutionPlan;
use crate::registry::ToolRegistry;
use crate::tool::{ToolContext, ToolError, ToolOutput};

/// How a call reached its tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The named tool was registered and called.
    Direct,
    /// The planner chose the tool for a capability.
    Planned {
        /// The capability the planner resolved.
        capability: String,
    },
}

/// The result of a bridged call.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeOutcome {
    /// The tool's output.
    pub output: ToolOutput,
    /// The tool that ran.
    pub tool: String,
    /// How it was reached.
    pub route: Route,
}

/// Executes named tools, with evidence, and optionally falls back to a planner.
#[derive(Clone)]
pub struct Bridge {
    executor: PlanExecutor,
    registry: Arc<ToolRegistry>,
    planner: Option<Arc<Planner>>,
    fallback: bool,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("registry", &self.registry)
            .field("planner", &self.planner.is_some())
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl Bridge {
    /// A bridge without a planner: named calls only.
    pub fn new(registry: Arc<ToolRegistry>, evidence: Arc<dyn EvidenceStore>) -> Self {
        Self {
            executor: PlanExecutor::new(Arc::clone(&registry), evidence),
            registry,
            planner: None,
            fallback: false,
        }
    }

    /// A bridge over the planner's registry and evidence store; `fallback` says whether an
    /// unknown name is handed to the planner before failing.
    pub fn with_planner(planner: Arc<Planner>, fallback: bool) -> Self {
        Self {
            executor: planner.executor(),
            registry: Arc::clone(planner.registry()),
            planner: Some(planner),
            fallback,
        }
    }

    /// Executes tool `name` with `args` (validated against its schema). See the module docs for
    /// unknown names.
    pub async fn execute(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<BridgeOutcome, ToolError> {
        if self.registry.contains(name) {
            let output = self.executor.call(name, None, args, ctx).await?;
            return Ok(BridgeOutcome {
                output,
                tool: name.to_owned(),
                route: Route::Direct,
            });
        }
        let unknown = self.registry.unknown(name);
        let Some(planner) = self.planner.as_ref().filter(|_| self.fallback) else {
            return Err(unknown);
        };
        let intent = name.replace(['_', '-'], " ");
        match planner.plan_intent(&intent, Some(args)).await {
            Ok(planned) => self.run_intent_plan(planned, ctx).await,
            Err(ToolError::NoCapability { .. }) => Err(unknown),
            Err(other) => Err(other),
        }
    }

    /// Plans a call from free text ("compute 1+1") and executes it. Needs a planner.
    pub async fn execute_intent(
        &self,
        text: &str,
        ctx: &ToolContext,
    ) -> Result<BridgeOutcome, ToolError> {
        let planner = self.planner.as_ref().ok_or_else(|| {
            ToolError::InvalidConfiguration("this bridge has no planner".to_owned())
        })?;
        let planned = planner.plan_intent(text, None).await?;
        self.run_intent_plan(planned, ctx).await
    }

    /// Runs a multi-step plan, recording evidence for each step.
    pub async fn run_plan(
        &self,
        plan: &ExecutionPlan,
        ctx: &ToolContext,
    ) -> Result<PlanRun, ToolError> {
        self.executor.run(plan, ctx).await
    }

    async fn run_intent_plan(
        &self,
        planned: super::IntentPlan,
        ctx: &ToolContext,
    ) -> Result<BridgeOutcome, ToolError> {
        let tool = planned
            .plan
            .last_step()
            .map(|step| step.tool.clone())
            .unwrap_or_default();
        // A one-step plan: unwrap the step error so the caller sees the tool's own error.
        let run = self
            .executor
            .run(&planned.plan, ctx)
            .await
            .map_err(|err| match err {
                ToolError::StepFailed { error, .. } => *error,
                other => other,
            })?;
        Ok(BridgeOutcome {
            output: run.output,
            tool,
            route: Route::Planned {
                capability: planned.capability,
            },
        })
    }
}
