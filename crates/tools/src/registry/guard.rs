//! The guard every call passes: parameter schemas compiled once, arguments validated with the
//! failing JSON pointer, the run bounded by deadline and cancellation, and the output size
//! checked. Shared by the registry, the typed source and the MCP tools; it does not look names up.

use std::io;

use serde_json::Value;
use tokio::sync::watch;

use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Compiles a tool's parameter schema, which must be an object schema.
pub(crate) fn compile_parameters(
    tool: &str,
    parameters: &Value,
) -> Result<jsonschema::Validator, ToolError> {
    let invalid = |message: String| ToolError::InvalidSchema {
        tool: tool.to_owned(),
        message,
    };
    let declared_type = parameters.get("type").and_then(Value::as_str);
    if declared_type != Some("object") {
        return Err(invalid(
            "the parameter schema must be a JSON object with \"type\": \"object\"".to_owned(),
        ));
    }
    jsonschema::validator_for(parameters).map_err(|e| invalid(e.to_string()))
}

/// Validates arguments; the error names the first failing location as a JSON pointer (`/` for
/// the arguments object itself).
pub(crate) fn check_arguments(
    validator: &jsonschema::Validator,
    args: &Value,
) -> Result<(), ToolError> {
    match validator.iter_errors(args).next() {
        None => Ok(()),
        Some(err) => Err(ToolError::InvalidArguments {
            path: pointer_or_root(err.instance_path().to_string()),
            message: err.to_string(),
        }),
    }
}

/// The empty pointer reads badly in messages; the library writes the root as `/`.
pub(crate) fn pointer_or_root(pointer: String) -> String {
    if pointer.is_empty() {
        "/".to_owned()
    } else {
        pointer
    }
}

/// Runs a tool bounded by the context's deadline and cancellation, then checks the output size.
pub(super) async fn run_bounded(
    tool: &dyn Tool,
    args: Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    if ctx.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    // A call whose deadline already passed is not started at all.
    if tokio::time::Instant::now() >= ctx.deadline {
        return Err(ToolError::Timeout);
    }
    let mut cancelled = ctx.cancelled.clone();
    let output = tokio::select! {
        // Cancellation wins a tie: a caller that gave up must not get a late result.
        biased;
        () = wait_cancelled(&mut cancelled) => return Err(ToolError::Cancelled),
        outcome = tokio::time::timeout_at(ctx.deadline, tool.execute(args, ctx)) => {
            outcome.map_err(|_elapsed| ToolError::Timeout)??
        }
    };
    check_output_size(&output, ctx.max_output_bytes)?;
    Ok(output)
}

/// Resolves when the flag turns true; never resolves when the sender is gone (nobody can cancel).
pub(crate) async fn wait_cancelled(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|cancelled| *cancelled).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Fails as soon as the serialised output passes `limit` bytes, without building the string.
pub(crate) fn check_output_size(output: &Value, limit: usize) -> Result<(), ToolError> {
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written += buf.len();
            if self.written > self.limit {
                Err(io::Error::other("output limit"))
            } else {
                Ok(buf.len())
            }
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { written: 0, limit };
    serde_json::to_writer(&mut counter, output).map_err(|_| ToolError::OutputTooLarge { limit })
}
