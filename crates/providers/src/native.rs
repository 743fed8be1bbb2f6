//! The planner's neutral native-tool decisions rendered as vendor JSON: one function per form,
//! each in the folder of the dialect whose vendor defined it (`chat::native` for GLM and Kimi,
//! `anthropic::request`, `gemini::request`), chosen here by the profile's form.
//!
//! The form, not the dialect, picks the rendering: a profile names the form its provider takes,
//! and a translator sends what the profile chose.

use serde_json::Value;
use toolbridge_core::plan::{NativeFileSearch, NativeMcp, NativeTool, NativeWebSearch};

/// The vendor JSON of `tool`; `None` for a form that is not a tool (Qwen's `enable_search`
/// is a request flag, which the planner sets instead of planning a tool).
pub(crate) fn render(tool: &NativeTool) -> Option<Value> {
    Some(match tool {
        NativeTool::WebSearch(search) => match search.form {
            NativeWebSearch::GlmTool => crate::chat::native::glm_web_search(search),
            NativeWebSearch::KimiBuiltin => crate::chat::native::kimi_web_search(),
            NativeWebSearch::AnthropicServerTool => crate::anthropic::request::web_search(search),
            NativeWebSearch::GeminiGoogleSearch => crate::gemini::request::google_search(),
            NativeWebSearch::QwenFlag => return None,
        },
        NativeTool::Retrieval {
            form: NativeFileSearch::GlmRetrieval,
            knowledge_id,
        } => crate::chat::native::glm_retrieval(knowledge_id),
        NativeTool::Mcp(server) => match server.form {
            NativeMcp::GlmMcp => crate::chat::native::glm_mcp(server),
        },
        NativeTool::AsDeclared(value) => value.clone(),
    })
}
