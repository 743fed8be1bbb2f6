//! The hosted tools' decisions (`web_search`, `file_search`, `mcp`): native in the profile's
//! form when the provider runs them, else ignored or rejected by the profile's policy.
//!
//! Not here: a hosted tool the gateway serves itself (`candidates::served_by_gateway`).

use serde_json::{Map, Value};
use toolbridge_wire::responses::Diagnostic;

use super::candidates::{Candidate, ignored, native, unsupported};
use super::{
    NativeFileSearch, NativeMcp, NativeMcpServer, NativeSearch, NativeTool, NativeWebSearch,
    ToolCapabilities, UpstreamTool, reasons,
};
use crate::Error;
use crate::diagnostics::{TOOL_IGNORED, diag};

pub(super) fn web_search(
    param: &str,
    map: &Map<String, Value>,
    caps: &ToolCapabilities,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    let kind = map
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("web_search");
    // Codex declares web search with `external_web_access: false` when its sandbox forbids the
    // network: the client has said no, whatever the provider could do.
    if map.get("external_web_access") == Some(&Value::Bool(false)) {
        diagnostics.push(diag(
            TOOL_IGNORED,
            Some(param),
            "web_search was declared with external_web_access: false; it was left out",
        ));
        return Ok(ignored(param, kind, reasons::WEB_ACCESS_DISABLED));
    }
    let search = |form: NativeWebSearch| {
        let allowed_domains = map
            .get("filters")
            .and_then(|f| f.get("allowed_domains"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let user_location = map.get("user_location").filter(|l| l.is_object()).cloned();
        Some(UpstreamTool::Native(NativeTool::WebSearch(NativeSearch {
            form,
            allowed_domains,
            user_location,
        })))
    };
    match caps.web_search {
        Some(NativeWebSearch::QwenFlag) => {
            flags.insert("enable_search".to_owned(), Value::Bool(true));
            Ok(native(param, kind, reasons::NATIVE_WEB_SEARCH, None))
        }
        Some(
            form @ (NativeWebSearch::GlmTool
            | NativeWebSearch::KimiBuiltin
            | NativeWebSearch::AnthropicServerTool
            | NativeWebSearch::GeminiGoogleSearch),
        ) => Ok(native(
            param,
            kind,
            reasons::NATIVE_WEB_SEARCH,
            search(form),
        )),
        None => unsupported(param, kind, caps, diagnostics),
    }
}

pub(super) fn file_search(
    param: &str,
    map: &Map<String, Value>,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    let Some(form @ NativeFileSearch::GlmRetrieval) = caps.file_search else {
        return unsupported(param, "file_search", caps, diagnostics).map(|c| vec![c]);
    };
    let ids: Vec<&str> = map
        .get("vector_store_ids")
        .and_then(Value::as_array)
        .map(|ids| ids.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        diagnostics.push(diag(
            TOOL_IGNORED,
            Some(param),
            "file_search has no vector_store_ids to map to knowledge bases; it was left out",
        ));
        return Ok(vec![ignored(
            param,
            "file_search",
            reasons::NO_VECTOR_STORE,
        )]);
    }
    Ok(ids
        .into_iter()
        .map(|id| {
            native(
                param,
                "file_search",
                reasons::NATIVE_FILE_SEARCH,
                Some(UpstreamTool::Native(NativeTool::Retrieval {
                    form,
                    knowledge_id: id.to_owned(),
                })),
            )
        })
        .collect())
}

pub(super) fn mcp(
    param: &str,
    map: &Map<String, Value>,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    let Some(form @ NativeMcp::GlmMcp) = caps.mcp else {
        return unsupported(param, "mcp", caps, diagnostics);
    };
    let Some(url) = map.get("server_url").and_then(Value::as_str) else {
        // A connector (`connector_id`) has no equivalent upstream.
        return unsupported(param, "mcp", caps, diagnostics);
    };
    Ok(native(
        param,
        "mcp",
        reasons::NATIVE_MCP,
        Some(UpstreamTool::Native(NativeTool::Mcp(NativeMcpServer {
            form,
            server_label: map.get("server_label").cloned(),
            server_url: url.to_owned(),
            allowed_tools: map.get("allowed_tools").cloned(),
            headers: map.get("headers").cloned(),
        }))),
    ))
}
