//! The hosted `tool_search`: the gateway's own search over a request's tools marked
//! `defer_loading`, ranked by the tool library's planner (`ToolSearch::top_k`: intent analyser
//! and evidence scorer). A deferred function is ranked by its name and description, a namespace
//! member by its namespace's name and description with its own; what a search returns are the
//! found tools as declared (a namespace keeps only its found members), for a
//! `tool_search_output` item and the next round's plan.
//!
//! Bounded: at most [`MAX_FOUND`] tools per search (a smaller `limit` argument is honoured) and
//! [`MAX_SEARCHES`] searches per response (the loop counts; past it the model reads an error).

use serde_json::{Value, json};
use toolbridge_core::plan::{GatewayTool, TOOL_SEARCH_DESCRIPTION, is_deferred};
use toolbridge_tools::planner::ToolSearch;
use toolbridge_tools::provider::DeclaredTools;
use toolbridge_wire::responses::{NamespaceTool, Tool};

use super::{BUILTIN_SERVER, error_result};

/// The name of the gateway's search function.
pub(crate) const TOOL_SEARCH: &str = "tool_search";

/// The most tools one search returns.
pub(crate) const MAX_FOUND: usize = 8;

/// The most searches one response runs.
pub(crate) const MAX_SEARCHES: u32 = 4;

/// The gateway's `tool_search` function, as offered upstream.
pub(crate) fn offered() -> GatewayTool {
    GatewayTool {
        server: BUILTIN_SERVER.to_owned(),
        name: TOOL_SEARCH.to_owned(),
        description: Some(TOOL_SEARCH_DESCRIPTION.to_owned()),
        parameters: toolbridge_core::plan::tool_search_parameters(None),
    }
}

/// One searchable entry: its key for the ranker, and where it sits among the declared tools.
struct Entry {
    key: String,
    /// The declared tool, and the member's index for a namespace member.
    at: (usize, Option<usize>),
}

/// A request's deferred tools.
#[derive(Debug, Default, Clone)]
pub(crate) struct Deferred {
    tools: Vec<Tool>,
}

impl Deferred {
    /// The deferred tools among a request's declared `tools`.
    pub(crate) fn from_tools(tools: &[Tool]) -> Self {
        Self {
            tools: tools.iter().filter(|t| is_deferred(t)).cloned().collect(),
        }
    }

    fn entries(&self) -> (Vec<Entry>, Value) {
        let mut entries = Vec::new();
        let mut functions = Vec::new();
        let mut add = |key: String, description: String, at| {
            functions.push(json!({"type": "function", "name": key, "description": description}));
            entries.push(Entry { key, at });
        };
        for (i, tool) in self.tools.iter().enumerate() {
            match tool {
                Tool::Function(f) => add(
                    f.name.clone(),
                    f.description.clone().unwrap_or_default(),
                    (i, None),
                ),
                Tool::Custom(c) => add(
                    c.name.clone(),
                    c.description.clone().unwrap_or_default(),
                    (i, None),
                ),
                Tool::Namespace(ns) => {
                    for (j, member) in ns.tools.iter().enumerate() {
                        let (name, own) = match member {
                            Tool::Function(f) => (&f.name, f.description.as_deref()),
                            Tool::Custom(c) => (&c.name, c.description.as_deref()),
                            _ => continue,
                        };
                        let description = format!(
                            "{} {} {}",
                            ns.name.replace(['_', '-'], " "),
                            ns.description.as_deref().unwrap_or_default(),
                            own.unwrap_or_default()
                        );
                        add(format!("{}__{name}", ns.name), description, (i, Some(j)));
                    }
                }
                Tool::Other(_) => {}
            }
        }
        (entries, Value::Array(functions))
    }

