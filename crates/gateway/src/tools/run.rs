//! The running of one call: a built-in through the registry, an MCP tool through its server,
//! an approved call resolved first; a failure is a short structured result the model reads.
//!
//! Not here: which calls a response makes (the tool loop), what a request is offered (the
//! parent).

use std::time::Duration;

use serde_json::Value;
use toolbridge_tools::ToolContext;

use super::{
    Action, BUILTIN_SERVER, GatewaySource, GatewayTools, McpServer, error_result, output_text,
    unavailable,
};

impl GatewayTools {
    /// Runs a call the client approved (`name` of `server`, raw `arguments`), resolved by
    /// `source` as the loop's calls are; `Err` is the structured error the model reads.
    pub(crate) async fn run_approved(
        &self,
        source: &GatewaySource,
        (server, name, arguments): (&str, &str, &str),
        listed: &[McpServer],
    ) -> Result<String, String> {
        let Some(id) = source.id(server, name) else {
            return Err(unavailable(name));
        };
        let transport =
            toolbridge_tools::typed::create_model_transport("approved", source.registry().clone());
        match transport.resolve_text("", id, arguments) {
            Ok((
                _,
                Action::Run {
                    server,
                    name,
                    arguments,
                },
            )) => {
                self.execute(&server, &name, arguments, self.limits.tool_timeout, listed)
                    .await
            }
            Ok(_) => Err(unavailable(name)),
            Err(e) => Err(error_result(e.code(), &e.to_string())),
        }
    }

    /// Runs one resolved call (`arguments` checked by the typed source) within `timeout`.
    /// `Ok` is the result the model reads; `Err` is a short structured error, which the model
    /// reads too (the request goes on).
    pub(crate) async fn execute(
        &self,
        server: &str,
        name: &str,
        arguments: Value,
        timeout: Duration,
        listed: &[McpServer],
    ) -> Result<String, String> {
        let ctx = ToolContext::with_timeout(timeout, self.limits.max_output_bytes);
        if server == BUILTIN_SERVER && self.registry.contains(name) {
            return match self.registry.execute(name, arguments, &ctx).await {
                Ok(output) => Ok(output_text(output)),
                Err(e) => Err(error_result(e.code(), &e.to_string())),
            };
        }
        let mcp = self
            .mcp
            .get()
            .into_iter()
            .flatten()
            .chain(listed)
            .find(|s| s.label == server);
        match mcp {
            Some(server) => server.run(name, arguments, &ctx).await,
            None => Err(unavailable(name)),
        }
    }
}
