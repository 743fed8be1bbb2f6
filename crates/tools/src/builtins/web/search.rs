//! The `web_search` tool: one query to a configured search backend, through the [`SafeClient`].
//!
//! Backends are configured by URL ([`SearchBackend`]):
//! - SearXNG's JSON API: `GET {base}/search?q=…&format=json` (the instance must enable the
//!   `json` format);
//! - Brave Search: `GET {base}/res/v1/web/search?q=…&count=…` with `X-Subscription-Token`;
//! - Tavily: `POST {base}/search` with a JSON body and `Authorization: Bearer …`.
//!
//! The answer must be JSON within the policy's `max_response_bytes` (a cut answer is an error).
//! Results are normalised to `{title, url, snippet}`, only http(s) result URLs are kept, and
//! markup in snippets is stripped. The backend URL is the operator's, not the model's, but it
//! goes through the same guard; a backend on this host is reachable only through the policy's
//! loopback escape hatch. API keys travel only to the backend's origin (the client drops headers
//! on a cross-origin redirect) and never appear in `Debug` output.

use std::fmt;

use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use super::client::{Oversize, SafeClient, SafeRequest};
use crate::builtins::common::{Args, bounded, check_live};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// The longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 400;
/// The most results returned.
pub const MAX_RESULTS: usize = 20;
/// The results returned when the call does not say.
pub const DEFAULT_RESULTS: usize = 5;
/// The most characters of one title or snippet.
pub const MAX_SNIPPET_CHARS: usize = 500;

/// Brave Search's API origin.
pub const BRAVE_URL: &str = "https://api.search.brave.com/";
/// Tavily's API origin.
pub const TAVILY_URL: &str = "https://api.tavily.com/";

/// A search backend and where it lives.
#[derive(Clone, PartialEq)]
pub enum SearchBackend {
    /// A SearXNG instance with the JSON format enabled.
    Searxng {
        /// The instance's base URL (`https://searx.example.org/`).
        base_url: Url,
    },
    /// Brave Search's web search API.
    Brave {
        /// The API base URL ([`BRAVE_URL`]).
        base_url: Url,
        /// The subscription token.
        api_key: String,
    },
    /// Tavily's search API.
    Tavily {
        /// The API base URL ([`TAVILY_URL`]).
        base_url: Url,
        /// The API key.
        api_key: String,
    },
}

impl fmt::Debug for SearchBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys stay out of logs.
        f.debug_struct("SearchBackend")
            .field("kind", &self.kind())
            .field("base_url", &self.base_url().as_str())
            .finish_non_exhaustive()
    }
}

impl SearchBackend {
    /// Brave Search at its public origin.
    pub fn brave(api_key: impl Into<String>) -> Result<Self, ToolError> {
        Ok(Self::Brave {
            base_url: parse_base(BRAVE_URL)?,
            api_key: api_key.into(),
        })
    }

    /// Tavily at its public origin.
    pub fn tavily(api_key: impl Into<String>) -> Result<Self, ToolError> {
        Ok(Self::Tavily {
            base_url: parse_base(TAVILY_URL)?,
            api_key: api_key.into(),
        })
    }

    /// A SearXNG instance.
    pub fn searxng(base_url: &str) -> Result<Self, ToolError> {
        Ok(Self::Searxng {
            base_url: parse_base(base_url)?,
        })
    }

    /// `searxng`, `brave` or `tavily`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Searxng { .. } => "searxng",
            Self::Brave { .. } => "brave",
            Self::Tavily { .. } => "tavily",
        }
    }

    fn base_url(&self) -> &Url {
        match self {
            Self::Searxng { base_url } => base_url,
            Self::Brave { base_url, .. } | Self::Tavily { base_url, .. } => base_url,
        }
    }

    /// The request for one query.
    fn request(&self, query: &str, count: usize) -> Result<SafeRequest, ToolError> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        match self {
            Self::Searxng { base_url } => {
                let mut url = endpoint(base_url, "search")?;
                url.query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("format", "json");
                Ok(SafeRequest {
                    method: Method::GET,
                    url,
                    headers,
                    body: None,
                })
            }
            Self::Brave { base_url, api_key } => {
                let mut url = endpoint(base_url, "res/v1/web/search")?;
                url.query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("count", &count.to_string());
                headers.insert("x-subscription-token", secret(api_key)?);
                Ok(SafeRequest {
                    method: Method::GET,
                    url,
                    headers,
                    body: None,
                })
            }
            Self::Tavily { base_url, api_key } => {
                let url = endpoint(base_url, "search")?;
                headers.insert(AUTHORIZATION, secret(&format!("Bearer {api_key}"))?);
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                let body = serde_json::to_vec(&json!({
                    "query": query,
                    "max_results": count,
                    "search_depth": "basic",
                }))
                .map_err(|e| ToolError::Failed(format!("cannot encode the request: {e}")))?;
                Ok(SafeRequest {
                    method: Method::POST,
                    url,
                    headers,
                    body: Some(body),
                })
            }
        }
    }

    /// Normalises the backend's answer.
    fn parse(&self, body: &[u8]) -> Result<Vec<Hit>, ToolError> {
        let bad = |e: serde_json::Error| {
            ToolError::Failed(format!(
                "the {} backend answered something that is not its JSON: {e}",
                self.kind()
            ))
        };
        let raw = match self {
            Self::Searxng { .. } | Self::Tavily { .. } => {
                serde_json::from_slice::<ResultsAnswer>(body)
                    .map_err(bad)?
                    .results
            }
            Self::Brave { .. } => {
                serde_json::from_slice::<BraveAnswer>(body)
                    .map_err(bad)?
                    .web
                    .results
            }
        };
        Ok(raw
            .into_iter()
            .filter(|hit| {
                Url::parse(&hit.url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
            })
            .map(|hit| Hit {
                title: clean(&hit.title),
                snippet: clean(
                    hit.description
                        .as_deref()
                        .or(hit.content.as_deref())
                        .unwrap_or(""),
                ),
                url: hit.url,
            })
            .collect())
    }
}

