//! What the gateway says of its tools: the system note naming the gateway-run tools a request
//! got (so models call them instead of improvising), and `toolbridge check`'s lines.

use toolbridge_core::plan::GatewayOffer;

use super::GatewayTools;

/// The system note a request with gateway-run tools gets, unless configured otherwise.
pub(super) const DEFAULT_NOTE: &str = "The gateway runs these tools for you: {tools}. When the user asks for what one of them does, call it; do not look for API keys, install packages or run commands to do the same.";

impl GatewayTools {
    /// What `toolbridge check` says of the gateway's tools.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "gateway tools: {} built-in(s) always offered, {} MCP server(s), search {}\n",
            self.always.len(),
            self.mcp_configs.len(),
            if self.search.is_some() {
                "configured"
            } else {
                "not configured"
            },
        );
        match &self.images {
            Some((backend, _)) => out.push_str(&format!(
                "  image_generation: gateway-run with {} at {} (key {}, {} s per image)\n",
                backend.model,
                backend.base_url(),
                if backend.has_key() { "set" } else { "none" },
                backend.timeout.as_secs()
            )),
            None => out.push_str(
                "  image_generation: no images backend (ignored where the provider lacks it)\n",
            ),
        }
        out.push_str(&format!(
            "  loop: at most {} steps in {} s (calls {} s each{})\n",
            self.limits.max_steps,
            self.limits.time_budget.as_secs(),
            self.limits.tool_timeout.as_secs(),
            match &self.images {
                Some((backend, _)) => format!(", an image {} s", backend.timeout.as_secs()),
                None => String::new(),
            }
        ));
        out.push_str(&format!(
            "  tool_search: gateway-run over a request's `defer_loading` tools (at most {} a search, {} searches a response)\n",
            super::MAX_FOUND,
            super::MAX_SEARCHES
        ));
        out
    }

    /// The system note naming the gateway-run tools of `offer` (`None`: no note, or no tools).
    pub fn note_for(&self, offer: &GatewayOffer) -> Option<String> {
        let template = self.note.as_ref()?;
        // The gateway's `tool_search` searches the client's own tools; its description says so.
        let names: Vec<&str> = offer
            .tools
            .iter()
            .filter(|t| !GatewayTools::is_tool_search(&t.server, &t.name))
            .map(|t| t.name.as_str())
            .collect();
        if names.is_empty() {
            return None;
        }
        Some(template.replace("{tools}", &names.join(", ")))
    }
}
