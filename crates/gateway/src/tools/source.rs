//! The gateway-run tools as the tool library's typed source: every tool the gateway may run
//! (its built-ins, its search, its images function, its `tool_search`, the configured MCP
//! servers' tools and a request's own) is one typed tool, its offered JSON Schema checked by the
//! library and its input parsed into an [`Action`]. A request's gateway tools are a selection of
//! that source (the key scope's view, `Scope::tool_view`), and the tool loop resolves the model's
//! calls through the library's model transport: provider name → tool id by the plan's names,
//! then the source's typed errors (`unknown_tool`, `not_in_stage`, `invalid_arguments` with the
//! JSON pointer) as the result the model reads.
//!
//! Not here: running an action (the parent module, `images`, `deferred`), which tools a request
//! is offered (`GatewayTools::offer_for`).

use std::collections::HashMap;

use serde_json::Value;
use toolbridge_core::plan::{GatewayTool, Identity};
use toolbridge_tools::ToolError;
use toolbridge_tools::typed::{
    ModelToolRegistry, ModelTransport, NameMap, SealedToolRegistry, ToolSelection,
    create_model_transport, define_schema,
};

use super::images::ImageArgs;
use super::{BUILTIN_SERVER, GatewayTools};

/// The stage name the tool loop's resolution errors carry.
pub(crate) const LOOP_STAGE: &str = "gateway_tools";

/// What a resolved gateway call does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// A built-in (server `toolbridge`) or an MCP server's tool, with schema-valid arguments.
    Run {
        server: String,
        name: String,
        arguments: Value,
    },
    /// An image to make or edit.
    Image(ImageArgs),
    /// A search over the request's deferred tools (`{"query", "limit"?}`).
    ToolSearch(Value),
}

/// The typed source of gateway-run tools, and the tool id of each `(server, name)`.
#[derive(Debug, Clone)]
pub(crate) struct GatewaySource {
    registry: SealedToolRegistry<Action>,
    ids: HashMap<(String, String), String>,
}

/// A tool id: `[A-Za-z0-9_-]{1,64}`.
const MAX_ID: usize = 64;

impl GatewaySource {
    /// The source of `tools`; a tool that cannot be a typed tool (its schema does not compile)
    /// is the error.
    pub(crate) fn build<'a>(
        tools: impl IntoIterator<Item = &'a GatewayTool>,
    ) -> Result<Self, ToolError> {
        Self::empty().extend(tools)
    }

    /// No tools.
    pub(crate) fn empty() -> Self {
        Self {
            registry: SealedToolRegistry::default(),
            ids: HashMap::new(),
        }
    }

    /// This source and `tools` (a request's own MCP servers' tools): the tools here are shared,
    /// not compiled again.
    pub(crate) fn extend<'a>(
        &self,
        tools: impl IntoIterator<Item = &'a GatewayTool>,
    ) -> Result<Self, ToolError> {
        let mut ids = self.ids.clone();
        let mut taken: std::collections::HashSet<String> = ids.values().cloned().collect();
        let mut more = ModelToolRegistry::new();
        for tool in tools {
            let key = (tool.server.clone(), tool.name.clone());
            if ids.contains_key(&key) {
                continue;
            }
            let id = unique_id(&tool.server, &tool.name, &taken);
            taken.insert(id.clone());
            more = typed(more, &id, tool);
            ids.insert(key, id);
        }
        Ok(Self {
            registry: self.registry.extend(more)?,
            ids,
        })
    }

    /// The tool id of `name` of `server`.
    pub(crate) fn id(&self, server: &str, name: &str) -> Option<&str> {
        self.ids
            .get(&(server.to_owned(), name.to_owned()))
            .map(String::as_str)
    }

    /// The typed registry.
    pub(crate) fn registry(&self) -> &SealedToolRegistry<Action> {
        &self.registry
    }

    /// The selection of `tools` (those the source has), with no key rule applied.
    pub(crate) fn select<'a>(
        &self,
        tools: impl IntoIterator<Item = &'a GatewayTool>,
    ) -> Result<ToolSelection<Action>, ToolError> {
        self.registry.select(
            tools
                .into_iter()
                .filter_map(|t| self.id(&t.server, &t.name)),
        )
    }

    /// The key-rule candidates of `tools`: each tool's id, and the `(type, name)` a key's tool
    /// rules match it by — a search as `web_search`, images as `image_generation`, any other as
    /// `mcp:<server label>` (built-ins: `mcp:toolbridge`) — or `None` for the `tool_search`
    /// over the request's own tools, which no rule governs.
    pub(crate) fn candidates<'a>(
        &'a self,
        tools: &'a [GatewayTool],
    ) -> impl Iterator<Item = (&'a str, Option<(&'a str, Option<&'a str>)>)> + 'a {
        tools.iter().filter_map(|t| {
            let id = self.id(&t.server, &t.name)?;
            let rule = if GatewayTools::is_tool_search(&t.server, &t.name) {
                None
            } else if GatewayTools::is_search(&t.server, &t.name) {
                Some(("web_search", None))
            } else if GatewayTools::is_image(&t.server, &t.name) {
                Some(("image_generation", None))
            } else {
                Some(("mcp", Some(t.server.as_str())))
            };
            Some((id, rule))
        })
    }

    /// The model transport of the tool loop over `stage`: the plan's provider names of gateway
    /// tools mapped to their ids.
    pub(crate) fn transport(
        &self,
        stage: ToolSelection<Action>,
        names: &toolbridge_core::plan::NameMap,
    ) -> ModelTransport<ToolSelection<Action>> {
        create_model_transport(LOOP_STAGE, stage).with_names(self.names(names))
    }

    /// The provider names of the plan's gateway tools → tool ids.
    pub(crate) fn names(&self, names: &toolbridge_core::plan::NameMap) -> NameMap {
        names
            .provider_names()
            .filter_map(|provider| match names.identity(provider) {
                Some(Identity::Gateway { server, name }) => {
                    Some((provider.to_owned(), self.id(server, name)?.to_owned()))
                }
                _ => None,
            })
            .collect()
    }
}

