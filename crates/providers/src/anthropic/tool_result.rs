//! Tool results as Anthropic `tool_result` blocks: a string, or content blocks — text, images
//! (base64 or URL) and PDF documents — when the profile's `tool_output` allows media (the
//! preset's default). Images a result cannot hold go as image blocks after the run of results,
//! in the same user message (Anthropic wants every `tool_result` block first).
//!
//! Not here: placing the parts (`crate::tool_output`).

use serde_json::Map;
use toolbridge_core::canonical::{OutputPart, ToolOutput};
use toolbridge_wire::anthropic::{
    ContentBlock, DocumentBlock, ImageBlock, ImageSource, MessageContent, TextBlock,
    ToolResultBlock,
};
use toolbridge_wire::responses::Diagnostic;

use super::request::image_source;
use crate::profile::{Profile, ToolOutputForm};
use crate::tool_output::{moved_caption, place};

/// The blocks of one run of results, and the images waiting to follow it.
#[derive(Default)]
pub(super) struct ToolResults {
    moved: Vec<(String, Vec<ContentBlock>)>,
}

impl ToolResults {
    /// The `tool_result` block of one result.
    pub(super) fn block(
        &mut self,
        call_id: &str,
        output: &ToolOutput,
        profile: &Profile,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> ContentBlock {
        let content = match output {
            // Anthropic rejects empty text; an empty output is sent without content.
            ToolOutput::Text(text) => {
                (!text.is_empty()).then(|| MessageContent::Text(text.clone()))
            }
            ToolOutput::Parts(_) => {
                let mut notes = Vec::new();
                let placed = place(
                    call_id,
                    output,
                    profile.tool_output,
                    |p| media_block(p).is_some(),
                    &mut notes,
                    diagnostics,
                );
                if !placed.moved.is_empty() {
                    let images = placed.moved.iter().filter_map(|p| media_block(p)).collect();
                    self.moved.push((call_id.to_owned(), images));
                }
                match profile.tool_output {
                    ToolOutputForm::Text => {
                        let text = placed.text();
                        (!text.is_empty()).then_some(MessageContent::Text(text))
                    }
                    ToolOutputForm::Parts | ToolOutputForm::PartsWithMedia => {
                        let blocks: Vec<ContentBlock> = placed
                            .inside
                            .iter()
                            .filter_map(|p| match p {
                                OutputPart::Text(t) if t.is_empty() => None,
                                OutputPart::Text(t) => Some(text_block(t)),
                                other => media_block(other),
                            })
                            .collect();
                        (!blocks.is_empty()).then_some(MessageContent::Blocks(blocks))
                    }
                }
            }
        };
        ContentBlock::ToolResult(ToolResultBlock {
            tool_use_id: call_id.to_owned(),
            content,
            ..ToolResultBlock::default()
        })
    }

    /// The blocks that follow the run of results: a caption and the moved images.
    pub(super) fn flush(&mut self) -> Vec<ContentBlock> {
        if self.moved.is_empty() {
            return Vec::new();
        }
        let moved = std::mem::take(&mut self.moved);
        let ids: Vec<&str> = moved.iter().map(|(id, _)| id.as_str()).collect();
        let mut blocks = vec![text_block(&moved_caption(&ids))];
        blocks.extend(moved.into_iter().flat_map(|(_, images)| images));
        blocks
    }
}

fn text_block(text: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock {
        text: text.to_owned(),
        extra: Map::new(),
    })
}

/// An image or a PDF as its block; `None` for what Anthropic cannot take (a file by id, a
/// document that is not a PDF).
fn media_block(part: &OutputPart) -> Option<ContentBlock> {
    match part {
        OutputPart::Text(_) => None,
        OutputPart::Image { url, .. } => Some(ContentBlock::Image(ImageBlock {
            source: image_source(url),
            extra: Map::new(),
        })),
        OutputPart::File {
            filename,
            data,
            url,
            ..
        } => {
            let source = match (data, url) {
                (Some(data), _) => match image_source(data) {
                    source @ ImageSource::Base64 { .. } if matches!(&source, ImageSource::Base64 { media_type, .. } if media_type == "application/pdf") => {
                        source
                    }
                    _ => return None,
                },
                (None, Some(url)) => ImageSource::Url { url: url.clone() },
                (None, None) => return None,
            };
            Some(ContentBlock::Document(DocumentBlock {
                source,
                title: filename.clone(),
                extra: Map::new(),
            }))
        }
    }
}
