//! Tool results as Chat `tool` messages: a string, or content parts where the profile says the
//! provider takes them (`tool_output = "parts"`: text parts; `"parts_with_media"`: `image_url`
//! parts too). Images a tool message cannot hold go in one `user` message after the run of tool
//! messages (Chat wants the results right after the assistant's calls).
//!
//! Not here: placing the parts (`crate::tool_output`).

use serde_json::{Value, json};
use toolbridge_core::canonical::{OutputPart, ToolOutput};
use toolbridge_wire::chat::ChatMessage;
use toolbridge_wire::responses::Diagnostic;

use crate::profile::{Profile, ToolOutputForm};
use crate::tool_output::{moved_caption, place};

/// The tool messages of one run of results, and the images waiting for the user message after
/// them.
#[derive(Default)]
pub(super) struct ToolResults {
    moved: Vec<(String, Vec<Value>)>,
}

impl ToolResults {
    /// The `tool` message of one result.
    pub(super) fn message(
        &mut self,
        call_id: &str,
        output: &ToolOutput,
        profile: &Profile,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> ChatMessage {
        let content = match output {
            ToolOutput::Text(text) => Value::String(text.clone()),
            ToolOutput::Parts(_) => {
                let mut notes = Vec::new();
                let placed = place(
                    call_id,
                    output,
                    profile.tool_output,
                    |p| matches!(p, OutputPart::Image { .. }),
                    &mut notes,
                    diagnostics,
                );
                if !placed.moved.is_empty() {
                    let images = placed.moved.iter().filter_map(|p| image_part(p)).collect();
                    self.moved.push((call_id.to_owned(), images));
                }
                match profile.tool_output {
                    ToolOutputForm::Text => Value::String(placed.text()),
                    ToolOutputForm::Parts | ToolOutputForm::PartsWithMedia => Value::Array(
                        placed
                            .inside
                            .iter()
                            .filter_map(|p| match p {
                                OutputPart::Text(text) => {
                                    Some(json!({"type": "text", "text": text}))
                                }
                                other => image_part(other),
                            })
                            .collect(),
                    ),
                }
            }
        };
        ChatMessage {
            role: "tool".to_owned(),
            content: Some(content),
            tool_call_id: Some(call_id.to_owned()),
            ..ChatMessage::default()
        }
    }

    /// The user message carrying the images moved out of the run's results, if any.
    pub(super) fn flush(&mut self, out: &mut Vec<ChatMessage>) {
        if self.moved.is_empty() {
            return;
        }
        let moved = std::mem::take(&mut self.moved);
        let ids: Vec<&str> = moved.iter().map(|(id, _)| id.as_str()).collect();
        let mut content = vec![json!({"type": "text", "text": moved_caption(&ids)})];
        content.extend(moved.iter().flat_map(|(_, images)| images.iter().cloned()));
        out.push(ChatMessage {
            role: "user".to_owned(),
            content: Some(Value::Array(content)),
            ..ChatMessage::default()
        });
    }
}

/// An image as a Chat `image_url` part.
fn image_part(part: &OutputPart) -> Option<Value> {
    let OutputPart::Image { url, detail } = part else {
        return None;
    };
    let mut image = json!({"url": url});
    if let (Some(detail), Some(obj)) = (detail, image.as_object_mut()) {
        obj.insert("detail".to_owned(), Value::String(detail.clone()));
    }
    Some(json!({"type": "image_url", "image_url": image}))
}