/// `tool` added to `registry` as the typed tool `id`: its offered schema, parsed into the
/// action the gateway runs.
fn typed(
    registry: ModelToolRegistry<Action>,
    id: &str,
    tool: &GatewayTool,
) -> ModelToolRegistry<Action> {
    let description = tool.description.clone().unwrap_or_default();
    if GatewayTools::is_image(&tool.server, &tool.name) {
        let schema = define_schema(tool.parameters.clone(), ImageArgs::from_value);
        return registry.schema_tool(id, description, schema, Action::Image);
    }
    if GatewayTools::is_tool_search(&tool.server, &tool.name) {
        let schema = define_schema(tool.parameters.clone(), |v: &Value| Ok(v.clone()));
        return registry.schema_tool(id, description, schema, Action::ToolSearch);
    }
    let (server, name) = (tool.server.clone(), tool.name.clone());
    let schema = define_schema(tool.parameters.clone(), |v: &Value| Ok(v.clone()));
    registry.schema_tool(id, description, schema, move |arguments| Action::Run {
        server: server.clone(),
        name: name.clone(),
        arguments,
    })
}

/// A built-in keeps its name; an MCP tool is `label__name`; outside `[A-Za-z0-9_-]` becomes `_`,
/// cut to 64, made unique with `_2`, `_3`, ….
fn unique_id(server: &str, name: &str, taken: &std::collections::HashSet<String>) -> String {
    let raw = if server == BUILTIN_SERVER {
        name.to_owned()
    } else {
        format!("{server}__{name}")
    };
    let mut base = toolbridge_tools::mcp::safe_tool_name(&raw);
    if base.is_empty() {
        base.push_str("tool");
    }
    base.truncate(MAX_ID);
    if !taken.contains(&base) {
        return base;
    }
    (2..)
        .map(|n| {
            let suffix = format!("_{n}");
            let keep = MAX_ID.saturating_sub(suffix.len()).min(base.len());
            format!("{}{suffix}", &base[..keep])
        })
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or(base)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tools::images;
    use serde_json::json;

    fn tool(server: &str, name: &str) -> GatewayTool {
        GatewayTool {
            server: server.into(),
            name: name.into(),
            description: None,
            parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
        }
    }

    #[test]
    fn ids_are_valid_unique_and_a_tool_resolves_to_its_action() {
        let tools = [
            tool(BUILTIN_SERVER, "calculator"),
            tool("git hub", "get.issue"),
            tool("git_hub", "get_issue"),
            tool(BUILTIN_SERVER, images::IMAGE_TOOL),
        ];
        let source = GatewaySource::build(&tools[..3]).unwrap();
        assert_eq!(source.id(BUILTIN_SERVER, "calculator"), Some("calculator"));
        assert_eq!(
            source.id("git hub", "get.issue"),
            Some("git_hub__get_issue")
        );
        assert_eq!(
            source.id("git_hub", "get_issue"),
            Some("git_hub__get_issue_2")
        );
        let more = source.extend(&tools[3..]).unwrap();
        assert!(source.id(BUILTIN_SERVER, images::IMAGE_TOOL).is_none());
        let stage = more.select(&tools).unwrap();
        let transport = create_model_transport("s", stage);
        let (_, action) = transport
            .resolve_text("c", "git_hub__get_issue", "{\"x\": 1}")
            .unwrap();
        assert_eq!(
            action,
            Action::Run {
                server: "git hub".into(),
                name: "get.issue".into(),
                arguments: json!({"x": 1})
            }
        );
        let err = transport
            .resolve_text::<Action>("c", "calculator", "{\"x\": \"one\"}")
            .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments { ref path, .. } if path == "/x"));
    }
}
