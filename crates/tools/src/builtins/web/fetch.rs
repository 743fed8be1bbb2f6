//! The `web_fetch` tool: fetches one URL through the [`SafeClient`] and returns its text, with
//! HTML turned into Markdown (htmd).
//!
//! Limits: the URL is at most [`MAX_URL_BYTES`]; the body is cut at the policy's
//! `max_response_bytes` (the result says `truncated`); only the content types in
//! [`WebFetch::allowed_content_types`] are read, anything else (images, archives, binaries) is
//! refused; the returned text is at most `max_chars` characters (default
//! [`DEFAULT_MAX_CHARS`], at most [`MAX_CHARS`]). HTML is parsed and converted off the async
//! runtime, on a thread with a large stack, and the DOM is cut at [`MAX_HTML_DEPTH`] levels
//! first, because the converter recurses once per level and a hostile page can nest without end.
//! Bodies are decoded as UTF-8 (invalid sequences replaced); other charsets are not converted.

use std::rc::Rc;

use htmd::{HtmlToMarkdown, Node};
use markup5ever_rcdom::NodeData;
use serde_json::{Value, json};
use url::Url;

use super::client::{Oversize, SafeClient, SafeRequest};
use super::ssrf::{Reason, Refusal};
use crate::builtins::common::{Args, bounded, check_live, invalid, run_on_thread};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// The longest URL accepted.
pub const MAX_URL_BYTES: usize = 2048;
/// The most characters of text returned.
pub const MAX_CHARS: usize = 200_000;
/// The characters returned when the call does not say.
pub const DEFAULT_MAX_CHARS: usize = 50_000;
/// The deepest the DOM is walked; deeper content is dropped (and the result says so).
pub const MAX_HTML_DEPTH: usize = 256;
/// The stack of the conversion thread (reserved address space, not committed memory).
const CONVERT_STACK_BYTES: usize = 64 * 1024 * 1024;

/// The content types read by default.
pub const DEFAULT_CONTENT_TYPES: &[&str] = &[
    "text/html",
    "application/xhtml+xml",
    "text/plain",
    "text/markdown",
    "text/csv",
    "text/xml",
    "application/xml",
    "application/json",
    "application/ld+json",
    "application/rss+xml",
    "application/atom+xml",
];

/// Elements whose content is never text a reader wants.
const SKIPPED_TAGS: &[&str] = &[
    "head", "script", "style", "noscript", "template", "iframe", "object", "embed", "svg",
    "canvas", "form",
];

/// Fetches a web page as text.
#[derive(Debug, Clone)]
pub struct WebFetch {
    client: SafeClient,
    /// Media types (lowercase, without parameters) whose bodies are read.
    pub allowed_content_types: Vec<String>,
}

impl WebFetch {
    /// A fetch tool over a guarded client, reading [`DEFAULT_CONTENT_TYPES`].
    pub fn new(client: SafeClient) -> Self {
        Self {
            client,
            allowed_content_types: DEFAULT_CONTENT_TYPES
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        }
    }

    async fn run(&self, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let args = Args::new(args)?;
        let raw_url = args.str("url")?;
        if raw_url.len() > MAX_URL_BYTES {
            return Err(ToolError::LimitExceeded(format!(
                "the URL is {} bytes; the limit is {MAX_URL_BYTES}",
                raw_url.len()
            )));
        }
        let markdown = match args.opt_str("format")? {
            None | Some("markdown") => true,
            Some("raw") => false,
            Some(other) => return Err(invalid("/format", format!("unknown format `{other}`"))),
        };
        let max_chars = args
            .opt_int("max_chars", 1, MAX_CHARS as i64)?
            .map_or(DEFAULT_MAX_CHARS, |n| n as usize);
        let url = Url::parse(raw_url).map_err(|e| {
            ToolError::Refused(
                Refusal::new(Reason::InvalidUrl, format!("`{raw_url}`: {e}")).to_string(),
            )
        })?;

        let response = self
            .client
            .send(SafeRequest::get(url), Oversize::Truncate, ctx.deadline)
            .await?;
        if !response.status.is_success() {
            return Err(ToolError::Failed(format!(
                "{} answered HTTP {}",
                response.url, response.status
            )));
        }
        let media_type = response
            .content_type
            .as_deref()
            .map(media_type)
            .unwrap_or_default();
        if !self.allowed_content_types.contains(&media_type) {
            let shown = if media_type.is_empty() {
                "no content type".to_owned()
            } else {
                format!("content type `{media_type}`")
            };
            return Err(ToolError::Refused(
                Refusal::new(
                    Reason::ContentType,
                    format!("{} has {shown}, which is not read", response.url),
                )
                .to_string(),
            ));
        }

        let body = String::from_utf8_lossy(&response.body).into_owned();
        let is_html = media_type == "text/html" || media_type == "application/xhtml+xml";
        let (text, title, pruned) = if markdown && is_html {
            run_on_thread(ctx, "web-fetch-html", CONVERT_STACK_BYTES, move |_stop| {
                html_to_markdown(&body)
            })
            .await?
        } else {
            (body, None, false)
        };
        let (content, cut) = truncate_chars(text, max_chars);
        bounded(
            json!({
                "url": response.url.as_str(),
                "status": response.status.as_u16(),
                "content_type": media_type,
                "title": title,
                "content": content,
                "truncated": cut || response.truncated || pruned,
                "bytes": response.body.len(),
                "redirects": response.redirects.iter().map(Url::as_str).collect::<Vec<_>>(),
            }),
            ctx,
        )
    }
}

