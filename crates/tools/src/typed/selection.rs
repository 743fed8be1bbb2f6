//! [`ToolSelection`]: the read-only subset of a sealed registry that one stage may use, and
//! how it resolves (a registered tool outside the subset is `not_in_stage`, an unregistered one
//! `unknown_tool`). Building the subset is [`SealedToolRegistry::select`]'s job.

use std::collections::BTreeSet;
use std::fmt;

use super::{ModelSelection, ModelToolSource, SealedToolRegistry, TypedTool};
use crate::tool::ToolError;

/// The subset of a [`SealedToolRegistry`] one stage may use; read-only.
pub struct ToolSelection<O> {
    pub(super) registry: SealedToolRegistry<O>,
    pub(super) allowed: BTreeSet<String>,
}

impl<O> Clone for ToolSelection<O> {
    fn clone(&self) -> Self {
        Self {
            registry: self.registry.clone(),
            allowed: self.allowed.clone(),
        }
    }
}

impl<O> fmt::Debug for ToolSelection<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(&self.allowed).finish()
    }
}

impl<O> ToolSelection<O> {
    /// The ids in this view, sorted.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.allowed.iter().map(String::as_str)
    }

    /// True when `id` is offered in this view.
    pub fn contains(&self, id: &str) -> bool {
        self.allowed.contains(id)
    }
}

impl<O> ModelToolSource<O> for ToolSelection<O> {
    fn tools(&self) -> Vec<&TypedTool<O>> {
        self.allowed
            .iter()
            .filter_map(|id| self.registry.get(id))
            .collect()
    }

    fn resolve(&self, selection: &ModelSelection, stage: &str) -> Result<O, ToolError> {
        // Not registered at all is a different mistake (a hallucinated id) from a real tool
        // offered to another stage, so the two get different errors.
        let tool = self.registry.lookup(&selection.tool_id)?;
        if !self.allowed.contains(&selection.tool_id) {
            return Err(ToolError::NotInStage {
                tool: selection.tool_id.clone(),
                stage: stage.to_owned(),
            });
        }
        tool.resolve_input(&selection.input)
    }
}
