//! Running a validated [`ExecutionPlan`]: steps in order, bindings substituted, evidence recorded.
//!
//! Steps run one after another in the plan's topological order, all under the caller's
//! [`ToolContext`] (one deadline for the whole plan, cancellation checked before each step). Each
//! step goes through [`ToolRegistry::execute_observed`], so its arguments — after bindings are
//! substituted — are validated against the tool's schema like any other call. The first failure
//! stops the plan with [`ToolError::StepFailed`]. This module does not choose tools.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::evidence::{EvidenceRecord, EvidenceStore, record_best_effort};
use super::plan::{Binding, ExecutionPlan};
use crate::registry::ToolRegistry;
use crate::tool::{ToolContext, ToolError, ToolOutput};

/// What a plan produced.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRun {
    /// Each step's output, by step id.
    pub outputs: BTreeMap<String, Value>,
    /// The step ids in the order they ran.
    pub order: Vec<String>,
    /// The output of the last step.
    pub output: Value,
}

/// Runs plans against a registry, recording evidence for every step that ran.
#[derive(Clone)]
pub struct PlanExecutor {
    registry: Arc<ToolRegistry>,
    evidence: Arc<dyn EvidenceStore>,
}

impl PlanExecutor {
    /// An executor over `registry`, recording into `evidence`.
    pub fn new(registry: Arc<ToolRegistry>, evidence: Arc<dyn EvidenceStore>) -> Self {
        Self { registry, evidence }
    }

    /// Runs every step; see the module docs.
    pub async fn run(&self, plan: &ExecutionPlan, ctx: &ToolContext) -> Result<PlanRun, ToolError> {
        let mut outputs: BTreeMap<String, Value> = BTreeMap::new();
        let mut order = Vec::with_capacity(plan.steps().len());
        let mut last = Value::Null;
        for step in plan.steps() {
            let failed = |error: ToolError| ToolError::StepFailed {
                step: step.id.clone(),
                error: Box::new(error),
            };
            if ctx.is_cancelled() {
                return Err(failed(ToolError::Cancelled));
            }
            let args = substitute(&step.args, &outputs, "").map_err(failed)?;
            let output = self
                .call(&step.tool, step.capability.as_deref(), args, ctx)
                .await
                .map_err(failed)?;
            order.push(step.id.clone());
            last = output.clone();
            outputs.insert(step.id.clone(), output);
        }
        Ok(PlanRun {
            outputs,
            order,
            output: last,
        })
    }

    /// One validated, bounded call, with evidence when the tool actually ran.
    pub(crate) async fn call(
        &self,
        tool: &str,
        capability: Option<&str>,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let observed = self.registry.execute_observed(tool, args, ctx).await;
        if let Some(latency) = observed.ran_for {
            let record =
                EvidenceRecord::new(tool, latency, &observed.result).for_capability(capability);
            record_best_effort(self.evidence.as_ref(), record).await;
        }
        observed.result
    }
}

/// Replaces every binding in `value` by the bound output; `at` is the JSON pointer of `value`
/// inside the step's arguments, for errors.
fn substitute(
    value: &Value,
    outputs: &BTreeMap<String, Value>,
    at: &str,
) -> Result<Value, ToolError> {
    match value {
        Value::String(text) => match Binding::parse(text) {
            Some(Ok(binding)) => {
                let bound = outputs
                    .get(&binding.step)
                    .and_then(|output| binding.select(output));
                bound.cloned().ok_or_else(|| ToolError::InvalidArguments {
                    path: if at.is_empty() { "/".into() } else { at.into() },
                    message: format!("`{text}` does not point at a value of the step's output"),
                })
            }
            // Validation rejected malformed bindings; anything else is a plain string.
            _ => Ok(value.clone()),
        },
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| substitute(item, outputs, &format!("{at}/{i}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::Object(map) => map
            .iter()
            .map(|(key, item)| {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                substitute(item, outputs, &format!("{at}/{escaped}")).map(|v| (key.clone(), v))
            })
            .collect::<Result<serde_json::Map<_, _>, _>>()
            .map(Value::Object),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(value.clone()),
    }
}
