//! The web tools, `web_search` and `web_fetch`, and the SSRF-safe client they share.
//!
//! - [`ssrf`]: the policy — which URLs, ports and addresses may be reached — and the resolver
//!   that checks every address it hands to the HTTP client.
//! - [`client`]: [`SafeClient`], reqwest behind the guard, with redirects followed (and
//!   re-checked) here, no proxies, and caps on size and time.
//! - [`search`]: [`WebSearch`] over a configured [`SearchBackend`] (SearXNG, Brave, Tavily).
//! - [`fetch`]: [`WebFetch`], one page as Markdown text.
//!
//! Neither tool is in [`crate::builtins::all`]: they need configuration ([`WebConfig`]) and are
//! built by [`crate::builtins::configured`].

pub mod client;
pub mod fetch;
pub mod search;
pub mod ssrf;

use std::sync::Arc;

pub use client::{FetchError, SafeClient};
pub use fetch::WebFetch;
pub use search::{SearchBackend, WebSearch};
pub use ssrf::{Reason, Refusal, SsrfPolicy};

use crate::{Tool, ToolError};

/// How the web tools are set up.
#[derive(Debug, Clone, Default)]
pub struct WebConfig {
    /// What the tools may reach, and their size and time caps.
    pub policy: SsrfPolicy,
    /// The search backend; without one, `web_search` is not offered.
    pub search: Option<SearchBackend>,
}

/// `web_fetch`, and `web_search` when a backend is configured, sharing one guarded client.
pub fn tools(config: &WebConfig) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
    let client = SafeClient::new(config.policy.clone())?;
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(WebFetch::new(client.clone()))];
    if let Some(backend) = &config.search {
        tools.push(Arc::new(WebSearch::new(client, backend.clone())));
    }
    Ok(tools)
}
