//! Provider builtin calls the gateway answers itself (Kimi's `$web_search`): the next round of
//! the same request, with the calls echoed back as their results.

use std::sync::Arc;

use axum::body::Bytes;
use toolbridge_providers::dialect::Outgoing;

use crate::error::GatewayError;

/// The most rounds of provider builtin calls answered within one response.
pub(in crate::http::responses) const MAX_ECHO_ROUNDS: u8 = 4;

/// What a response needs to answer provider builtin calls itself (Kimi's `$web_search`): the
/// request so far, in a dialect that can append echoes, and where to send it again.
pub(in crate::http::responses) struct EchoRounds {
    pub(in crate::http::responses) upstreams: Arc<crate::upstream::Upstreams>,
    pub(in crate::http::responses) provider: crate::config::Provider,
    pub(in crate::http::responses) affinity: crate::upstream::Affinity,
    pub(in crate::http::responses) upstream_model: String,
    pub(in crate::http::responses) outgoing: Outgoing,
    pub(in crate::http::responses) left: u8,
}

impl EchoRounds {
    /// Appends the builtin calls and their echoed results (written by the dialect), and sends
    /// the request again.
    pub(super) async fn send(
        &mut self,
        echoes: Vec<toolbridge_core::assemble::EchoCall>,
    ) -> Result<(reqwest::Response, Bytes), GatewayError> {
        self.left = self.left.saturating_sub(1);
        if !self.outgoing.append_echoes(echoes) {
            return Err(GatewayError::UpstreamUnreachable(format!(
                "the {} dialect cannot answer builtin calls",
                self.provider.dialect.as_str()
            )));
        }
        let payload = Bytes::from(self.outgoing.payload());
        let response = self
            .upstreams
            .send(
                &self.provider,
                &self.upstream_model,
                &payload,
                self.outgoing.stream(),
                self.affinity,
            )
            .await?;
        Ok((response, payload))
    }
}
