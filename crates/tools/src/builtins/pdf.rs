//! The `pdf` tool: text extraction per page, and page counts, from a file in the sandbox or from
//! base64 bytes, with pdf-extract.
//!
//! pdf-extract panics on malformed input by design, so every call runs on the blocking pool
//! inside `catch_unwind` and under the call's deadline (`common::run_blocking`): a panic becomes
//! an error. A panic is not the only way a parser can take a process down, so the document is
//! also checked for what would crash or exhaust it before pdf-extract sees it:
//!
//! - **Decompression bombs.** lopdf inflates streams without a limit. Every stream is measured
//!   while the document loads (a lopdf load filter) with capped decoders that mirror lopdf's
//!   (Flate, LZW, ASCII85); a stream past [`MAX_STREAM_BYTES`], or a document past
//!   [`MAX_DECODED_BYTES`] in total, has its content emptied before anything inflates it, and
//!   the call fails with `limit_exceeded`.
//! - **Unbounded recursion** (a stack overflow aborts the process; it is not a panic):
//!   pdf-extract follows a page's `/Parent` chain for inherited attributes and recurses into form
//!   XObjects through `Do`. Both are walked here first, without recursion: a cyclic or over-long
//!   parent chain, or form nesting deeper than [`MAX_FORM_DEPTH`] (or more than
//!   [`MAX_FORM_CALLS`] form invocations on a page), refuses the page.
//! - **Encrypted documents** are refused up front (lopdf decrypts them without the load filter).
//!
//! Work that pdf-extract cannot be interrupted in continues on its thread after a timeout; at most
//! [`MAX_CONCURRENT`] extractions run at once (the permit stays with the thread), so runaway
//! documents cannot take the whole blocking pool. Input is capped at [`MAX_PDF_BYTES`], a call
//! returns at most [`MAX_PAGES`] pages and each page at most [`MAX_PAGE_CHARS`] characters.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use pdf_extract::{Dictionary, Document, Object, ObjectId, PlainTextOutput, Stream};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::common::{Args, bounded, check_live, invalid, operation_schema, run_blocking};
use super::files::{Sandbox, check_path, open_regular};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

mod guard;

use guard::load_guarded;

/// The most bytes of a PDF.
pub const MAX_PDF_BYTES: usize = 8 * 1024 * 1024;
/// The most pages one call extracts.
pub const MAX_PAGES: usize = 100;
/// The pages extracted when the call does not say.
pub const DEFAULT_PAGES: usize = 20;
/// The most characters returned for one page.
pub const MAX_PAGE_CHARS: usize = 100_000;
/// The most bytes one stream may decode to.
pub const MAX_STREAM_BYTES: usize = 32 * 1024 * 1024;
/// The most bytes all streams of a document may decode to together.
pub const MAX_DECODED_BYTES: usize = 256 * 1024 * 1024;
/// The deepest form XObjects may nest.
pub const MAX_FORM_DEPTH: usize = 16;
/// The most form XObject invocations on one page.
pub const MAX_FORM_CALLS: usize = 1000;
/// The longest `/Parent` chain from a page to the root of the page tree.
pub const MAX_PARENT_CHAIN: usize = 64;
/// The most extractions running at once.
pub const MAX_CONCURRENT: usize = 2;
/// base64 text for [`MAX_PDF_BYTES`] bytes, plus room for line breaks.
const MAX_BASE64_CHARS: usize = MAX_PDF_BYTES / 3 * 4 + 4096;

const OPERATIONS: &[&str] = &["extract_text", "page_count"];

/// Extracts text from PDFs.
#[derive(Debug, Clone)]
pub struct Pdf {
    sandbox: Sandbox,
    permits: Arc<Semaphore>,
}

impl Default for Pdf {
    fn default() -> Self {
        Self::new(Sandbox::none())
    }
}

