//! Decoding a dialect's answer into neutral events: one stream [`Decoder`] with one calling
//! convention and one [`Flow`], the whole-answer decode, and the classification of a stream's
//! first event (the peek before commit).
//!
//! Not here: reading bytes and cutting SSE events (the gateway).

use toolbridge_core::events::UpstreamEvent;
use toolbridge_wire::responses::Diagnostic;

use super::Dialect;
use crate::Error;
use crate::anthropic::stream::MessagesDecoder;
use crate::chat::stream::ChunkDecoder;
use crate::gemini::stream::GeminiDecoder;
use crate::profile::Profile;
use crate::responses::reasoning::Provenance;
use crate::responses::stream::ResponsesDecoder;

/// What the caller should do after a stream event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The dialect's end marker was received (`[DONE]`, `message_stop`).
    Done,
}

/// The decoder of one streamed answer, in the provider's dialect.
#[derive(Debug)]
pub enum Decoder {
    /// Chat Completions chunks: only `data:` matters, `[DONE]` ends the stream.
    Chat(ChunkDecoder),
    /// Anthropic Messages events: `event:` names the event, `message_stop` ends the stream.
    Anthropic(MessagesDecoder),
    /// Gemini chunks: each `data:` is a whole `GenerateContentResponse`. Calls without an id get
    /// one from the prefix the caller gave (a client keys calls by id across turns). There is no
    /// end marker: the stream ends with the connection, like a Chat stream without `[DONE]` (a
    /// finish reason seen before makes that a normal end).
    Gemini(GeminiDecoder),
    /// Native Responses events: items carried as they came, function calls decoded; the
    /// terminal event ends the stream.
    Responses(ResponsesDecoder),
}

impl Dialect {
    /// The decoder of a stream of this dialect. `call_prefix` names calls that come without an
    /// id (`<prefix>_<n>`); pass one unique to the answer. `provenance` (the provider's name and
    /// the gateway's sealer) seals reasoning an endpoint returns as plaintext and wants back
    /// (the profile's `reasoning_replay`), for a stateless client to carry; the translating
    /// dialects' reasoning is sealed by the assembler.
    pub fn decoder(
        self,
        profile: &Profile,
        call_prefix: String,
        provenance: Option<Provenance<'_>>,
    ) -> Decoder {
        match self {
            Self::Chat => Decoder::Chat(ChunkDecoder::new(profile)),
            Self::Anthropic => Decoder::Anthropic(MessagesDecoder::new()),
            Self::Gemini => Decoder::Gemini(GeminiDecoder::with_call_prefix(call_prefix)),
            Self::Responses => Decoder::Responses(ResponsesDecoder::new(
                provenance.and_then(|p| p.sealing(profile.reasoning_replay)),
            )),
        }
    }

    /// Decodes a whole (non-streamed) answer into upstream events. `call_prefix` and
    /// `provenance` as for [`Dialect::decoder`].
    pub fn decode_whole(
        self,
        profile: &Profile,
        body: &[u8],
        call_prefix: &str,
        provenance: Option<Provenance<'_>>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<Vec<UpstreamEvent>, Error> {
        let not = |what: &str, e: serde_json::Error| Error::Decode {
            message: format!("not a {what} response: {e}"),
        };
        match self {
            Self::Chat => {
                let chat: toolbridge_wire::chat::ChatResponse =
                    serde_json::from_slice(body).map_err(|e| not("Chat Completions", e))?;
                if let Some(error) = crate::chat::errors::in_body(&chat) {
                    return Err(Error::Upstream(Box::new(error)));
                }
                Ok(crate::chat::response::decode(profile, chat, diagnostics))
            }
            Self::Anthropic => {
                let messages: toolbridge_wire::anthropic::MessagesResponse =
                    serde_json::from_slice(body).map_err(|e| not("Anthropic Messages", e))?;
                Ok(crate::anthropic::response::decode(&messages, diagnostics))
            }
            Self::Gemini => {
                let answer: toolbridge_wire::gemini::GenerateContentResponse =
                    serde_json::from_slice(body).map_err(|e| not("Gemini generateContent", e))?;
                crate::gemini::response::decode(answer, call_prefix, diagnostics)
            }
            Self::Responses => {
                let answer: serde_json::Value =
                    serde_json::from_slice(body).map_err(|e| not("Responses", e))?;
                let sealing = provenance.and_then(|p| p.sealing(profile.reasoning_replay));
                crate::responses::stream::decode_whole(answer, sealing, diagnostics)
            }
        }
    }

    /// The error a stream's first event reports, if it is one (a rate limit or an overload the
    /// provider reports inside a 200 stream), so the answer can still be an HTTP error. The
    /// event is read by a fresh decoder (the state the real one starts in); anything but an
    /// upstream error (a decode failure, a normal event) is `None`.
    pub fn classify_first_event(
        self,
        profile: &Profile,
        event: Option<&str>,
        data: &str,
    ) -> Option<Error> {
        self.decoder(profile, "call".to_owned(), None)
            .on_event(profile, event, data, &mut Vec::new(), &mut Vec::new())
            .err()
            .filter(|e| matches!(e, Error::Upstream(_)))
    }
}

