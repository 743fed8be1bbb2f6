//! Tool outputs given as content parts (`input_text`, `input_image`, `input_file`), placed for
//! one provider: what goes inside the tool result, what moves to a user turn after the results,
//! and what can only be named in the text. The profile's `tool_output` form and the dialect's
//! own rule for which media a result can hold decide; every dialect renders the placement in its
//! own shape (Chat tool messages, Anthropic `tool_result` blocks, Gemini `functionResponse`).
//!
//! Not here: reading the parts (`core::request::content`) and the dialects' wire shapes.

use toolbridge_core::canonical::{OutputPart, ToolOutput};
use toolbridge_core::diagnostics::{TOOL_OUTPUT_MEDIA_MOVED, TOOL_OUTPUT_PART_DROPPED, diag};
use toolbridge_wire::responses::Diagnostic;

use crate::profile::ToolOutputForm;

/// One tool output, placed.
#[derive(Debug, Default)]
pub(crate) struct Placed<'a> {
    /// What goes inside the tool result, in order (texts, and media the result can hold).
    pub inside: Vec<&'a OutputPart>,
    /// Images that go in a user turn after the results.
    pub moved: Vec<&'a OutputPart>,
}

impl Placed<'_> {
    /// The texts inside, joined (what a text-only result carries).
    pub fn text(&self) -> String {
        self.inside
            .iter()
            .filter_map(|p| match p {
                OutputPart::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }
}

/// A part as the text that stands for it where it cannot go upstream.
pub(crate) fn note(part: &OutputPart) -> String {
    match part {
        OutputPart::Text(t) => t.clone(),
        OutputPart::Image { .. } => "[image omitted]".to_owned(),
        OutputPart::File {
            filename, file_id, ..
        } => {
            let name = filename.as_deref().or(file_id.as_deref()).unwrap_or("file");
            format!("[file `{name}` omitted]")
        }
    }
}

/// Places the parts of `output` (the result of `call_id`) for a provider whose profile says
/// `form`; `holds` says which media a result of this dialect can hold when the form allows
/// media. Images that cannot stay move to a user turn; other parts that cannot stay become
/// notes in the text (`notes`, owned by the caller so the placement can borrow them). Each move
/// or drop is a diagnostic.
pub(crate) fn place<'a>(
    call_id: &str,
    output: &'a ToolOutput,
    form: ToolOutputForm,
    holds: impl Fn(&OutputPart) -> bool,
    notes: &'a mut Vec<OutputPart>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Placed<'a> {
    let ToolOutput::Parts(parts) = output else {
        return Placed::default();
    };
    let mut inside: Vec<Result<&'a OutputPart, usize>> = Vec::with_capacity(parts.len());
    let mut moved = Vec::new();
    let (mut moved_count, mut dropped) = (0, Vec::new());
    for part in parts {
        match part {
            OutputPart::Text(_) => inside.push(Ok(part)),
            _ if form == ToolOutputForm::PartsWithMedia && holds(part) => inside.push(Ok(part)),
            OutputPart::Image { .. } => {
                moved.push(part);
                moved_count += 1;
            }
            OutputPart::File { .. } => {
                inside.push(Err(notes.len()));
                dropped.push(note(part));
                notes.push(OutputPart::Text(note(part)));
            }
        }
    }
    if moved_count > 0 {
        diagnostics.push(diag(
            TOOL_OUTPUT_MEDIA_MOVED,
            Some("input"),
            format!(
                "the provider takes no images in tool results; {moved_count} image(s) of the output of `{call_id}` were sent in a user message after the results"
            ),
        ));
    }
    if !dropped.is_empty() {
        diagnostics.push(diag(
            TOOL_OUTPUT_PART_DROPPED,
            Some("input"),
            format!(
                "the provider cannot take these parts of the output of `{call_id}`; the result names them instead: {}",
                dropped.join(", ")
            ),
        ));
    }
    let notes: &'a [OutputPart] = notes;
    Placed {
        inside: inside
            .into_iter()
            .filter_map(|p| match p {
                Ok(part) => Some(part),
                Err(i) => notes.get(i),
            })
            .collect(),
        moved,
    }
}

/// The text introducing images moved out of tool results.
pub(crate) fn moved_caption(call_ids: &[&str]) -> String {
    let ids: Vec<String> = call_ids.iter().map(|id| format!("`{id}`")).collect();
    format!("Images returned by tool call {}:", ids.join(", "))
}
