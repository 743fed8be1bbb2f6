//! The native tools of Chat Completions providers, rendered from the planner's neutral
//! decisions: GLM's `web_search`, `retrieval` and `mcp` tools and Kimi's builtin `$web_search`.

use serde_json::{Map, Value, json};
use toolbridge_core::plan::{KIMI_WEB_SEARCH, NativeMcpServer, NativeSearch};

/// Zhipu GLM: `{"type":"web_search","web_search":{…}}`, limited to the first allowed domain (GLM
/// takes one).
pub(crate) fn glm_web_search(search: &NativeSearch) -> Value {
    let mut options = json!({"enable": true, "search_result": true});
    if let (Some(domain), Some(obj)) = (search.allowed_domains.first(), options.as_object_mut()) {
        obj.insert("search_domain_filter".to_owned(), domain.clone());
    }
    json!({"type": "web_search", "web_search": options})
}

/// Moonshot Kimi: the builtin `$web_search` function, whose calls the gateway echoes back.
pub(crate) fn kimi_web_search() -> Value {
    json!({"type": "builtin_function", "function": {"name": KIMI_WEB_SEARCH}})
}

/// Zhipu GLM: `{"type":"retrieval","retrieval":{"knowledge_id":…}}`, one per knowledge base.
pub(crate) fn glm_retrieval(knowledge_id: &str) -> Value {
    json!({"type": "retrieval", "retrieval": {"knowledge_id": knowledge_id}})
}

/// Zhipu GLM: `{"type":"mcp","mcp":{server_label, server_url, transport_type, …}}`; the
/// transport is SSE for a URL ending in `/sse`, else streamable HTTP.
pub(crate) fn glm_mcp(server: &NativeMcpServer) -> Value {
    let mut mcp = Map::new();
    if let Some(label) = &server.server_label {
        mcp.insert("server_label".to_owned(), label.clone());
    }
    let url = &server.server_url;
    mcp.insert("server_url".to_owned(), Value::String(url.clone()));
    let transport = if url.ends_with("/sse") {
        "sse"
    } else {
        "streamable-http"
    };
    mcp.insert(
        "transport_type".to_owned(),
        Value::String(transport.to_owned()),
    );
    if let Some(allowed) = &server.allowed_tools {
        let names = allowed.get("tool_names").unwrap_or(allowed);
        mcp.insert("allowed_tools".to_owned(), names.clone());
    }
    if let Some(headers) = &server.headers {
        mcp.insert("headers".to_owned(), headers.clone());
    }
    json!({"type": "mcp", "mcp": mcp})
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolbridge_core::plan::{NativeFileSearch, NativeMcp, NativeWebSearch, ToolCapabilities};
    use toolbridge_core::request::{Limits, normalize};
    use toolbridge_wire::responses::CreateResponse;

    use crate::profile::Profile;

    /// GLM's three native tools, planned from one declaration each and rendered by the Chat
    /// translator (the expectation the planner's own test had when it built this JSON itself).
    #[test]
    fn glm_native_tools_render_as_glm_json() {
        let req: CreateResponse =
            serde_json::from_value(json!({"model": "m", "input": "hi", "tools": [
                {"type": "web_search"},
                {"type": "file_search", "vector_store_ids": ["kb_1"]},
                {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/mcp"},
                {"type": "mcp", "server_label": "s", "server_url": "https://m.example/sse",
                 "allowed_tools": {"tool_names": ["a"]}, "headers": {"x": "1"}},
                {"type": "web_search", "filters": {"allowed_domains": ["a.example", "b.example"]}}
            ]}))
            .unwrap();
        let request = normalize(&req, &Limits::default()).unwrap();
        let caps = ToolCapabilities {
            web_search: Some(NativeWebSearch::GlmTool),
            file_search: Some(NativeFileSearch::GlmRetrieval),
            mcp: Some(NativeMcp::GlmMcp),
            ..ToolCapabilities::default()
        };
        let plan = toolbridge_core::plan::plan(&request.tools, None, &caps).unwrap();
        let body = crate::chat::request::build(
            &request,
            &plan,
            &Profile::preset("generic").unwrap(),
            "glm-4.6",
            &mut Vec::new(),
        );
        let sent = serde_json::to_value(&body.tools).unwrap();
        assert_eq!(
            sent,
            json!([
                {"type": "web_search", "web_search": {"enable": true, "search_result": true}},
                {"type": "retrieval", "retrieval": {"knowledge_id": "kb_1"}},
                {"type": "mcp", "mcp": {"server_label": "docs", "server_url": "https://mcp.example/mcp", "transport_type": "streamable-http"}},
                {"type": "mcp", "mcp": {"server_label": "s", "server_url": "https://m.example/sse", "transport_type": "sse", "allowed_tools": ["a"], "headers": {"x": "1"}}},
                {"type": "web_search", "web_search": {"enable": true, "search_result": true, "search_domain_filter": "a.example"}}
            ])
        );
    }
}
