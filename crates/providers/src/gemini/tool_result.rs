//! Tool results as Gemini `functionResponse` parts: the text in `response` (a JSON object as
//! is, else `{"output": text}`), and — when the profile's `tool_output` allows media (the
//! preset's default, Gemini 3's multimodal function responses) — inline images and files in
//! `functionResponse.parts`. What a result cannot hold (an image by URL: Gemini takes only
//! inline data there) goes as parts of the user turn after the run of results.
//!
//! Not here: placing the parts (`crate::tool_output`).

use toolbridge_core::canonical::{OutputPart, ToolOutput, UserPart};
use toolbridge_wire::gemini::{Blob, FunctionResponsePart, Part};
use toolbridge_wire::responses::Diagnostic;

use super::request::{data_url, user_part};
use crate::profile::Profile;
use crate::tool_output::{moved_caption, place};

/// Images waiting for the user parts after the run of results.
#[derive(Default)]
pub(super) struct Moved(Vec<(String, Vec<Part>)>);

/// The text of a result and the media it holds.
pub(super) fn split(
    call_id: &str,
    output: &ToolOutput,
    profile: &Profile,
    moved: &mut Moved,
    diagnostics: &mut Vec<Diagnostic>,
) -> (String, Vec<FunctionResponsePart>) {
    let ToolOutput::Parts(_) = output else {
        return (output.text().into_owned(), Vec::new());
    };
    let mut notes = Vec::new();
    let placed = place(
        call_id,
        output,
        profile.tool_output,
        |p| inline(p).is_some(),
        &mut notes,
        diagnostics,
    );
    if !placed.moved.is_empty() {
        let images = placed
            .moved
            .iter()
            .filter_map(|p| match p {
                OutputPart::Image { url, detail } => Some(user_part(&UserPart::Image {
                    url: url.clone(),
                    detail: detail.clone(),
                })),
                _ => None,
            })
            .collect();
        moved.0.push((call_id.to_owned(), images));
    }
    let media = placed
        .inside
        .iter()
        .filter_map(|p| inline(p))
        .map(|blob| FunctionResponsePart {
            inline_data: Some(blob),
        })
        .collect();
    (placed.text(), media)
}

/// The parts that follow the run of results: a caption and the moved images.
pub(super) fn flush(moved: &mut Moved) -> Vec<Part> {
    if moved.0.is_empty() {
        return Vec::new();
    }
    let moved = std::mem::take(&mut moved.0);
    let ids: Vec<&str> = moved.iter().map(|(id, _)| id.as_str()).collect();
    let mut parts = vec![Part::text(moved_caption(&ids))];
    parts.extend(moved.into_iter().flat_map(|(_, images)| images));
    parts
}

/// Inline data for an image or file given as a `data:` URL.
fn inline(part: &OutputPart) -> Option<Blob> {
    let url = match part {
        OutputPart::Image { url, .. } => url,
        OutputPart::File {
            data: Some(data), ..
        } => data,
        _ => return None,
    };
    data_url(url).map(|(mime_type, data)| Blob { mime_type, data })
}
