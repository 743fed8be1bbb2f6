//! The dialect a provider speaks, as one closed unit: everything the gateway needs to know of a
//! dialect is a method here, so the gateway never matches on it.
//!
//! - naming: [`Dialect::parse`], [`Dialect::NAMES`], [`Dialect::as_str`], the preset a dialect
//!   starts from;
//! - the HTTP shape, as data ([`Dialect::http`]: path with the model and stream slots filled, the
//!   auth style, fixed headers) and the mapping of HTTP error answers
//!   ([`Dialect::map_http_error`]);
//! - the outgoing body ([`Dialect::build`] → [`Outgoing`], in `outgoing`), and the continuation
//!   exchanges a dialect can append to it ([`Outgoing::append_echoes`]);
//! - decoding (`decode`): one stream [`Decoder`] with one [`Flow`], the whole-answer decode, and
//!   the classification of a stream's first event (the peek before commit).
//!
//! Not here: sending (the gateway's `upstream`), and what each dialect does in detail (its own
//! folder: `chat`, `anthropic`, `gemini`, `responses`). Adding a dialect means one folder, one
//! arm in each `match` of this module and its siblings, and one preset.

mod decode;
mod outgoing;

/// What a token estimate counts of a body sent, in any dialect.
pub use crate::chat::prompt::PromptTexts;
/// Who a target's provider is, for reasoning the gateway sealed or seals for it.
pub use crate::responses::reasoning::Provenance;
/// The client's request exactly as it came, which a Responses request starts from.
pub use crate::responses::request::Raw;
pub use decode::{Decoder, Flow};
pub use outgoing::{Outgoing, Source};

use crate::UpstreamError;

/// The `anthropic-version` header sent to Anthropic providers.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The wire dialect a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// OpenAI Chat Completions: `POST {base_url}/chat/completions`, `Authorization: Bearer`.
    #[default]
    Chat,
    /// Anthropic Messages: `POST {base_url}/messages`, `x-api-key` and `anthropic-version`.
    Anthropic,
    /// Gemini generateContent: `POST {base_url}/models/{model}:generateContent` (streamed:
    /// `:streamGenerateContent?alt=sse`), `x-goog-api-key`.
    Gemini,
    /// A native Responses upstream (OpenAI or any Responses server): `POST {base_url}/responses`,
    /// `Authorization: Bearer`. The request is the client's own; the answer is decoded like
    /// every dialect's, its items carried as they came.
    Responses,
}

/// How the provider's key is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The key alone in this header.
    Header(&'static str),
}

/// A dialect's HTTP request shape for one model and streaming mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpShape {
    /// The path after the base URL.
    pub path: String,
    pub auth: Auth,
    /// Headers every request of the dialect carries, key or not.
    pub headers: &'static [(&'static str, &'static str)],
}

