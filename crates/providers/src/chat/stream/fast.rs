//! The fast path of a streamed Chat chunk: most chunks of a stream carry a few characters of
//! text for choice 0 and nothing else, and reading each into the full [`ChatChunk`] (a
//! `String` for its `id`, its `model` and its text, a map of its other fields, every delta
//! field) was about 5 K instructions a chunk, a third of a short stream's. Here such a chunk is
//! read in place: `id` and `model` borrowed from the payload and checked as strings, other
//! top-level fields skipped, the text borrowed unless it has escapes.
//!
//! A chunk is taken here only when nothing in it needs the full reading: no `usage`, no
//! `error` or `base_resp`, and no delta field but `role` and `content` (`refusal`, reasoning
//! and tool calls go the full way). Anything else, and anything that fails to read here (a
//! field of the wrong type), goes the full way, which decides exactly as before; what a chunk
//! taken here yields is what the full reading yields, which the tests check chunk by chunk.
//!
//! [`ChatChunk`]: toolbridge_wire::chat::ChatChunk

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use toolbridge_core::events::UpstreamEvent;
use toolbridge_wire::responses::Diagnostic;

use super::{ChunkDecoder, push_finish, push_text};
use crate::profile::Profile;

/// A chunk as the fast path reads it.
#[derive(Deserialize)]
pub(super) struct Plain<'a> {
    // Read (as strings, like the full reading) but not kept.
    #[serde(borrow, default, rename = "id")]
    _id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "model")]
    _model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    // Present (and not null): the chunk goes the full way.
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    base_resp: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: u32,
    #[serde(borrow, default)]
    delta: Delta<'a>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct Delta<'a> {
    #[serde(borrow, default, rename = "role")]
    _role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    // Present (and not null): the chunk goes the full way.
    #[serde(borrow, default)]
    refusal: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reasoning_content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reasoning: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reasoning_details: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_calls: Option<&'a RawValue>,
}

/// `data` read the fast way, when it is a chunk the fast path takes.
pub(super) fn plain(data: &str) -> Option<Plain<'_>> {
    let chunk: Plain<'_> = serde_json::from_str(data).ok()?;
    let plain = chunk.usage.is_none()
        && chunk.error.is_none()
        && chunk.base_resp.is_none()
        && chunk.choices.iter().flatten().all(|c| {
            let d = &c.delta;
            d.refusal.is_none()
                && d.reasoning_content.is_none()
                && d.reasoning.is_none()
                && d.reasoning_details.is_none()
                && d.tool_calls.is_none()
        });
    plain.then_some(chunk)
}

/// The events of a chunk [`plain`] took: choice 0's text and finish reason.
pub(super) fn decode(
    profile: &Profile,
    chunk: Plain<'_>,
    decoder: &mut ChunkDecoder,
    out: &mut Vec<UpstreamEvent>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some(choice) = chunk.choices.into_iter().flatten().find(|c| c.index == 0) else {
        return;
    };
    if let Some(text) = choice.delta.content {
        push_text(decoder, text.into_owned(), out);
    }
    if let Some(reason) = choice.finish_reason {
        push_finish(profile, &reason, out, diagnostics);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every payload gives the same events, diagnostics and outcome through `on_data` (fast
    /// path first) as through the full reading alone, with and without `<think>` tags; and
    /// the plain ones did take the fast path.
    #[test]
    fn the_fast_path_yields_what_the_full_reading_yields() {
        let chunk = |rest: &str| {
            format!(
                r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp",{rest}}}"#
            )
        };
        let plain = [
            chunk(
                r#""choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]"#,
            ),
            chunk(r#""choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]"#),
            chunk(
                r#""choices":[{"index":0,"delta":{"content":"a \"q\"\n\u00e9 <think>x</think> y"}}]"#,
            ),
            chunk(r#""choices":[{"index":0,"delta":{},"finish_reason":"stop"}]"#),
            chunk(r#""choices":[{"index":0,"delta":{},"finish_reason":"made_up"}]"#),
            chunk(
                r#""choices":[{"index":0,"delta":{"content":null,"refusal":null,"tool_calls":null}}],"usage":null,"error":null"#,
            ),
            chunk(
                r#""choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"zero"}}]"#,
            ),
            chunk(r#""choices":[],"service_tier":"default","obfuscation":"abc""#),
            chunk(r#""choices":null"#),
            r#"{"choices":[{"delta":{"content":"no index"}}]}"#.to_owned(),
        ];
        let full_only = [
            chunk(
                r#""choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}"#,
            ),
            chunk(
                r#""choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]"#,
            ),
            chunk(r#""choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]"#),
            chunk(r#""choices":[{"index":0,"delta":{"reasoning":"hmm"}}]"#),
            chunk(r#""choices":[{"index":0,"delta":{"refusal":"no"}}]"#),
            chunk(r#""error":{"message":"overloaded","code":"busy"}"#),
            chunk(r#""choices":null,"base_resp":{"status_code":1002,"status_msg":"rate limited"}"#),
            chunk(r#""choices":[{"index":0,"delta":{"content":5}}]"#),
            chunk(r#""choices":[{"index":"0","delta":{"content":"x"}}]"#),
            r#"{"id":5,"choices":[{"index":0,"delta":{"content":"x"}}]}"#.to_owned(),
            r#"{"model":["m"],"choices":[{"index":0,"delta":{"content":"x"}}]}"#.to_owned(),
            r#"{"choices":[{"index":0,"delta":{"role":7,"content":"x"}}]}"#.to_owned(),
            r#"[1,2]"#.to_owned(),
            r#"{"choices":"#.to_owned(),
        ];
        let generic = Profile::preset("generic").unwrap();
        let mut thinking = generic.clone();
        thinking.think_tags = true;
        for profile in [&generic, &thinking] {
            for (payloads, fast) in [(&plain[..], true), (&full_only[..], false)] {
                for data in payloads {
                    assert_eq!(super::plain(data).is_some(), fast, "{data}");
                    let (mut a, mut b) = (ChunkDecoder::new(profile), ChunkDecoder::new(profile));
                    let (mut out_a, mut diag_a, mut out_b, mut diag_b) =
                        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                    let flow_a = a.on_data(profile, data, &mut out_a, &mut diag_a);
                    let flow_b = b.on_chunk(profile, data, &mut out_b, &mut diag_b);
                    a.finish(&mut out_a);
                    b.finish(&mut out_b);
                    assert_eq!(format!("{flow_a:?}"), format!("{flow_b:?}"), "{data}");
                    assert_eq!(out_a, out_b, "{data}");
                    assert_eq!(diag_a, diag_b, "{data}");
                }
            }
        }
        // The plain chunks did yield something (the comparison would pass if both yielded
        // nothing).
        let mut decoder = ChunkDecoder::new(&generic);
        let (mut out, mut diagnostics) = (Vec::new(), Vec::new());
        for data in &plain {
            let _ = decoder.on_data(&generic, data, &mut out, &mut diagnostics);
        }
        let text: String = out
            .iter()
            .filter_map(|e| match e {
                UpstreamEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Hela \"q\"\né <think>x</think> yzerono index");
        assert_eq!(
            out.iter()
                .filter(|e| matches!(e, UpstreamEvent::Finish(_)))
                .count(),
            2
        );
        assert_eq!(diagnostics.len(), 1, "the unknown finish reason");
    }
}
