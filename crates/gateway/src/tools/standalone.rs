//! Codex's standalone search (`POST /v1/alpha/search`) answered by the gateway's own web tools:
//! each `search_query` through the configured search backend (`web_search`), each `open` and
//! `find` through `web_fetch` — both in the tool library's registry, so every request goes
//! through the SSRF-safe client with its size and time caps. The answer is one text for the
//! model, with each result's URL as the reference a later `open` or `find` takes.
//!
//! Bounded: at most [`MAX_OPERATIONS`] operations per request, each under the tool timeout,
//! and the text cut at `max_output_tokens` (about four bytes a token) and at the loop's output
//! limit. An operation that fails is a line in the text, not a failed request; commands the
//! gateway cannot serve (`image_query`, `click`, `finance`, …) are named in it too.
//!
//! Not here: the route, key scopes and errors (`http/search`).

use serde_json::{Value, json};
use toolbridge_tools::ToolContext;
use toolbridge_wire::search::{FindOperation, OpenOperation, SearchQuery, SearchRequest};

use super::GatewayTools;

/// The most operations (queries, opens and finds together) one request runs.
pub(crate) const MAX_OPERATIONS: usize = 8;
/// The most lines a `find` reports.
const MAX_FIND_LINES: usize = 20;
/// The bytes of text per output token assumed when cutting at `max_output_tokens`.
const BYTES_PER_TOKEN: u64 = 4;

/// Why a standalone search was refused before it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No search backend is configured.
    NoBackend,
    /// The request has no operation the gateway serves (`param`: the first command named).
    NothingToRun { param: String },
    /// More operations than [`MAX_OPERATIONS`].
    TooMany { count: usize },
}

impl GatewayTools {
    /// Whether a search backend is configured.
    pub fn has_search(&self) -> bool {
        self.search.is_some()
    }

    /// Runs a standalone search request: the text answer, or why it was refused.
    pub(crate) async fn standalone_search(
        &self,
        request: &SearchRequest,
    ) -> Result<String, Refusal> {
        if self.search.is_none() {
            return Err(Refusal::NoBackend);
        }
        let commands = request.commands.clone().unwrap_or_default();
        let queries = commands.search_query.unwrap_or_default();
        let opens = commands.open.unwrap_or_default();
        let finds = commands.find.unwrap_or_default();
        let count = queries.len() + opens.len() + finds.len();
        let unserved: Vec<&String> = commands
            .extra
            .iter()
            .filter(|(name, value)| *name != "response_length" && !value.is_null())
            .map(|(name, _)| name)
            .collect();
        if count == 0 {
            let param = unserved
                .first()
                .map_or_else(|| "commands".to_owned(), |n| format!("commands.{n}"));
            return Err(Refusal::NothingToRun { param });
        }
        if count > MAX_OPERATIONS {
            return Err(Refusal::TooMany { count });
        }
        let mut sections = Vec::new();
        for query in &queries {
            sections.push(self.search_section(query).await);
        }
        for open in &opens {
            sections.push(self.open_section(open).await);
        }
        for find in &finds {
            sections.push(self.find_section(find).await);
        }
        for name in unserved {
            sections.push(format!(
                "# {name}\nThis gateway does not serve `{name}`; use search_query, open or find."
            ));
        }
        let limit = request
            .max_output_tokens
            .map_or(usize::MAX, |t| {
                usize::try_from(t.saturating_mul(BYTES_PER_TOKEN)).unwrap_or(usize::MAX)
            })
            .min(self.limits.max_output_bytes);
        Ok(cut(sections.join("\n\n"), limit))
    }

    /// One built-in's JSON output, or its error as a line.
    async fn builtin(&self, name: &str, args: Value) -> Result<Value, String> {
        let ctx = ToolContext::with_timeout(self.limits.tool_timeout, self.limits.max_output_bytes);
        self.registry
            .execute(name, args, &ctx)
            .await
            .map_err(|e| format!("failed ({}): {e}", e.code()))
    }

    async fn search_section(&self, query: &SearchQuery) -> String {
        let mut q = query.q.trim().to_owned();
        // A backend filters by domain through the query itself.
        if let Some([domain]) = query.domains.as_deref() {
            q.push_str(&format!(" site:{domain}"));
        }
        let mut out = format!("# search_query: {}\n", query.q.trim());
        match self.builtin("web_search", json!({"query": q})).await {
            Ok(found) => {
                let results = found["results"].as_array().cloned().unwrap_or_default();
                if results.is_empty() {
                    out.push_str("No results.");
                }
                for (i, hit) in results.iter().enumerate() {
                    out.push_str(&format!(
                        "{}. {}\n   ref_id: {}\n   {}\n",
                        i + 1,
                        hit["title"].as_str().unwrap_or_default(),
                        hit["url"].as_str().unwrap_or_default(),
                        hit["snippet"].as_str().unwrap_or_default(),
                    ));
                }
            }
            Err(e) => out.push_str(&format!("The search {e}")),
        }
        out.trim_end().to_owned()
    }

    async fn page(&self, ref_id: &str) -> Result<(String, String), String> {
        let url = url::Url::parse(ref_id)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                "is not a URL; open takes the ref_id (the URL) of a search result".to_owned()
            })?;
        let page = self
            .builtin("web_fetch", json!({"url": url.as_str()}))
            .await?;
        Ok((
            page["title"].as_str().unwrap_or_default().to_owned(),
            page["content"].as_str().unwrap_or_default().to_owned(),
        ))
    }

    async fn open_section(&self, open: &OpenOperation) -> String {
        let mut out = format!("# open: {}\n", open.ref_id);
        match self.page(&open.ref_id).await {
            Ok((title, content)) => {
                if !title.is_empty() {
                    out.push_str(&format!("Title: {title}\n"));
                }
                let skip = open.lineno.map_or(0, |n| n.saturating_sub(1) as usize);
                for (n, line) in content.lines().enumerate().skip(skip) {
                    out.push_str(&format!("L{}: {line}\n", n + 1));
                }
            }
            Err(e) => out.push_str(&format!("`{}` {e}", open.ref_id)),
        }
        out.trim_end().to_owned()
    }

    async fn find_section(&self, find: &FindOperation) -> String {
        let mut out = format!("# find: `{}` in {}\n", find.pattern, find.ref_id);
        match self.page(&find.ref_id).await {
            Ok((_, content)) => {
                let needle = find.pattern.to_lowercase();
                let found: Vec<String> = content
                    .lines()
                    .enumerate()
                    .filter(|(_, line)| line.to_lowercase().contains(&needle))
                    .take(MAX_FIND_LINES)
                    .map(|(n, line)| format!("L{}: {line}", n + 1))
                    .collect();
                if found.is_empty() {
                    out.push_str("Not found.");
                } else {
                    out.push_str(&found.join("\n"));
                }
            }
            Err(e) => out.push_str(&format!("`{}` {e}", find.ref_id)),
        }
        out.trim_end().to_owned()
    }
}

/// `text` cut to at most `limit` bytes at a character boundary, saying so.
fn cut(mut text: String, limit: usize) -> String {
    const MARK: &str = "\n[cut: the output limit was reached]";
    if text.len() <= limit {
        return text;
    }
    let mut end = limit.saturating_sub(MARK.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(MARK);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_ends_at_a_character_boundary_and_says_so() {
        let text = "é".repeat(100);
        let out = cut(text.clone(), 60);
        assert!(out.len() <= 60, "{}", out.len());
        assert!(out.ends_with("reached]"));
        assert_eq!(cut(text.clone(), 1000), text);
    }
}
