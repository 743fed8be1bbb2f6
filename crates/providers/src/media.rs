//! Images a provider cannot take, or that would make its request too large, fitted before the
//! request is built, so that a session never sinks on them:
//! - a profile with `image_input = false` gets a short placeholder text in place of each image
//!   (in user turns and tool outputs), with a `content_part_dropped` diagnostic: the model
//!   reads that an image was there, and the image's base64 never becomes prompt text;
//! - a profile with `max_request_bytes` gets its inline (`data:`) images downscaled and
//!   recompressed when the built body is over that size (`image_downscaled`), then the oldest
//!   images replaced by placeholders until the body fits (`content_part_dropped`).
//!
//! The request is copied only when something changes (`Cow`); a request without images costs
//! one scan of its turns.
//!
//! Not here: how each dialect writes an image (its own request module).

use std::borrow::Cow;

use base64::Engine;
use toolbridge_core::canonical::{CanonicalRequest, OutputPart, ToolOutput, Turn, UserPart};
use toolbridge_core::diagnostics::{CONTENT_PART_DROPPED, IMAGE_DOWNSCALED, diag};
use toolbridge_wire::responses::Diagnostic;

use crate::profile::Profile;

/// The placeholder of an image on a route whose models take none.
pub const NO_IMAGES: &str = "[image omitted: this model takes no images]";
/// The placeholder of an image left out to keep the request within the provider's size.
pub const TOO_LARGE: &str = "[image omitted: the request would exceed the provider's size limit]";

/// The longest side of a downscaled image, in pixels (what vision models resize to anyway).
const MAX_SIDE: u32 = 1024;
/// The JPEG quality of a recompressed image.
const JPEG_QUALITY: u8 = 75;

/// The request with its images replaced by placeholders when the profile takes none.
pub(crate) fn without_unsupported<'a>(
    canonical: &'a CanonicalRequest,
    profile: &Profile,
    diagnostics: &mut Vec<Diagnostic>,
) -> Cow<'a, CanonicalRequest> {
    if profile.image_input || !has_images(canonical) {
        return Cow::Borrowed(canonical);
    }
    let mut fitted = canonical.clone();
    let mut count = 0;
    for mut slot in slots(&mut fitted) {
        slot.replace(NO_IMAGES);
        count += 1;
    }
    diagnostics.push(diag(
        CONTENT_PART_DROPPED,
        Some("input"),
        format!(
            "{count} image(s) sent as a placeholder text: this provider's models take no images"
        ),
    ));
    Cow::Owned(fitted)
}

/// Whether any turn holds an image.
pub(crate) fn has_images(canonical: &CanonicalRequest) -> bool {
    canonical.turns.iter().any(|turn| match turn {
        Turn::User { parts } => parts.iter().any(|p| matches!(p, UserPart::Image { .. })),
        Turn::ToolResult {
            output: ToolOutput::Parts(parts),
            ..
        } => parts.iter().any(|p| matches!(p, OutputPart::Image { .. })),
        _ => false,
    })
}

/// Fits the request, whose body is `len` bytes, under `cap` bytes as `built_len` measures it:
/// inline images downscaled first, then the oldest images left out, until it fits or no image
/// is left. `None` when nothing changed (it fitted, or it has no image to shrink).
pub(crate) fn fit_size(
    canonical: &CanonicalRequest,
    mut len: u64,
    cap: u64,
    built_len: &mut dyn FnMut(&CanonicalRequest) -> u64,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<CanonicalRequest> {
    if len <= cap || !has_images(canonical) {
        return None;
    }
    let mut fitted = canonical.clone();
    let mut shrunk = 0;
    for mut slot in slots(&mut fitted) {
        if let Some(smaller) = downscaled(slot.url()) {
            slot.set_url(smaller);
            shrunk += 1;
        }
    }
    if shrunk > 0 {
        diagnostics.push(diag(
            IMAGE_DOWNSCALED,
            Some("input"),
            format!(
                "{shrunk} image(s) downscaled to at most {MAX_SIDE} px and recompressed: the request was {len} bytes, over the provider's {cap}"
            ),
        ));
        len = built_len(&fitted);
    }
    let mut elided = 0;
    while len > cap {
        // The oldest images first: enough of them to cover the excess, then measured again.
        let mut excess = len - cap;
        let mut any = false;
        for mut slot in slots(&mut fitted) {
            if excess == 0 {
                break;
            }
            let size = slot.url().len() as u64;
            slot.replace(TOO_LARGE);
            excess = excess.saturating_sub(size);
            elided += 1;
            any = true;
        }
        if !any {
            break;
        }
        len = built_len(&fitted);
    }
    if elided > 0 {
        diagnostics.push(diag(
            CONTENT_PART_DROPPED,
            Some("input"),
            format!(
                "the {elided} oldest image(s) left out (a placeholder text in their place) to keep the request under the provider's {cap} bytes"
            ),
        ));
    }
    Some(fitted)
}

/// An inline image decoded, scaled to at most [`MAX_SIDE`] and recompressed as JPEG; `None` when
/// it is not an inline image, cannot be decoded, or would not get smaller.
fn downscaled(url: &str) -> Option<String> {
    let (meta, data) = url.strip_prefix("data:")?.split_once(',')?;
    if !meta.ends_with(";base64") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    let image = image::load_from_memory(&bytes).ok()?;
    let image = if image.width().max(image.height()) > MAX_SIDE {
        image.resize(MAX_SIDE, MAX_SIDE, image::imageops::FilterType::Triangle)
    } else {
        image
    };
    let mut out = Vec::new();
    let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY);
    image.to_rgb8().write_with_encoder(encoder).ok()?;
    let smaller = format!(
        "data:image/jpeg;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&out)
    );
    (smaller.len() < url.len()).then_some(smaller)
}

