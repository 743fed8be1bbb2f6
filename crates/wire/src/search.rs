//! Codex's standalone web search (`POST {base_url}/alpha/search`, sent when a provider sets
//! `supports_standalone_web_search`): the request Codex sends when its model calls the `web.run`
//! tool, and the answer it reads (`{"output": string, "encrypted_output"?: string}`).
//!
//! Inbound, so lenient: every field may be absent, unknown commands and fields are kept in
//! `extra`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The search request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SearchRequest {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub commands: Option<SearchCommands>,
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// `input` (the conversation), `settings`, `reasoning` and anything newer.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The operations of one request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SearchCommands {
    #[serde(default)]
    pub search_query: Option<Vec<SearchQuery>>,
    #[serde(default)]
    pub open: Option<Vec<OpenOperation>>,
    #[serde(default)]
    pub find: Option<Vec<FindOperation>>,
    /// `image_query`, `click`, `screenshot`, `finance`, `weather`, `sports`, `time`,
    /// `response_length`, and anything newer.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One web query.
#[derive(Debug, Clone, Deserialize)]
pub struct SearchQuery {
    pub q: String,
    /// Only results from the last this many days.
    #[serde(default)]
    pub recency: Option<u64>,
    /// Only results from these domains.
    #[serde(default)]
    pub domains: Option<Vec<String>>,
}

/// Open a page by URL (or a reference id of an earlier result).
#[derive(Debug, Clone, Deserialize)]
pub struct OpenOperation {
    pub ref_id: String,
    #[serde(default)]
    pub lineno: Option<u64>,
}

/// Find a text in a page.
#[derive(Debug, Clone, Deserialize)]
pub struct FindOperation {
    pub ref_id: String,
    pub pattern: String,
}

/// The answer.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResponse {
    pub output: String,
}