impl Pdf {
    /// A PDF tool that reads files from `sandbox` (and base64 bytes either way).
    pub fn new(sandbox: Sandbox) -> Self {
        Self {
            sandbox,
            permits: Arc::new(Semaphore::new(MAX_CONCURRENT)),
        }
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let view = Args::new(&args)?;
        let op = view.opt_str("operation")?.unwrap_or("extract_text");
        if !OPERATIONS.contains(&op) {
            return Err(invalid("/operation", format!("unknown operation `{op}`")));
        }
        let first = view
            .opt_int("first_page", 1, i64::from(u32::MAX))?
            .unwrap_or(1) as u32;
        let count = view
            .opt_int("max_pages", 1, MAX_PAGES as i64)?
            .map_or(DEFAULT_PAGES, |n| n as usize);
        let source = match (view.opt_str("path")?, view.opt_str("data")?) {
            (Some(path), None) => Source::File(check_path(path)?),
            (None, Some(data)) => {
                if data.len() > MAX_BASE64_CHARS {
                    return Err(ToolError::LimitExceeded(format!(
                        "the PDF is larger than {MAX_PDF_BYTES} bytes"
                    )));
                }
                Source::Base64(data.to_owned())
            }
            (Some(_), Some(_)) => {
                return Err(invalid("/data", "give either `path` or `data`, not both"));
            }
            (None, None) => {
                return Err(invalid(
                    "/path",
                    "give `path` (a sandbox file) or `data` (base64)",
                ));
            }
        };
        let dir = match source {
            Source::File(_) => Some(self.sandbox.dir()?),
            Source::Base64(_) => None,
        };
        let permit =
            tokio::time::timeout_at(ctx.deadline, Arc::clone(&self.permits).acquire_owned())
                .await
                .map_err(|_elapsed| ToolError::Timeout)?
                .map_err(|_closed| ToolError::Failed("the PDF tool is shutting down".into()))?;
        let page_count_only = op == "page_count";
        let output = run_blocking(ctx, move |stop| {
            // Held by the worker: released when the work really ends, not when the caller gives up.
            let _permit = permit;
            let bytes = match (&source, dir) {
                (Source::File(path), Some(dir)) => read_pdf_file(&dir, path)?,
                (Source::Base64(data), _) => decode_base64(data)?,
                (Source::File(_), None) => {
                    return Err(ToolError::Failed("no sandbox for a file path".into()));
                }
            };
            extract(&bytes, first, count, page_count_only, || stop.is_raised())
        })
        .await?;
        bounded(output, ctx)
    }
}

enum Source {
    File(std::path::PathBuf),
    Base64(String),
}