impl Dialect {
    /// The names accepted in the config file's `dialect` field.
    pub const NAMES: &'static [&'static str] = &["chat", "anthropic", "gemini", "responses"];

    /// Reads a config file's `dialect` value.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "chat" => Some(Self::Chat),
            "anthropic" => Some(Self::Anthropic),
            "gemini" => Some(Self::Gemini),
            "responses" => Some(Self::Responses),
            _ => None,
        }
    }

    /// The dialect preset `preset` is written for, as its file says; Chat for an unknown name.
    pub fn of_preset(preset: &str) -> Self {
        crate::profile::Profile::preset_dialect(preset)
            .and_then(|d| Self::parse(&d))
            .unwrap_or(Self::Chat)
    }

    /// The preset a provider of this dialect starts from when its config names none.
    pub fn default_preset(self) -> &'static str {
        match self {
            Self::Chat => "generic",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Responses => "responses",
        }
    }

    /// The name as written in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Responses => "responses",
        }
    }

    /// Whether the body sent is the client's own request, not one built from the canonical
    /// request (a native Responses upstream): tools, efforts and tool output parts go as the
    /// client declared them, the gateway cannot continue the request with rounds of its own
    /// (its tool loop, a re-ask), and the client's JSON is kept for it. The answer is decoded
    /// like any dialect's.
    pub fn sends_client_request(self) -> bool {
        matches!(self, Self::Responses)
    }

    /// Whether the provider checks signed provider state on replayed calls (Anthropic's signed
    /// `thinking`, Gemini's `thoughtSignature`), which the gateway then keeps by `call_id`.
    pub fn checks_signatures(self) -> bool {
        matches!(self, Self::Anthropic | Self::Gemini)
    }

    /// Whether the profile's Chat-shaped rules (its `tool_choice` forms and parameter fields)
    /// describe this dialect's translation.
    pub fn reads_chat_profile(self) -> bool {
        matches!(self, Self::Chat)
    }

    /// Where a request for `model` goes and how it is authenticated. Gemini names the model and
    /// the streaming mode in the path; the other dialects name them in the body.
    pub fn http(self, model: &str, stream: bool) -> HttpShape {
        let (path, auth, headers): (String, Auth, &'static [(&str, &str)]) = match self {
            Self::Chat => ("/chat/completions".to_owned(), Auth::Bearer, &[]),
            Self::Anthropic => (
                "/messages".to_owned(),
                Auth::Header("x-api-key"),
                &[("anthropic-version", ANTHROPIC_VERSION)],
            ),
            Self::Gemini if stream => (
                format!(
                    "/models/{}:streamGenerateContent?alt=sse",
                    path_segment(model)
                ),
                Auth::Header("x-goog-api-key"),
                &[],
            ),
            Self::Gemini => (
                format!("/models/{}:generateContent", path_segment(model)),
                Auth::Header("x-goog-api-key"),
                &[],
            ),
            Self::Responses => ("/responses".to_owned(), Auth::Bearer, &[]),
        };
        HttpShape {
            path,
            auth,
            headers,
        }
    }

    /// An HTTP error answer (status, body, `Retry-After`) as what the client sees.
    pub fn map_http_error(
        self,
        status: u16,
        body: &[u8],
        retry_after: Option<String>,
    ) -> UpstreamError {
        match self {
            // A Responses server answers errors in OpenAI's shape, as Chat servers do.
            Self::Chat | Self::Responses => {
                crate::chat::errors::from_http(status, body, retry_after)
            }
            Self::Anthropic => crate::anthropic::errors::from_http(status, body, retry_after),
            Self::Gemini => crate::gemini::errors::from_http(status, body, retry_after),
        }
    }
}

/// `text` as one URL path segment: a model name may come from the client (a `*` route sends
/// the requested name), so `/`, `?`, `#`, `%` and anything else but ASCII letters, digits and
/// `*-._` are percent-encoded and can never change the path or add a query (the set of
/// `application/x-www-form-urlencoded`, with a space as `%20`).
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'*' | b'-' | b'.' | b'_') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_model_name_stays_one_path_segment() {
        assert_eq!(
            Dialect::Gemini.http("gemini-2.5-flash", true).path,
            "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            Dialect::Gemini.http("../../v1/x?key=1#f", false).path,
            "/models/..%2F..%2Fv1%2Fx%3Fkey%3D1%23f:generateContent"
        );
        assert_eq!(
            Dialect::Gemini.http("a b%", false).path,
            "/models/a%20b%25:generateContent"
        );
        assert_eq!(
            Dialect::Gemini.http("é~", false).path,
            "/models/%C3%A9%7E:generateContent"
        );
    }

    #[test]
    fn every_name_parses_back_to_its_dialect() {
        for name in Dialect::NAMES {
            let dialect = Dialect::parse(name);
            assert_eq!(dialect.map(Dialect::as_str), Some(*name));
        }
        assert_eq!(Dialect::parse("openai"), None);
        assert_eq!(Dialect::of_preset("gemini"), Dialect::Gemini);
        assert_eq!(Dialect::of_preset("deepseek"), Dialect::Chat);
    }

    #[test]
    fn each_dialect_sends_its_key_its_own_way() {
        assert_eq!(Dialect::Chat.http("m", true).auth, Auth::Bearer);
        assert_eq!(Dialect::Responses.http("m", true).path, "/responses");
        let anthropic = Dialect::Anthropic.http("m", false);
        assert_eq!(anthropic.auth, Auth::Header("x-api-key"));
        assert_eq!(
            anthropic.headers,
            &[("anthropic-version", ANTHROPIC_VERSION)]
        );
        assert_eq!(
            Dialect::Gemini.http("m", false).auth,
            Auth::Header("x-goog-api-key")
        );
    }
}
