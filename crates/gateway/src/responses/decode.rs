//! The dialect decoder of a streamed answer, and the peek at its first event before anything
//! is sent to the client.

use super::*;
use toolbridge_providers::anthropic::stream::{Flow as AnthropicFlow, MessagesDecoder};
use toolbridge_providers::chat::stream::ChunkDecoder;
use toolbridge_providers::gemini::stream::GeminiDecoder;

use super::chunks::{Chunk, UpstreamSse, upstream_sse};

/// The decoder of one streamed answer, in the provider's dialect.
pub(super) enum Decoder {
    /// Chat Completions chunks: only `data:` matters, `[DONE]` ends the stream.
    Chat(ChunkDecoder),
    /// Anthropic Messages events: `event:` names the event, `message_stop` ends the stream.
    Anthropic(MessagesDecoder),
    /// Gemini chunks: each `data:` is a whole `GenerateContentResponse`. Calls without an id get
    /// one unique to this answer (a client keys calls by id across turns). There is no end marker:
    /// the stream ends with the connection, like a Chat stream without `[DONE]` (a finish reason
    /// seen before makes that a normal end).
    Gemini(GeminiDecoder),
}

impl Decoder {
    /// The decoder of `dialect`; `None` for a native Responses upstream, whose events are relayed
    /// (`passthrough`), not decoded.
    pub(super) fn new(dialect: Dialect, profile: &Profile) -> Option<Self> {
        match dialect {
            Dialect::Chat => Some(Self::Chat(ChunkDecoder::new(profile))),
            Dialect::Anthropic => Some(Self::Anthropic(MessagesDecoder::new())),
            Dialect::Gemini => Some(Self::Gemini(GeminiDecoder::with_call_prefix(ids::new(
                "call",
            )))),
            Dialect::Responses => None,
        }
    }

    /// A fresh decoder of the same dialect, for the next round's stream.
    pub(super) fn restarted(&self, profile: &Profile) -> Self {
        match self {
            Self::Chat(_) => Self::Chat(ChunkDecoder::new(profile)),
            Self::Anthropic(_) => Self::Anthropic(MessagesDecoder::new()),
            Self::Gemini(_) => Self::Gemini(GeminiDecoder::with_call_prefix(ids::new("call"))),
        }
    }

    /// Decodes one event (`event` its `event:` name, when it has one) into `out`.
    pub(super) fn on_event(
        &mut self,
        profile: &Profile,
        event: Option<&str>,
        data: &str,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<Flow, toolbridge_providers::Error> {
        match self {
            Self::Chat(decoder) => decoder.on_data(profile, data, out, diagnostics),
            Self::Anthropic(decoder) => {
                let flow = decoder.on_event(event.unwrap_or("message"), data, out, diagnostics)?;
                Ok(match flow {
                    AnthropicFlow::Continue => Flow::Continue,
                    AnthropicFlow::Done => Flow::Done,
                })
            }
            Self::Gemini(decoder) => {
                decoder.on_data(data, out, diagnostics)?;
                Ok(Flow::Continue)
            }
        }
    }

    /// Flushes what the decoder holds back at the end of a stream.
    pub(super) fn finish(&mut self, out: &mut Vec<UpstreamEvent>) {
        match self {
            Self::Chat(decoder) => decoder.finish(out),
            // Nothing is held back: each event is decoded whole.
            Self::Anthropic(_) | Self::Gemini(_) => {}
        }
    }
}

/// Reads the stream's first event before anything is sent to the client ("peek before you
/// commit"), for up to [`PEEK_WAIT`]: when it is an error (a rate limit or an overload the
/// provider reports inside a 200 stream), the answer is still an HTTP error with its status, and
/// the route's fallbacks can take the request. The event is checked by a fresh decoder of the dialect (the state the real one
/// starts in) and then handed, unread, to the stream pump. A stream that fails or ends before its
/// first event is left to the pump, which reports it as the stream's own failure.
pub(super) async fn peek(
    upstream: reqwest::Response,
    dialect: Dialect,
    profile: &Profile,
) -> Result<UpstreamSse, GatewayError> {
    let mut stream = upstream_sse(upstream);
    // A slow first event (a long prompt, a model thinking before its first chunk) does not hold
    // the client's headers back for long: past the wait, the stream is committed and an error
    // arriving later ends it with `response.failed`. Waiting is upstream time, not the gateway's.
    let waiting = std::time::Instant::now();
    let peeked = tokio::time::timeout(PEEK_WAIT, stream.next()).await;
    crate::ops::observe::upstream_waited(waiting.elapsed());
    let Ok(first) = peeked else {
        return Ok(stream);
    };
    if let Some(Ok(Chunk::Event(event))) = &first
        && let Some(data) = &event.data
        && let Some(error) = first_event_error(dialect, profile, event.event.as_deref(), data)
    {
        return Err(GatewayError::Upstream(error));
    }
    Ok(match first {
        Some(first) => Box::pin(stream::once(async move { first }).chain(stream)),
        None => stream,
    })
}

/// How long the gateway waits for a stream's first event before committing to it.
const PEEK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The error an upstream's first event reports, if it is one.
fn first_event_error(
    dialect: Dialect,
    profile: &Profile,
    event: Option<&str>,
    data: &str,
) -> Option<toolbridge_providers::Error> {
    match Decoder::new(dialect, profile) {
        Some(mut decoder) => decoder
            .on_event(profile, event, data, &mut Vec::new(), &mut Vec::new())
            .err()
            .filter(|e| matches!(e, toolbridge_providers::Error::Upstream(_))),
        None => toolbridge_providers::responses::relay::error_event(data)
            .map(|e| toolbridge_providers::Error::Upstream(Box::new(e))),
    }
}
