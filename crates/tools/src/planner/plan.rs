//! Execution plans: steps with dependencies and output bindings, validated as a DAG.
//!
//! A step's argument may be a *binding*: a string of exactly the form `$steps.<id>.output`
//! (the whole output of step `<id>`) or `$steps.<id>.output/<json-pointer>` (a part of it), at any
//! depth of the arguments. A binding is also a dependency. [`ExecutionPlan::new`] is the only
//! way to build a plan and it checks everything that can be known before running:
//!
//! - step ids are valid and unique, and the plan is not empty;
//! - every dependency and binding names a step of the plan (`missing_dependency`);
//! - there is no cycle (`cycle`), so the steps have a topological order;
//! - a top-level argument bound to another step's output has a compatible type: the producer's
//!   declared output type against the consumer's declared input type (`type_mismatch`); a pointer
//!   into a scalar output is a mismatch too.
//!
//! Running a plan is [`super::executor`]'s job; this module does no I/O.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::capability::{CapabilityDef, ValueType};
use crate::registry::validate_name;
use crate::tool::ToolError;

/// The prefix that marks a binding.
pub const BINDING_PREFIX: &str = "$steps.";

/// One step: a tool call whose arguments may bind earlier outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanStep {
    /// The step id (`[A-Za-z0-9_-]{1,64}`), unique in the plan.
    pub id: String,
    /// The registered tool to call.
    pub tool: String,
    /// The capability the step provides, when the planner chose the tool.
    pub capability: Option<String>,
    /// The arguments, possibly with bindings.
    pub args: Value,
    /// Steps that must run first, besides the ones the bindings name.
    pub depends_on: Vec<String>,
    /// The declared type of each argument (an argument not listed accepts anything).
    pub inputs: BTreeMap<String, ValueType>,
    /// The declared type of the output.
    pub output: ValueType,
}

impl PlanStep {
    /// A step calling `tool` with `args`, untyped.
    pub fn new(id: impl Into<String>, tool: impl Into<String>, args: Value) -> Self {
        Self {
            id: id.into(),
            tool: tool.into(),
            capability: None,
            args,
            depends_on: Vec::new(),
            inputs: BTreeMap::new(),
            output: ValueType::Any,
        }
    }

    /// A step calling `tool` for `capability`, typed as the capability declares.
    pub fn for_capability(
        id: impl Into<String>,
        capability: &CapabilityDef,
        tool: impl Into<String>,
        args: Value,
    ) -> Self {
        Self {
            capability: Some(capability.id.clone()),
            inputs: capability.inputs.clone(),
            output: capability.output,
            ..Self::new(id, tool, args)
        }
    }

    /// Adds an explicit dependency.
    pub fn after(mut self, step: impl Into<String>) -> Self {
        self.depends_on.push(step.into());
        self
    }

    /// Declares the type of argument `name`.
    pub fn input(mut self, name: impl Into<String>, ty: ValueType) -> Self {
        self.inputs.insert(name.into(), ty);
        self
    }

    /// Declares the output type.
    pub fn output(mut self, ty: ValueType) -> Self {
        self.output = ty;
        self
    }
}

/// A reference to (part of) an earlier step's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The step whose output is used.
    pub step: String,
    /// A JSON pointer into that output; empty for the whole output.
    pub pointer: String,
}

impl Binding {
    /// Parses a string argument: `None` when it is not a binding, `Some(Err(reason))` when it
    /// starts like one but is malformed.
    pub fn parse(text: &str) -> Option<Result<Self, String>> {
        let rest = text.strip_prefix(BINDING_PREFIX)?;
        let parsed = match rest.split_once('.') {
            Some((step, tail)) => match tail.strip_prefix("output") {
                Some(pointer) if pointer.is_empty() || pointer.starts_with('/') => {
                    if validate_name(step).is_ok() {
                        Ok(Self {
                            step: step.to_owned(),
                            pointer: pointer.to_owned(),
                        })
                    } else {
                        Err(format!("`{step}` is not a valid step id"))
                    }
                }
                _ => Err("expected `.output` or `.output/<json-pointer>` after the step id".into()),
            },
            None => Err("expected `$steps.<id>.output`".into()),
        };
        Some(parsed)
    }

    /// The bound value in `output`, if the pointer finds one.
    pub fn select<'v>(&self, output: &'v Value) -> Option<&'v Value> {
        if self.pointer.is_empty() {
            Some(output)
        } else {
            output.pointer(&self.pointer)
        }
    }
}