/// One image of the request, where it sits.
enum Slot<'a> {
    User(&'a mut UserPart),
    Output(&'a mut OutputPart),
}

impl Slot<'_> {
    fn url(&self) -> &str {
        match self {
            Self::User(UserPart::Image { url, .. })
            | Self::Output(OutputPart::Image { url, .. }) => url,
            _ => "",
        }
    }

    fn set_url(&mut self, new: String) {
        match self {
            Self::User(UserPart::Image { url, .. })
            | Self::Output(OutputPart::Image { url, .. }) => {
                *url = new;
            }
            _ => {}
        }
    }

    fn replace(&mut self, text: &str) {
        match self {
            Self::User(part) => **part = UserPart::Text(text.to_owned()),
            Self::Output(part) => **part = OutputPart::Text(text.to_owned()),
        }
    }
}

/// Every image of the request, oldest first.
fn slots(canonical: &mut CanonicalRequest) -> Vec<Slot<'_>> {
    let mut out = Vec::new();
    for turn in &mut canonical.turns {
        match turn {
            Turn::User { parts } => out.extend(
                parts
                    .iter_mut()
                    .filter(|p| matches!(p, UserPart::Image { .. }))
                    .map(Slot::User),
            ),
            Turn::ToolResult {
                output: ToolOutput::Parts(parts),
                ..
            } => out.extend(
                parts
                    .iter_mut()
                    .filter(|p| matches!(p, OutputPart::Image { .. }))
                    .map(Slot::Output),
            ),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(side: u32) -> String {
        let image = image::RgbImage::from_fn(side, side, |x, y| {
            image::Rgb([
                (x * 7 % 256) as u8,
                (y * 13 % 256) as u8,
                ((x ^ y) % 256) as u8,
            ])
        });
        let mut out = std::io::Cursor::new(Vec::new());
        image.write_to(&mut out, image::ImageFormat::Png).unwrap();
        format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(out.into_inner())
        )
    }

    fn request(images: usize, side: u32) -> CanonicalRequest {
        let mut turns = Vec::new();
        for i in 0..images {
            turns.push(Turn::User {
                parts: vec![
                    UserPart::Text(format!("screenshot {i}")),
                    UserPart::Image {
                        url: png(side),
                        detail: None,
                    },
                ],
            });
        }
        CanonicalRequest {
            model: "m".to_owned(),
            turns,
            tools: Vec::new(),
            context_tools: Vec::new(),
            tool_choice: None,
            params: toolbridge_core::canonical::Params::default(),
            output: toolbridge_core::contract::OutputContract::Text,
            stream: false,
            diagnostics: Vec::new(),
            cache_marks: Vec::new(),
        }
    }

    fn size(req: &CanonicalRequest) -> u64 {
        req.turns
            .iter()
            .map(|t| match t {
                Turn::User { parts } => parts
                    .iter()
                    .map(|p| match p {
                        UserPart::Text(t) => t.len(),
                        UserPart::Image { url, .. } => url.len(),
                    })
                    .sum::<usize>() as u64,
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn a_text_only_profile_gets_placeholders() {
        let mut profile = Profile::preset("generic").unwrap();
        profile.image_input = false;
        let req = request(2, 16);
        let mut diagnostics = Vec::new();
        let fitted = without_unsupported(&req, &profile, &mut diagnostics);
        assert!(!has_images(&fitted));
        assert!(format!("{:?}", fitted.turns).contains(NO_IMAGES));
        assert_eq!(diagnostics[0].code, "content_part_dropped");
        profile.image_input = true;
        assert!(matches!(
            without_unsupported(&req, &profile, &mut diagnostics),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_large_image_is_downscaled_then_the_oldest_are_left_out() {
        let req = request(3, 1500);
        let before = size(&req);
        let mut diagnostics = Vec::new();
        // A cap the three downscaled images fit under.
        let fitted = fit_size(&req, before, before / 2, &mut size, &mut diagnostics).unwrap();
        assert!(
            size(&fitted) <= before / 2,
            "{} > {}",
            size(&fitted),
            before / 2
        );
        assert!(has_images(&fitted));
        assert_eq!(diagnostics[0].code, "image_downscaled");
        // A cap only one of them fits under: the oldest go.
        let one = size(&fitted) / 2;
        let mut diagnostics = Vec::new();
        let fitted = fit_size(&req, before, one, &mut size, &mut diagnostics).unwrap();
        assert!(size(&fitted) <= one);
        let Turn::User { parts } = &fitted.turns[0] else {
            panic!()
        };
        assert_eq!(parts[1], UserPart::Text(TOO_LARGE.to_owned()));
        let Turn::User { parts } = &fitted.turns[2] else {
            panic!()
        };
        assert!(matches!(parts[1], UserPart::Image { .. }));
        assert_eq!(diagnostics[1].code, "content_part_dropped");
        // Under the cap already: nothing changes.
        assert!(fit_size(&req, before, u64::MAX, &mut size, &mut Vec::new()).is_none());
    }
}
