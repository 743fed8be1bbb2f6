//! The gateway's side of a dialect's decoding: a stream decoder with call ids unique to the
//! answer, the whole-answer decode with its errors as the gateway's, and the peek at a stream's
//! first event before anything is sent to the client. What an event means is the dialect's
//! (`toolbridge_providers::dialect`).

use futures::{StreamExt, stream};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_providers::dialect::Dialect;
use toolbridge_providers::dialect::Provenance;
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::Diagnostic;

use crate::error::GatewayError;
use crate::platform::ids;

use toolbridge_providers::dialect::Decoder;

use super::chunks::{Chunk, UpstreamSse, upstream_sse};

/// The decoder of a stream of `dialect`. Calls without an id get one unique to the answer: a
/// client keys calls by id across turns. `provenance` seals reasoning an endpoint returns as
/// plaintext and wants back.
pub(in crate::http::responses) fn decoder(
    dialect: Dialect,
    profile: &Profile,
    provenance: Provenance<'_>,
) -> Decoder {
    dialect.decoder(profile, ids::new("call"), Some(provenance))
}

/// A fresh decoder of the same dialect, for the next round's stream.
pub(in crate::http::responses) fn restarted(decoder: &Decoder, profile: &Profile) -> Decoder {
    decoder.restarted(profile, ids::new("call"))
}

/// Decodes a whole answer in the provider's dialect into upstream events (`provenance` as for
/// [`decoder`]).
pub(crate) fn decode_whole(
    dialect: Dialect,
    profile: &Profile,
    body: &[u8],
    provenance: Option<Provenance<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<UpstreamEvent>, GatewayError> {
    dialect
        .decode_whole(profile, body, &ids::new("call"), provenance, diagnostics)
        .map_err(GatewayError::Upstream)
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
    crate::platform::ops::observe::upstream_waited(waiting.elapsed());
    let Ok(first) = peeked else {
        return Ok(stream);
    };
    if let Some(Ok(Chunk::Event(event))) = &first
        && let Some(data) = &event.data
        && let Some(error) = dialect.classify_first_event(profile, event.event.as_deref(), data)
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