/// Why a plan is invalid. Each variant has a stable [`PlanError::code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A plan needs at least one step.
    #[error("the plan has no steps")]
    Empty,
    /// A step id outside `[A-Za-z0-9_-]{1,64}`.
    #[error("invalid step id `{0}`")]
    InvalidStepId(String),
    /// Two steps share an id.
    #[error("step id `{0}` is used twice")]
    DuplicateStep(String),
    /// A dependency or binding names a step the plan does not have.
    #[error("step `{step}` depends on `{missing}`, which is not a step of the plan")]
    MissingDependency {
        /// The step with the dangling reference.
        step: String,
        /// The id it names.
        missing: String,
    },
    /// The dependencies form a cycle through these steps.
    #[error("the steps {} depend on each other in a cycle", .steps.join(", "))]
    Cycle {
        /// The steps that cannot be ordered, sorted.
        steps: Vec<String>,
    },
    /// A bound output's type does not fit the argument.
    #[error(
        "step `{step}` argument `{argument}` expects {expected:?} but `{from}` produces {found:?}"
    )]
    TypeMismatch {
        /// The consuming step.
        step: String,
        /// Its argument that holds the binding.
        argument: String,
        /// The type the argument accepts.
        expected: ValueType,
        /// The type the binding produces.
        found: ValueType,
        /// The producing step.
        from: String,
    },
    /// A string that starts like a binding but is malformed.
    #[error("step `{step}` has a malformed binding `{binding}`: {reason}")]
    BadBinding {
        /// The step holding it.
        step: String,
        /// The malformed string.
        binding: String,
        /// What is wrong.
        reason: String,
    },
}

impl PlanError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "empty_plan",
            Self::InvalidStepId(_) => "invalid_step_id",
            Self::DuplicateStep(_) => "duplicate_step",
            Self::MissingDependency { .. } => "missing_dependency",
            Self::Cycle { .. } => "cycle",
            Self::TypeMismatch { .. } => "type_mismatch",
            Self::BadBinding { .. } => "bad_binding",
        }
    }
}

impl From<PlanError> for ToolError {
    fn from(err: PlanError) -> Self {
        ToolError::InvalidPlan(format!("{} ({})", err, err.code()))
    }
}

/// A validated plan: its steps in a topological order.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionPlan {
    steps: Vec<PlanStep>,
}

impl ExecutionPlan {
    /// Validates the steps (see the module docs) and orders them topologically; among steps
    /// that are ready at the same time, the given order is kept.
    pub fn new(steps: Vec<PlanStep>) -> Result<Self, PlanError> {
        if steps.is_empty() {
            return Err(PlanError::Empty);
        }
        let mut index = BTreeMap::new();
        for (i, step) in steps.iter().enumerate() {
            validate_name(&step.id).map_err(|_| PlanError::InvalidStepId(step.id.clone()))?;
            if index.insert(step.id.as_str(), i).is_some() {
                return Err(PlanError::DuplicateStep(step.id.clone()));
            }
        }

        // Dependencies: explicit ones plus every binding, checked to exist.
        let mut dependencies: Vec<BTreeSet<usize>> = Vec::with_capacity(steps.len());
        for step in &steps {
            let mut deps = BTreeSet::new();
            let mut bindings = Vec::new();
            collect_bindings(&step.id, &step.args, &mut bindings)?;
            let named = step
                .depends_on
                .iter()
                .map(String::as_str)
                .chain(bindings.iter().map(|b| b.step.as_str()));
            for dep in named {
                match index.get(dep) {
                    Some(&i) => {
                        deps.insert(i);
                    }
                    None => {
                        return Err(PlanError::MissingDependency {
                            step: step.id.clone(),
                            missing: dep.to_owned(),
                        });
                    }
                }
            }
            dependencies.push(deps);
        }

        let order = topological_order(&steps, &dependencies)?;
        check_types(&steps, &index)?;

        let mut slots: Vec<Option<PlanStep>> = steps.into_iter().map(Some).collect();
        let ordered = order
            .into_iter()
            .filter_map(|i| slots.get_mut(i).and_then(Option::take))
            .collect();
        Ok(Self { steps: ordered })
    }

    /// The steps in execution order.
    pub fn steps(&self) -> &[PlanStep] {
        &self.steps
    }

