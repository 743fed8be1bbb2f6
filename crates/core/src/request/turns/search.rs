//! The items of tool search in the conversation: a `tool_search_call` is an assistant call like
//! any other (replayed upstream in its degraded function form), a `tool_search_output` its
//! result, whose tools are lifted into the plan; `additional_tools` only declares tools.
//!
//! Not here: planning the lifted tools (`plan/context`).

use toolbridge_wire::responses::{Tool, ToolSearchCallItem, ToolSearchOutputItem};

use super::Reducer;
use crate::Error;
use crate::canonical::{CallKind, ContextSource, ContextTool, ToolOutput};
use crate::diagnostics::{ITEM_DROPPED, diag};

impl Reducer {
    /// A `tool_search_call`: an assistant call like any other, replayed in its degraded form.
    pub(super) fn tool_search_call(
        &mut self,
        i: usize,
        c: &ToolSearchCallItem,
    ) -> Result<(), Error> {
        if self.repeated(i, c.id.as_deref()) {
            return Ok(());
        }
        let call_id = c
            .call_id
            .clone()
            .or_else(|| c.id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("tool_search_{i}"));
        self.last_search = Some(call_id.clone());
        self.call(
            i,
            &call_id,
            CallKind::ToolSearch {
                arguments: c.arguments.clone(),
            },
        )
    }

    /// A `tool_search_output`: its tools are lifted into the plan of the following rounds, and
    /// the model sees the search's result as the names it can now call.
    pub(super) fn tool_search_output(
        &mut self,
        i: usize,
        o: &ToolSearchOutputItem,
    ) -> Result<(), Error> {
        if self.repeated(i, o.id.as_deref()) {
            return Ok(());
        }
        self.lift(i, &o.tools, ContextSource::Found);
        let call_id = o
            .call_id
            .clone()
            .filter(|id| !id.is_empty())
            .or_else(|| self.last_search.clone());
        let Some(call_id) = call_id else {
            self.diagnostics.push(diag(
                ITEM_DROPPED,
                Some(&format!("input[{i}]")),
                "a `tool_search_output` without a call was left out of the conversation; its tools are offered",
            ));
            return Ok(());
        };
        self.output(i, &call_id, ToolOutput::Text(found_text(&o.tools)))
    }

    /// Records the tools of item `i` for planning.
    pub(super) fn lift(&mut self, i: usize, tools: &[Tool], source: ContextSource) {
        for (j, tool) in tools.iter().enumerate() {
            self.context_tools.push(ContextTool {
                param: format!("input[{i}].tools[{j}]"),
                tool: tool.clone(),
                source,
            });
        }
    }
}

/// What the model reads as a search's result: the tools it can call now, under the names the
/// plan gives them (`namespace__name`), with their descriptions' first lines and their
/// parameters (which a tool called through `call_found_tool` has nowhere else). A native
/// Responses upstream that does not take `tool_search` reads the same text as the output of its
/// function. The text depends on the tools alone, so a replayed search reads the same every
/// turn.
pub fn found_text(tools: &[Tool]) -> String {
    let mut lines = Vec::new();
    for tool in tools {
        match tool {
            Tool::Namespace(ns) => {
                for child in &ns.tools {
                    lines.push(found_line(Some(&ns.name), child));
                }
            }
            other => lines.push(found_line(None, other)),
        }
    }
    if lines.is_empty() {
        return "No tools matched the search.".to_owned();
    }
    format!("These tools were found:\n{}", lines.join("\n"))
}

fn found_line(namespace: Option<&str>, tool: &Tool) -> String {
    let (name, description, parameters) = match tool {
        Tool::Function(f) => (
            f.name.as_str(),
            f.description.as_deref(),
            f.parameters.as_ref().map(|p| p.text().to_owned()),
        ),
        Tool::Custom(c) => (
            c.name.as_str(),
            c.description.as_deref(),
            Some(r#"{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}"#.to_owned()),
        ),
        other => (other.kind(), None, None),
    };
    let name = match namespace {
        Some(ns) => format!("{ns}__{name}"),
        None => name.to_owned(),
    };
    let mut line = match description
        .and_then(|d| d.lines().next())
        .filter(|d| !d.is_empty())
    {
        Some(first) => format!("- {name}: {first}"),
        None => format!("- {name}"),
    };
    if let Some(parameters) = parameters {
        line.push_str(&format!("\n  parameters: {parameters}"));
    }
    line
}
