//! Ring 2: a Codex session that views a large screenshot (`view_image`: an `input_image` in a
//! tool output) goes on where the provider cannot take it as sent: on a text-only route the
//! image becomes a placeholder text (never base64 as prompt text), and on a route with a
//! request size cap it is downscaled, or left out, until the body fits.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use base64::Engine;
use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::completion;

/// A screenshot-sized PNG, about 2 MB: smooth colour with fine grain (a photo on screen), which
/// PNG keeps at full size and a downscaled JPEG makes small.
fn screenshot() -> String {
    let mut seed: u32 = 7;
    let image = image::RgbImage::from_fn(1600, 1000, |x, y| {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let grain = (seed >> 24) as u8 & 0x07;
        image::Rgb([
            (x / 8) as u8 ^ grain,
            (y / 5) as u8 ^ grain,
            ((x + y) / 12) as u8 ^ grain,
        ])
    });
    let mut png = std::io::Cursor::new(Vec::new());
    image.write_to(&mut png, image::ImageFormat::Png).unwrap();
    let png = png.into_inner();
    assert!(png.len() > 1_500_000, "{}", png.len());
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(png)
    )
}

/// Codex's turn after `view_image`: the call and its output holding the screenshot.
fn session(image: &str) -> Value {
    json!({
        "model": "m",
        "input": [
            {"type": "message", "role": "user", "content": "What is on my screen?"},
            {"type": "function_call", "call_id": "call_1", "name": "view_image", "arguments": "{\"path\":\"shot.png\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": [
                {"type": "input_image", "image_url": image}
            ]},
        ],
        "tools": [{"type": "function", "name": "view_image", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}],
    })
}

async fn harness(profile: &str) -> Harness {
    let profile = profile.to_owned();
    Harness::with_toml(move |url| {
        format!(
            "[providers.up]\nbase_url = \"{url}\"\napi_key_env = \"FAKE_UPSTREAM_KEY\"\nprofile = {profile}\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        )
    })
    .await
}

fn codes(body: &Value) -> Vec<String> {
    body["toolbridge_diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| d["code"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_screenshot_on_a_text_only_route_becomes_a_placeholder() {
    let h = harness("{ image_input = false }").await;
    h.upstream
        .push(Reply::json(completion("A terminal.", "stop")));
    let image = screenshot();
    let (status, body) = h.post_json(&session(&image)).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["status"], "completed");
    let sent = h.upstream.requests()[0].body.to_string();
    assert!(
        sent.len() < 10_000,
        "the image never goes as text: {} bytes",
        sent.len()
    );
    assert!(sent.contains("image omitted"), "{sent}");
    assert!(
        codes(&body).contains(&"content_part_dropped".to_owned()),
        "{body:#}"
    );
}

#[tokio::test]
async fn a_screenshot_over_the_size_cap_is_downscaled_to_fit() {
    let h = harness("{ max_request_bytes = 1_000_000, tool_output = \"parts_with_media\" }").await;
    h.upstream
        .push(Reply::json(completion("A terminal.", "stop")));
    let image = screenshot();
    let (status, body) = h.post_json(&session(&image)).await;
    assert_eq!(status, 200, "{body:#}");
    let sent = h.upstream.requests()[0].body.to_string();
    assert!(sent.len() <= 1_000_000, "{} bytes", sent.len());
    assert!(
        sent.contains("data:image/jpeg;base64,"),
        "downscaled, still an image"
    );
    assert!(
        codes(&body).contains(&"image_downscaled".to_owned()),
        "{body:#}"
    );

    // A cap even the downscaled image does not fit: it is left out, and the turn goes on.
    let h = harness("{ max_request_bytes = 20_000, tool_output = \"parts_with_media\" }").await;
    h.upstream
        .push(Reply::json(completion("Nothing to see.", "stop")));
    let (status, body) = h.post_json(&session(&image)).await;
    assert_eq!(status, 200, "{body:#}");
    let sent = h.upstream.requests()[0].body.to_string();
    assert!(sent.len() <= 20_000, "{} bytes", sent.len());
    assert!(sent.contains("size limit"), "{sent}");
    assert!(
        codes(&body).contains(&"content_part_dropped".to_owned()),
        "{body:#}"
    );
}
