//! The typed source as a [`ToolProvider`], so the planner can plan over it: its tools listed
//! with their schemas, their capability tags (inferred from name and description when none were
//! set) and categories. Resolving stays [`super::ModelToolSource::resolve`]'s job.

use super::{ModelToolSource, SealedToolRegistry, ToolSelection, TypedTool};
use crate::provider::{ToolProvider, infer_capabilities};
use crate::registry::ToolInfo;

fn info<O>(tool: &TypedTool<O>) -> ToolInfo {
    let capabilities = if tool.capabilities.is_empty() {
        infer_capabilities(&tool.id, &tool.description)
    } else {
        tool.capabilities.clone()
    };
    ToolInfo {
        name: tool.id.clone(),
        description: tool.description.clone(),
        parameters: tool.parameters.clone(),
        capabilities,
        category: tool.category.clone(),
    }
}

impl<O: 'static> ToolProvider for SealedToolRegistry<O> {
    fn list_tools(&self) -> Vec<ToolInfo> {
        ModelToolSource::tools(self).into_iter().map(info).collect()
    }

    fn describe(&self, name: &str) -> Option<ToolInfo> {
        self.get(name).map(info)
    }
}

impl<O: 'static> ToolProvider for ToolSelection<O> {
    fn list_tools(&self) -> Vec<ToolInfo> {
        ModelToolSource::tools(self).into_iter().map(info).collect()
    }
}