/// `Text/HTML; charset=utf-8` → `text/html`.
fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Keeps the first `max` characters.
fn truncate_chars(mut text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => {
            text.truncate(at);
            (text, true)
        }
        None => (text, false),
    }
}

/// Converts HTML to Markdown; also returns the page title and whether the DOM was cut.
pub fn html_to_markdown(html: &str) -> Result<(String, Option<String>, bool), ToolError> {
    let converter = HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    let tree = converter
        .html_to_tree(html)
        .map_err(|e| ToolError::Failed(format!("the HTML could not be parsed: {e}")))?;
    let (title, pruned) = prune_and_find_title(&tree, MAX_HTML_DEPTH);
    let markdown = converter.tree_to_markdown(&tree);
    Ok((markdown, title, pruned))
}

/// Walks the DOM without recursion: drops the children of nodes at `max_depth` and picks up the
/// first `<title>`.
fn prune_and_find_title(root: &Rc<Node>, max_depth: usize) -> (Option<String>, bool) {
    let mut title = None;
    let mut pruned = false;
    let mut stack = vec![(Rc::clone(root), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        if let NodeData::Element { name, .. } = &node.data
            && title.is_none()
            && &*name.local == "title"
        {
            let text: String = node
                .children
                .borrow()
                .iter()
                .filter_map(|child| match &child.data {
                    NodeData::Text { contents } => Some(contents.borrow().to_string()),
                    _ => None,
                })
                .collect();
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if !text.is_empty() {
                title = Some(text);
            }
        }
        if depth >= max_depth {
            let mut children = node.children.borrow_mut();
            if !children.is_empty() {
                pruned = true;
                children.clear();
            }
            continue;
        }
        for child in node.children.borrow().iter() {
            stack.push((Rc::clone(child), depth + 1));
        }
    }
    (title, pruned)
}

impl Tool for WebFetch {
    fn name(&self) -> &str {
        "web_fetch"
    }

    fn description(&self) -> &str {
        "Fetches one http(s) web page and returns its text; HTML is converted to Markdown. Private, loopback and other internal addresses are refused, redirects are re-checked, and only text content types are read."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_URL_BYTES,
                    "description": "The http or https URL to fetch.",
                },
                "format": {
                    "type": "string",
                    "enum": ["markdown", "raw"],
                    "description": "markdown (default) converts HTML to Markdown; raw returns the body text as served.",
                },
                "max_chars": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_CHARS,
                    "description": "The most characters of text to return (default 50000).",
                },
            },
            "required": ["url"],
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &["web", "fetch", "http", "url", "browse", "download"]
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
    fn html_becomes_markdown_with_a_title() {
        let (md, title, pruned) = html_to_markdown(
            "<html><head><title> A  page </title><script>alert(1)</script></head>\
             <body><h1>Hello</h1><p>Some <b>bold</b> text.</p><script>x()</script></body></html>",
        )
        .unwrap();
        assert_eq!(title.as_deref(), Some("A page"));
        assert!(md.contains("# Hello"), "{md}");
        assert!(md.contains("**bold**"), "{md}");
        assert!(!md.contains("alert") && !md.contains("x()"), "{md}");
        assert!(!pruned);
    }

    #[test]
    fn very_deep_html_is_cut_not_overflowed() {
        let depth = 3_000;
        let html = format!(
            "<p>top</p>{}deep{}",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        let (md, _, pruned) = html_to_markdown(&html).unwrap();
        assert!(pruned);
        assert!(md.contains("top"));
        assert!(!md.contains("deep"));
    }

    #[test]
    fn media_types_and_truncation() {
        assert_eq!(media_type("Text/HTML; charset=utf-8"), "text/html");
        assert_eq!(media_type(""), "");
        assert_eq!(truncate_chars("héllo".into(), 2), ("hé".into(), true));
        assert_eq!(truncate_chars("hé".into(), 2), ("hé".into(), false));
    }
}