fn read_pdf_file(dir: &cap_std::fs::Dir, path: &Path) -> Result<Vec<u8>, ToolError> {
    let (file, size) = open_regular(dir, path)?;
    if size > MAX_PDF_BYTES as u64 {
        return Err(ToolError::LimitExceeded(format!(
            "`{}` is {size} bytes; the limit is {MAX_PDF_BYTES}",
            path.display()
        )));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(MAX_PDF_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::Failed(format!("`{}`: {e}", path.display())))?;
    if bytes.len() > MAX_PDF_BYTES {
        return Err(ToolError::LimitExceeded(format!(
            "`{}` is larger than {MAX_PDF_BYTES} bytes",
            path.display()
        )));
    }
    Ok(bytes)
}

fn decode_base64(data: &str) -> Result<Vec<u8>, ToolError> {
    let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let bytes = BASE64
        .decode(compact)
        .map_err(|e| invalid("/data", format!("is not valid base64: {e}")))?;
    if bytes.len() > MAX_PDF_BYTES {
        return Err(ToolError::LimitExceeded(format!(
            "the PDF is {} bytes; the limit is {MAX_PDF_BYTES}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

fn malformed(detail: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(format!("not a readable PDF: {detail}"))
}

/// Loads, checks and extracts; runs on a blocking thread.
fn extract(
    bytes: &[u8],
    first: u32,
    count: usize,
    page_count_only: bool,
    stopped: impl Fn() -> bool,
) -> Result<Value, ToolError> {
    if !bytes[..bytes.len().min(1024)]
        .windows(5)
        .any(|w| w == b"%PDF-")
    {
        return Err(malformed("there is no %PDF- header"));
    }
    if bytes.windows(8).any(|w| w == b"/Encrypt") {
        return Err(ToolError::Failed("encrypted PDFs are not supported".into()));
    }
    let doc = load_guarded(bytes)?;
    let pages = doc.get_pages();
    let page_count = pages.len();
    if page_count_only {
        return Ok(json!({"page_count": page_count}));
    }
    if page_count == 0 {
        return Err(malformed("the document has no pages"));
    }
    if first as usize > page_count {
        return Err(invalid(
            "/first_page",
            format!("the document has {page_count} pages"),
        ));
    }
    let mut out = Vec::new();
    for (&number, &page_id) in pages.range(first..).take(count) {
        if stopped() {
            return Err(ToolError::Timeout);
        }
        check_page(&doc, page_id)?;
        let mut text = String::new();
        {
            let mut output = PlainTextOutput::new(&mut text);
            pdf_extract::output_doc_page(&doc, &mut output, number)
                .map_err(|e| malformed(format!("page {number}: {e}")))?;
        }
        let text = text.trim().to_owned();
        let cut = text.chars().count() > MAX_PAGE_CHARS;
        let text: String = if cut {
            text.chars().take(MAX_PAGE_CHARS).collect()
        } else {
            text
        };
        out.push(json!({"page": number, "text": text, "truncated": cut}));
    }
    let last = first as usize + out.len() - 1;
    Ok(json!({
        "page_count": page_count,
        "first_page": first,
        "pages": out,
        "more_pages": last < page_count,
    }))
}

/// Refuses a page whose parent chain or form nesting would make pdf-extract recurse without
/// bound.
fn check_page(doc: &Document, page_id: ObjectId) -> Result<(), ToolError> {
    let refuse = |why: String| ToolError::Failed(format!("not a readable PDF: {why}"));
    let page = doc
        .get_dictionary(page_id)
        .map_err(|e| refuse(format!("page object {page_id:?}: {e}")))?;

    // The parent chain, as pdf-extract's inheritance lookup follows it.
    let mut seen = HashSet::from([page_id]);
    let mut dict = page;
    let mut resources = dict.get(b"Resources").ok().and_then(|o| deref_dict(doc, o));
    while let Ok(Object::Reference(parent)) = dict.get(b"Parent") {
        if !seen.insert(*parent) || seen.len() > MAX_PARENT_CHAIN {
            return Err(refuse("the page tree has a cycle or is too deep".into()));
        }
        match doc.get_dictionary(*parent) {
            Ok(next) => dict = next,
            Err(_) => break,
        }
        if resources.is_none() {
            resources = dict.get(b"Resources").ok().and_then(|o| deref_dict(doc, o));
        }
    }

    // Form XObjects reached through `Do`, simulated with an explicit stack.
    let Some(resources) = resources else {
        return Ok(());
    };
    let Ok(content) = doc.get_page_content(page_id) else {
        return Ok(());
    };
    let mut stack: Vec<(Vec<u8>, &Dictionary, usize)> = vec![(content, resources, 0)];
    let mut calls = 0usize;
    while let Some((content, resources, depth)) = stack.pop() {
        let Ok(ops) = pdf_extract::content::Content::decode(&content) else {
            continue;
        };
        let xobjects = resources
            .get(b"XObject")
            .ok()
            .and_then(|o| deref_dict(doc, o));
        for op in ops.operations.iter().filter(|op| op.operator == "Do") {
            let Some(name) = op.operands.first().and_then(|o| o.as_name().ok()) else {
                continue;
            };
            let Some(stream) = xobjects
                .and_then(|x| x.get(name).ok())
                .and_then(|o| deref_stream(doc, o))
            else {
                continue;
            };
            calls += 1;
            if depth + 1 > MAX_FORM_DEPTH || calls > MAX_FORM_CALLS {
                return Err(refuse(format!(
                    "form XObjects nest deeper than {MAX_FORM_DEPTH} or are invoked more than {MAX_FORM_CALLS} times on a page"
                )));
            }
            let inner = stream
                .dict
                .get(b"Resources")
                .ok()
                .and_then(|o| deref_dict(doc, o))
                .unwrap_or(resources);
            let body = stream
                .decompressed_content()
                .unwrap_or_else(|_| stream.content.clone());
            stack.push((body, inner, depth + 1));
        }
    }
    Ok(())
}

fn deref_dict<'a>(doc: &'a Document, object: &'a Object) -> Option<&'a Dictionary> {
    match object {
        Object::Reference(id) => doc.get_object(*id).ok()?.as_dict().ok(),
        other => other.as_dict().ok(),
    }
}

fn deref_stream<'a>(doc: &'a Document, object: &'a Object) -> Option<&'a Stream> {
    match object {
        Object::Reference(id) => doc.get_object(*id).ok()?.as_stream().ok(),
        other => other.as_stream().ok(),
    }
}

impl Tool for Pdf {
    fn name(&self) -> &str {
        "pdf"
    }

    fn description(&self) -> &str {
        "Extracts the text of a PDF page by page, or counts its pages. The PDF is a file in the sandbox (`path`) or base64 bytes (`data`), at most 8 MiB."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "operation": operation_schema(OPERATIONS, "extract_text (default) or page_count."),
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": super::files::MAX_PATH_BYTES,
                    "description": "A PDF file in the sandbox, relative to it. Give this or `data`.",
                },
                "data": {
                    "type": "string",
                    "maxLength": MAX_BASE64_CHARS,
                    "description": "The PDF's bytes in base64. Give this or `path`.",
                },
                "first_page": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "The first page to extract, from 1 (default 1).",
                },
                "max_pages": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_PAGES,
                    "description": "How many pages to extract (default 20, at most 100).",
                },
            },
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &["pdf", "document", "extract", "text"]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            self.run(args, ctx).await
        })
    }
}