    /// Runs one search (`args`: `{"query", "limit"?}`, resolved by the typed source): the text
    /// the model reads and the tools found, as declared. `Err` is the structured error the
    /// model reads.
    pub(crate) async fn search(&self, args: &Value) -> Result<(String, Vec<Tool>), String> {
        let query = args["query"].as_str().unwrap_or_default().trim();
        if query.is_empty() {
            return Err(error_result(
                "invalid_arguments",
                "`query` must be a non-empty string describing the tool you need",
            ));
        }
        let k = args["limit"]
            .as_u64()
            .map_or(MAX_FOUND, |l| (l as usize).clamp(1, MAX_FOUND));
        let (entries, functions) = self.entries();
        let provider = DeclaredTools::from_request_tools(&functions)
            .map_err(|e| error_result(e.code(), &e.to_string()))?;
        let hits = ToolSearch::default()
            .top_k(&provider, query, k)
            .await
            .map_err(|e| error_result(e.code(), &e.to_string()))?;
        let found: Vec<&Entry> = hits
            .iter()
            .filter_map(|h| entries.iter().find(|e| e.key == h.name))
            .collect();
        let tools = self.assemble(&found);
        let names: Vec<&str> = found.iter().map(|e| e.key.as_str()).collect();
        let text = if names.is_empty() {
            format!(
                "No tool matches \"{query}\". Search again with other words, or answer without one."
            )
        } else {
            format!(
                "Found {} tool(s): {}. They are callable functions in your next step.",
                names.len(),
                names.join(", ")
            )
        };
        Ok((text, tools))
    }

    /// The found entries as declared tools, in rank order of each tool's first hit: a
    /// namespace holds only its found members.
    fn assemble(&self, found: &[&Entry]) -> Vec<Tool> {
        let mut out: Vec<(usize, Tool)> = Vec::new();
        for entry in found {
            let (i, member) = entry.at;
            match (&self.tools[i], member) {
                (Tool::Namespace(ns), Some(j)) => {
                    let child = ns.tools[j].clone();
                    if let Some((_, Tool::Namespace(seen))) = out.iter_mut().find(|(k, _)| *k == i)
                    {
                        seen.tools.push(child);
                    } else {
                        out.push((
                            i,
                            Tool::Namespace(NamespaceTool {
                                tools: vec![child],
                                ..ns.clone()
                            }),
                        ));
                    }
                }
                (tool, _) => out.push((i, tool.clone())),
            }
        }
        out.into_iter().map(|(_, t)| t).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn deferred() -> Deferred {
        let tools: Vec<Tool> = serde_json::from_value(json!([
            {"type": "function", "name": "weather", "description": "Current weather"},
            {"type": "namespace", "name": "github", "description": "GitHub issues and pull requests", "tools": [
                {"type": "function", "name": "get_issue", "description": "Read an issue", "defer_loading": true},
                {"type": "function", "name": "list_issues", "description": "List the issues", "defer_loading": true},
                {"type": "function", "name": "merge_pull", "description": "Merge a pull request", "defer_loading": true}
            ]},
            {"type": "function", "name": "add_numbers", "description": "Add two numbers", "defer_loading": true}
        ]))
        .unwrap();
        Deferred::from_tools(&tools)
    }

    #[tokio::test]
    async fn found_members_share_one_namespace_and_undeferred_tools_are_not_searched() {
        let (text, found) = deferred()
            .search(&json!({"query": "github issue"}))
            .await
            .unwrap();
        assert!(text.contains("github__get_issue"), "{text}");
        let Tool::Namespace(ns) = &found[0] else {
            panic!("{found:?}");
        };
        assert_eq!(ns.name, "github");
        let members: Vec<&str> = ns
            .tools
            .iter()
            .map(|t| match t {
                Tool::Function(f) => f.name.as_str(),
                _ => "",
            })
            .collect();
        assert!(members.contains(&"get_issue") && members.contains(&"list_issues"));
        assert_eq!(found.len(), 1, "{found:?}");
        let (_, weather) = deferred()
            .search(&json!({"query": "current weather"}))
            .await
            .unwrap();
        assert!(weather.is_empty(), "{weather:?}");
    }

    #[tokio::test]
    async fn the_limit_is_honoured_and_bad_arguments_are_errors_the_model_reads() {
        let (_, found) = deferred()
            .search(&json!({"query": "github issue pull", "limit": 1}))
            .await
            .unwrap();
        let Tool::Namespace(ns) = &found[0] else {
            panic!("{found:?}");
        };
        assert_eq!(ns.tools.len(), 1);
        let empty = deferred().search(&json!({"query": " "})).await.unwrap_err();
        assert!(empty.contains("invalid_arguments"), "{empty}");
    }
}
