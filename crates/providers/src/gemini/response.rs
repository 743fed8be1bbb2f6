//! Decoding a whole `generateContent` answer into the same events a stream produces, through the
//! same [`GeminiDecoder`], so both paths share one reconstruction.

use toolbridge_core::events::UpstreamEvent;
use toolbridge_wire::gemini::GenerateContentResponse;
use toolbridge_wire::responses::Diagnostic;

use super::stream::GeminiDecoder;
use crate::Error;

/// Decodes a whole answer; an `error` object in it is an `Err`. Calls without an id are named
/// `<call_prefix>_<n>` (see [`GeminiDecoder::with_call_prefix`]).
pub fn decode(
    response: GenerateContentResponse,
    call_prefix: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<UpstreamEvent>, Error> {
    let mut decoder = GeminiDecoder::with_call_prefix(call_prefix);
    let mut events = Vec::new();
    decoder.on_response(response, &mut events, diagnostics)?;
    Ok(events)
}