fn parse_base(base: &str) -> Result<Url, ToolError> {
    Url::parse(base)
        .map_err(|e| ToolError::InvalidConfiguration(format!("search backend URL `{base}`: {e}")))
}

/// `base` joined with `path`, keeping any path prefix of `base` (`https://h/searx` + `search`
/// is `https://h/searx/search`).
fn endpoint(base: &Url, path: &str) -> Result<Url, ToolError> {
    let mut base = base.clone();
    if !base.path().ends_with('/') {
        let with_slash = format!("{}/", base.path());
        base.set_path(&with_slash);
    }
    base.set_query(None);
    base.join(path)
        .map_err(|e| ToolError::InvalidConfiguration(format!("search backend URL `{base}`: {e}")))
}

fn secret(value: &str) -> Result<HeaderValue, ToolError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| {
        ToolError::InvalidConfiguration("the search API key is not a valid header value".into())
    })?;
    header.set_sensitive(true);
    Ok(header)
}

/// Strips tags and collapses whitespace; at most [`MAX_SNIPPET_CHARS`] characters.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_SNIPPET_CHARS * 4));
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_SNIPPET_CHARS)
        .collect()
}

#[derive(Deserialize)]
struct RawHit {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    /// SearXNG and Tavily.
    #[serde(default)]
    content: Option<String>,
    /// Brave.
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
struct ResultsAnswer {
    #[serde(default)]
    results: Vec<RawHit>,
}

#[derive(Deserialize, Default)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<RawHit>,
}

#[derive(Deserialize)]
struct BraveAnswer {
    #[serde(default)]
    web: BraveWeb,
}

struct Hit {
    title: String,
    url: String,
    snippet: String,
}

/// Searches the web through one configured backend.
#[derive(Debug, Clone)]
pub struct WebSearch {
    client: SafeClient,
    backend: SearchBackend,
}

impl WebSearch {
    /// A search tool over a guarded client and a backend.
    pub fn new(client: SafeClient, backend: SearchBackend) -> Self {
        Self { client, backend }
    }

    async fn run(&self, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let args = Args::new(args)?;
        let query = args.str("query")?.trim();
        if query.is_empty() {
            return Err(crate::builtins::common::invalid(
                "/query",
                "must not be empty",
            ));
        }
        crate::builtins::common::cap_len("query", query.len(), MAX_QUERY_BYTES)?;
        let count = args
            .opt_int("max_results", 1, MAX_RESULTS as i64)?
            .map_or(DEFAULT_RESULTS, |n| n as usize);

        let request = self.backend.request(query, count)?;
        let response = self
            .client
            .send(request, Oversize::Fail, ctx.deadline)
            .await?;
        if !response.status.is_success() {
            return Err(ToolError::Failed(format!(
                "the {} backend answered HTTP {}",
                self.backend.kind(),
                response.status
            )));
        }
        let hits = self.backend.parse(&response.body)?;
        let results: Vec<Value> = hits
            .into_iter()
            .take(count)
            .map(|hit| json!({"title": hit.title, "url": hit.url, "snippet": hit.snippet}))
            .collect();
        bounded(
            json!({
                "backend": self.backend.kind(),
                "query": query,
                "results": results,
            }),
            ctx,
        )
    }
}

impl Tool for WebSearch {
    fn name(&self) -> &str {
        "web_search"
    }

    fn description(&self) -> &str {
        "Searches the web and returns a list of results (title, url, snippet). Use web_fetch to read a result."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_BYTES,
                    "description": "What to search for.",
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "description": "How many results to return (default 5, at most 20).",
                },
            },
            "required": ["query"],
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &["web", "search", "lookup", "internet"]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            self.run(&args, ctx).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_keep_the_base_path() {
        let base = Url::parse("https://h.example/searx").unwrap();
        assert_eq!(
            endpoint(&base, "search").unwrap().as_str(),
            "https://h.example/searx/search"
        );
        let base = Url::parse("https://api.search.brave.com").unwrap();
        assert_eq!(
            endpoint(&base, "res/v1/web/search").unwrap().as_str(),
            "https://api.search.brave.com/res/v1/web/search"
        );
    }

    #[test]
    fn snippets_lose_markup_and_keys_stay_out_of_debug() {
        assert_eq!(clean("a <strong>b</strong>\n  c"), "a b c");
        assert_eq!(clean(&"x".repeat(1000)).len(), MAX_SNIPPET_CHARS);
        let backend = SearchBackend::brave("secret-key").unwrap();
        assert!(!format!("{backend:?}").contains("secret-key"));
    }
}
