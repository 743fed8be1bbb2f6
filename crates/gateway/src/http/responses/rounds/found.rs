//! The hosted `tool_search` in the tool loop: one search over the request's deferred tools (or
//! the error past the response's bound), and the tools found added to the conversation with a
//! replan, so the next round offers them.

use std::sync::Arc;

use toolbridge_core::canonical::{ContextSource, ContextTool};
use toolbridge_core::plan::{FOUND_PARAM, NameMap, plan_request};
use toolbridge_wire::responses::Tool;

use super::tool_loop::{CallOutcome, Continuation, ToolRounds};
use crate::error::GatewayError;

impl Continuation {
    /// Adds tools the gateway's search found to the conversation and replans with them: the
    /// new plan's names, for the calls of the rounds that follow.
    pub(super) fn lift_found(&mut self, found: Vec<Tool>) -> Result<Arc<NameMap>, GatewayError> {
        let base = self.canonical.context_tools.len();
        self.canonical
            .context_tools
            .extend(found.into_iter().enumerate().map(|(i, tool)| ContextTool {
                param: format!("{FOUND_PARAM}[{}]", base + i),
                tool,
                source: ContextSource::Found,
            }));
        self.plan = plan_request(&self.canonical, &self.profile.tools, &self.offer)?;
        Ok(Arc::new(self.plan.names.clone()))
    }
}

impl ToolRounds {
    /// One `tool_search` over the deferred tools, or the error past the response's bound.
    /// `args`: the call's arguments as the typed source resolved them, or the error the
    /// model reads.
    pub(super) async fn search(
        &self,
        args: Result<serde_json::Value, String>,
        allowed: bool,
    ) -> CallOutcome {
        if !allowed {
            let message = format!(
                "this response already ran {} tool searches, the most it may; call the tools found so far, or answer without more",
                crate::tools::MAX_SEARCHES
            );
            return CallOutcome {
                text: Err(crate::tools::error_result("too_many_searches", &message)),
                image: None,
                found: None,
            };
        }
        let searched = match args {
            Ok(args) => self.deferred.search(&args).await,
            Err(e) => Err(e),
        };
        let (text, found) = match searched {
            Ok((text, found)) => (Ok(text), Some(found)),
            Err(e) => (Err(e), None),
        };
        CallOutcome {
            text,
            image: None,
            found,
        }
    }
}