    /// The step that runs last; its output is the plan's output.
    pub fn last_step(&self) -> Option<&PlanStep> {
        self.steps.last()
    }
}

/// Kahn's algorithm, always taking the ready step that came first in the input.
fn topological_order(
    steps: &[PlanStep],
    dependencies: &[BTreeSet<usize>],
) -> Result<Vec<usize>, PlanError> {
    let mut remaining: Vec<usize> = dependencies.iter().map(BTreeSet::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (i, deps) in dependencies.iter().enumerate() {
        for &d in deps {
            dependents[d].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..steps.len()).filter(|&i| remaining[i] == 0).collect();
    let mut order = Vec::with_capacity(steps.len());
    while let Some(next) = ready.pop_first() {
        order.push(next);
        for &dependent in &dependents[next] {
            remaining[dependent] -= 1;
            if remaining[dependent] == 0 {
                ready.insert(dependent);
            }
        }
    }
    if order.len() == steps.len() {
        Ok(order)
    } else {
        let mut cyclic: Vec<String> = (0..steps.len())
            .filter(|i| remaining[*i] > 0)
            .map(|i| steps[i].id.clone())
            .collect();
        cyclic.sort();
        Err(PlanError::Cycle { steps: cyclic })
    }
}

/// Checks the types of top-level arguments that are bindings.
fn check_types(steps: &[PlanStep], index: &BTreeMap<&str, usize>) -> Result<(), PlanError> {
    for step in steps {
        let Some(args) = step.args.as_object() else {
            continue;
        };
        for (argument, value) in args {
            let Some(Ok(binding)) = value.as_str().and_then(Binding::parse) else {
                continue;
            };
            let Some(producer) = index.get(binding.step.as_str()).map(|&i| &steps[i]) else {
                continue;
            };
            let produced = if binding.pointer.is_empty() {
                producer.output
            } else if producer.output.is_container() {
                // The part a pointer selects is not declared.
                ValueType::Any
            } else {
                return Err(PlanError::TypeMismatch {
                    step: step.id.clone(),
                    argument: argument.clone(),
                    expected: ValueType::Object,
                    found: producer.output,
                    from: producer.id.clone(),
                });
            };
            let expected = step.inputs.get(argument).copied().unwrap_or(ValueType::Any);
            if !expected.accepts(produced) {
                return Err(PlanError::TypeMismatch {
                    step: step.id.clone(),
                    argument: argument.clone(),
                    expected,
                    found: produced,
                    from: producer.id.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Every binding anywhere in `value`.
fn collect_bindings(step: &str, value: &Value, out: &mut Vec<Binding>) -> Result<(), PlanError> {
    match value {
        Value::String(text) => match Binding::parse(text) {
            Some(Ok(binding)) => out.push(binding),
            Some(Err(reason)) => {
                return Err(PlanError::BadBinding {
                    step: step.to_owned(),
                    binding: text.clone(),
                    reason,
                });
            }
            None => {}
        },
        Value::Array(items) => {
            for item in items {
                collect_bindings(step, item, out)?;
            }
        }
        Value::Object(map) => {
            for item in map.values() {
                collect_bindings(step, item, out)?;
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_parse_whole_outputs_and_pointers() {
        assert_eq!(
            Binding::parse("$steps.a.output"),
            Some(Ok(Binding {
                step: "a".into(),
                pointer: String::new()
            }))
        );
        assert_eq!(
            Binding::parse("$steps.sum-1.output/items/0"),
            Some(Ok(Binding {
                step: "sum-1".into(),
                pointer: "/items/0".into()
            }))
        );
        assert_eq!(Binding::parse("plain text"), None);
        assert!(matches!(Binding::parse("$steps.a.out"), Some(Err(_))));
        assert!(matches!(Binding::parse("$steps.a"), Some(Err(_))));
        assert!(matches!(Binding::parse("$steps.a b.output"), Some(Err(_))));
    }

    #[test]
    fn ready_steps_keep_their_given_order() {
        let plan = ExecutionPlan::new(vec![
            PlanStep::new("c", "t", serde_json::json!({"x": "$steps.a.output"})),
            PlanStep::new("a", "t", serde_json::json!({})),
            PlanStep::new("b", "t", serde_json::json!({})),
        ])
        .unwrap();
        let ids: Vec<&str> = plan.steps().iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b"]);
    }
}
