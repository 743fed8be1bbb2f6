//! The items of the gateway's own tools, echoed back by the client: a `mcp_call` the gateway
//! ran (the call and its output, answered at once) and an `image_generation_call` (a short note
//! in the model's own turn, never the image's bytes).
//!
//! Not here: the Responses API's other items (`turns`).

use serde_json::{Map, Value};
use toolbridge_wire::responses::McpCallItem;

use super::Reducer;
use crate::Error;
use crate::canonical::CallKind;
use crate::diagnostics::{IMAGE_CALL_DESCRIBED, diag};

impl Reducer {
    /// A `mcp_call` the gateway ran: the call and its output (or error), answered at once.
    pub(super) fn mcp_call(&mut self, i: usize, c: &McpCallItem) -> Result<(), Error> {
        if self.repeated(i, Some(&c.id)) {
            return Ok(());
        }
        let call_id = if c.id.is_empty() {
            format!("mcp_{i}")
        } else {
            c.id.clone()
        };
        self.call(
            i,
            &call_id,
            CallKind::Gateway {
                server: c.server_label.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            },
        )?;
        let output = match (&c.output, &c.error) {
            (Some(output), _) => output.clone(),
            (None, Some(error)) => format!("error: {error}"),
            (None, None) => String::new(),
        };
        self.output(i, &call_id, output.into())
    }

    /// An `image_generation_call` echoed back: the model sees that it made the image (its id
    /// and prompt) as a short note in its own turn, never the image's bytes.
    pub(super) fn image_call(&mut self, i: usize, map: &Map<String, Value>) {
        let id = map.get("id").and_then(Value::as_str).unwrap_or_default();
        if self.repeated(i, Some(id)) {
            return;
        }
        let note = image_note(id, map);
        let turn = self.assistant_turn();
        match &mut turn.text {
            Some(text) if !text.is_empty() => {
                text.push_str("\n\n");
                text.push_str(&note);
            }
            _ => turn.text = Some(note),
        }
        self.diagnostics.push(diag(
            IMAGE_CALL_DESCRIBED,
            Some(&format!("input[{i}]")),
            "an image_generation_call was replayed upstream as a short description (its image stays with the client)",
        ));
    }
}

/// The note an earlier `image_generation_call` is replayed as.
fn image_note(id: &str, map: &serde_json::Map<String, Value>) -> String {
    let prompt = map
        .get("revised_prompt")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty());
    let made = map.get("status").and_then(Value::as_str) != Some("failed")
        && map.get("result").is_some_and(|r| !r.is_null());
    let what = if made {
        "generated an image, which the user was shown"
    } else {
        "tried to generate an image; it failed"
    };
    match prompt {
        Some(prompt) => format!("[I {what} (image `{id}`) from the prompt: {prompt}]"),
        None => format!("[I {what} (image `{id}`).]"),
    }
}