impl Decoder {
    /// A fresh decoder of the same dialect, for the next round's stream.
    pub fn restarted(&self, profile: &Profile, call_prefix: String) -> Self {
        match self {
            Self::Chat(_) => Self::Chat(ChunkDecoder::new(profile)),
            Self::Anthropic(_) => Self::Anthropic(MessagesDecoder::new()),
            Self::Gemini(_) => Self::Gemini(GeminiDecoder::with_call_prefix(call_prefix)),
            Self::Responses(decoder) => Self::Responses(decoder.restarted()),
        }
    }

    /// Decodes one stream event (`event` its SSE `event:` name, when it has one; `data` its
    /// `data:` payload) into `out`; diagnostics go to `diagnostics`.
    pub fn on_event(
        &mut self,
        profile: &Profile,
        event: Option<&str>,
        data: &str,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<Flow, Error> {
        match self {
            Self::Chat(decoder) => decoder.on_data(profile, data, out, diagnostics),
            Self::Anthropic(decoder) => {
                decoder.on_event(event.unwrap_or("message"), data, out, diagnostics)
            }
            Self::Gemini(decoder) => {
                decoder.on_data(data, out, diagnostics)?;
                Ok(Flow::Continue)
            }
            Self::Responses(decoder) => decoder.on_event(event, data, out, diagnostics),
        }
    }

    /// Flushes what the decoder holds back at the end of a stream.
    pub fn finish(&mut self, out: &mut Vec<UpstreamEvent>) {
        match self {
            Self::Chat(decoder) => decoder.finish(out),
            // Nothing is held back: each event is decoded whole.
            Self::Anthropic(_) | Self::Gemini(_) | Self::Responses(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic() -> Profile {
        Profile::preset("generic").unwrap()
    }

    #[test]
    fn an_error_as_the_first_event_is_classified_in_every_dialect() {
        let cases: [(Dialect, Option<&str>, &str); 4] = [
            (
                Dialect::Chat,
                None,
                r#"{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}"#,
            ),
            (
                Dialect::Anthropic,
                Some("error"),
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ),
            (
                Dialect::Gemini,
                None,
                r#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}"#,
            ),
            (
                Dialect::Responses,
                Some("error"),
                r#"{"type":"error","code":"rate_limit_exceeded","message":"slow down"}"#,
            ),
        ];
        for (dialect, event, data) in cases {
            let error = dialect.classify_first_event(&generic(), event, data);
            assert!(
                matches!(error, Some(Error::Upstream(_))),
                "{dialect:?}: {error:?}"
            );
        }
    }

    #[test]
    fn an_ordinary_or_broken_first_event_is_not_an_error() {
        let profile = generic();
        let chat = r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#;
        assert_eq!(
            Dialect::Chat.classify_first_event(&profile, None, chat),
            None
        );
        assert_eq!(
            Dialect::Gemini.classify_first_event(&profile, None, "not json"),
            None
        );
        assert_eq!(
            Dialect::Responses.classify_first_event(
                &profile,
                Some("response.created"),
                r#"{"type":"response.created"}"#
            ),
            None
        );
    }

    #[test]
    fn one_decoder_reads_every_dialect() {
        let profile = generic();
        let mut chat = Dialect::Chat.decoder(&profile, "c".to_owned(), None);
        let mut out = Vec::new();
        let flow = chat.on_event(&profile, None, "[DONE]", &mut out, &mut Vec::new());
        assert_eq!(flow, Ok(Flow::Done));
        let mut anthropic = Dialect::Anthropic.decoder(&profile, "c".to_owned(), None);
        let flow = anthropic.on_event(
            &profile,
            Some("message_stop"),
            r#"{"type":"message_stop"}"#,
            &mut out,
            &mut Vec::new(),
        );
        assert_eq!(flow, Ok(Flow::Done));
        // Gemini has no end marker: the connection closing ends its stream.
        let mut gemini = Dialect::Gemini.decoder(&profile, "c".to_owned(), None);
        let chunk = r#"{"candidates":[{"index":0,"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}]}"#;
        let flow = gemini.on_event(&profile, None, chunk, &mut out, &mut Vec::new());
        assert_eq!(flow, Ok(Flow::Continue));
        let named = format!("{out:?}");
        assert!(
            named.contains("c_"),
            "an id-less call is named from the prefix: {named}"
        );
        // A Responses stream ends with its terminal event.
        let mut responses = Dialect::Responses.decoder(&profile, "c".to_owned(), None);
        let terminal =
            r#"{"type":"response.completed","response":{"status":"completed","output":[]}}"#;
        let flow = responses.on_event(&profile, None, terminal, &mut out, &mut Vec::new());
        assert_eq!(flow, Ok(Flow::Done));
    }

    #[test]
    fn a_whole_answer_of_the_wrong_shape_is_a_decode_error() {
        for dialect in [
            Dialect::Chat,
            Dialect::Anthropic,
            Dialect::Gemini,
            Dialect::Responses,
        ] {
            let decoded = dialect.decode_whole(&generic(), b"[1]", "c", None, &mut Vec::new());
            assert!(
                matches!(decoded, Err(Error::Decode { .. })),
                "{dialect:?}: {decoded:?}"
            );
        }
    }
}
