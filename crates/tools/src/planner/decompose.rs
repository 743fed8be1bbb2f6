//! Planning a request that asks for several things in order: the analyser's parts
//! ([`super::IntentAnalyzer::decompose`]) each resolved to one capability and its best tool,
//! with the data flow between them written as the plan's output bindings. A part that refers to
//! the result before it ("then sha256 the result") gets its text argument bound to that step's
//! output (at the producer's [`CapabilityDef::result_pointer`]); any other part keeps its own
//! text and runs after the one before it. The plan is validated as every plan is (cycles,
//! missing dependencies, types).
//!
//! Ambiguity is reported, not guessed: in a request of several parts, a part whose two best
//! known capabilities score the same is [`ToolError::AmbiguousIntent`], and a part that asks
//! for nothing known is [`ToolError::NoCapability`] naming that part.

use serde_json::{Map, Value};

use super::capability::CapabilityDef;
use super::evidence::ToolScore;
use super::intent::IntentMatch;
use super::plan::{BINDING_PREFIX, ExecutionPlan, PlanStep};
use super::{INTENT_STEP_ID, IntentPlan, Planner};
use crate::tool::ToolError;

/// One part of a request as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedPart {
    /// The part's text.
    pub text: String,
    /// The id of the step that serves it.
    pub step: String,
    /// The capability chosen.
    pub capability: String,
    /// The analyser's match for it.
    pub matched: IntentMatch,
    /// The capability's tools, best first; the step uses the first.
    pub ranking: Vec<ToolScore>,
    /// The step whose output this part's text argument is bound to, when it refers to one.
    pub bound_to: Option<String>,
}

/// A plan for a whole request: one step per part, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestPlan {
    /// The parts, in request order.
    pub parts: Vec<PlannedPart>,
    /// The validated plan; its last step gives the answer.
    pub plan: ExecutionPlan,
}

impl RequestPlan {
    /// The request plan as an [`IntentPlan`] describing its last part (the one whose output is
    /// the answer), with the whole plan.
    pub fn into_intent_plan(mut self) -> Option<IntentPlan> {
        let last = self.parts.pop()?;
        Some(IntentPlan {
            capability: last.capability,
            matched: last.matched,
            ranking: last.ranking,
            plan: self.plan,
        })
    }
}

impl Planner {
    /// Plans a request of one or more parts: one step per part (ids `step1`, `step2`, … or
    /// [`INTENT_STEP_ID`] for a single part), each for its best known capability and that
    /// capability's best tool, later parts bound to earlier outputs where they refer to them.
    pub async fn plan_request(&self, text: &str) -> Result<RequestPlan, ToolError> {
        let parts = self.analyzer.decompose(text);
        let several = parts.len() > 1;
        let mut planned: Vec<PlannedPart> = Vec::with_capacity(parts.len());
        let mut steps: Vec<PlanStep> = Vec::with_capacity(parts.len());
        for (index, part) in parts.iter().enumerate() {
            let part_text = text.get(part.span.clone()).unwrap_or_default();
            let (matched, def) = self.resolve_part(index, part_text, several).await?;
            let ranking = self.rank(&def.id).await?;
            let best = ranking
                .first()
                .map(|score| score.tool.clone())
                .ok_or_else(|| ToolError::NoCapability {
                    intent: part_text.to_owned(),
                })?;
            let id = if several {
                format!("step{}", index + 1)
            } else {
                INTENT_STEP_ID.to_owned()
            };
            let previous = steps.last().zip(planned.last());
            let binding = match previous {
                Some((step, _)) if part.uses_previous && def.text_argument.is_some() => {
                    let pointer = self
                        .catalog
                        .get(step.capability.as_deref().unwrap_or_default())
                        .and_then(|d| d.result_pointer.clone())
                        .unwrap_or_default();
                    Some((
                        step.id.clone(),
                        format!("{BINDING_PREFIX}{}.output{pointer}", step.id),
                    ))
                }
                _ => None,
            };
            let args = self.part_arguments(def, &best, &matched, part_text, binding.as_ref());
            let mut step = PlanStep::for_capability(id.clone(), def, best, args);
            if let (Some((before, _)), None) = (previous, &binding) {
                // Independent parts still run in the order the request gives.
                step = step.after(before.id.clone());
            }
            planned.push(PlannedPart {
                text: part_text.to_owned(),
                step: id,
                capability: def.id.clone(),
                matched,
                ranking,
                bound_to: binding.map(|(from, _)| from),
            });
            steps.push(step);
        }
        let plan = ExecutionPlan::new(steps)?;
        Ok(RequestPlan {
            parts: planned,
            plan,
        })
    }

    /// The best known capability for one part; in a request of several parts a tie between
    /// the two best is reported.
    async fn resolve_part(
        &self,
        index: usize,
        text: &str,
        several: bool,
    ) -> Result<(IntentMatch, &CapabilityDef), ToolError> {
        let known: Vec<IntentMatch> = self
            .analyze(text)
            .await?
            .into_iter()
            .filter(|m| self.catalog.get(&m.capability).is_some())
            .collect();
        if several
            && let [first, second, ..] = known.as_slice()
            && first.score == second.score
        {
            let candidates = known
                .iter()
                .take_while(|m| m.score == first.score)
                .map(|m| m.capability.clone())
                .collect();
            return Err(ToolError::AmbiguousIntent {
                part: index + 1,
                text: text.to_owned(),
                candidates,
            });
        }
        let matched = known
            .into_iter()
            .next()
            .ok_or_else(|| ToolError::NoCapability {
                intent: text.to_owned(),
            })?;
        let def = self
            .catalog
            .get(&matched.capability)
            .ok_or_else(|| ToolError::NoCapability {
                intent: text.to_owned(),
            })?;
        Ok((matched, def))
    }

    /// A part's arguments: the text argument (bound, or the part minus its matched terms) and
    /// the term argument when the tool's schema lists the matched term among its values.
    fn part_arguments(
        &self,
        def: &CapabilityDef,
        tool: &str,
        matched: &IntentMatch,
        text: &str,
        binding: Option<&(String, String)>,
    ) -> Value {
        let mut args = Map::new();
        if let Some(argument) = &def.text_argument {
            let value = match binding {
                Some((_, bound)) => bound.clone(),
                None => matched.remainder(text),
            };
            args.insert(argument.clone(), Value::String(value));
        }
        if let Some(argument) = &def.term_argument {
            let allowed = self.provider.describe(tool).and_then(|info| {
                info.parameters
                    .pointer(&format!("/properties/{argument}/enum"))
                    .and_then(Value::as_array)
                    .cloned()
            });
            let term = matched.terms.iter().find(|t| {
                allowed
                    .as_ref()
                    .is_some_and(|values| values.iter().any(|v| v.as_str() == Some(&t.term)))
            });
            if let Some(term) = term {
                args.insert(argument.clone(), Value::String(term.term.clone()));
            }
        }
        Value::Object(args)
    }
}
