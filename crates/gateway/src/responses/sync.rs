//! A non-streamed answer: the whole upstream response through the same state machine.

use super::*;

pub(super) async fn sync_response(
    upstream: reqwest::Response,
    mut assembler: Assembler,
    profile: &Profile,
    mut payload: Bytes,
    mut echo: Option<EchoRounds>,
) -> Result<toolbridge_wire::responses::Response, GatewayError> {
    let mut upstream = upstream;
    let mut sink = Vec::new();
    loop {
        let body = read_capped(upstream, MAX_RESPONSE_BODY).await?;
        let chat: ChatResponse = serde_json::from_slice(&body).map_err(|e| {
            GatewayError::Upstream(toolbridge_providers::Error::Decode {
                message: format!("not a Chat Completions response: {e}"),
            })
        })?;
        if let Some(error) = errors::in_body(&chat) {
            return Err(GatewayError::Upstream(
                toolbridge_providers::Error::Upstream(Box::new(error)),
            ));
        }
        let mut diagnostics = Vec::new();
        let events = chat_response::decode(profile, chat, &mut diagnostics);
        for d in diagnostics {
            assembler.add_diagnostic(d);
        }
        for event in events {
            assembler.on_event(event, &mut sink);
            sink.clear();
        }
        let Some(rounds) = echo.as_mut().filter(|r| r.left > 0) else {
            break;
        };
        let Some(echoes) = assembler.take_echoes(&mut sink) else {
            break;
        };
        sink.clear();
        (upstream, payload) = rounds.send(echoes).await?;
    }
    estimate_missing_usage(&mut assembler, &payload, &mut sink);
    Ok(assembler.finish(time::now(), &mut sink))
}
