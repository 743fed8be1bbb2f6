//! The outgoing request of one target in its provider's dialect: built from the canonical
//! request, the plan and the profile (or, for a passthrough, the client's raw body), written out
//! as the body sent, and grown by the continuation exchanges the dialect supports.

use toolbridge_core::assemble::EchoCall;
use toolbridge_core::canonical::CanonicalRequest;
use toolbridge_core::plan::ToolPlan;
use toolbridge_wire::anthropic::MessagesRequest;
use toolbridge_wire::chat::ChatRequest;
use toolbridge_wire::gemini::GenerateContentRequest;
use toolbridge_wire::responses::{CreateResponse, Diagnostic};

use super::Dialect;
use crate::profile::Profile;
use crate::responses::request::{Passthrough, Raw};

/// What a request for one target is built from.
pub struct Source<'a> {
    /// The client's request, history expanded.
    pub req: &'a CreateResponse,
    /// The client's request exactly as it came, when a Responses target may need it: a
    /// passthrough starts from it (typed parsing would write absent optional fields as `null`).
    pub raw: Option<&'a Raw>,
    /// The same request normalised (every other dialect translates it).
    pub canonical: &'a CanonicalRequest,
    /// The gateway stores the response (a Responses upstream is asked for encrypted reasoning).
    pub stored: bool,
    /// Whether an `encrypted_content` blob was sealed by the gateway (a passthrough drops it:
    /// the upstream cannot open it).
    pub sealed_by_gateway: &'a dyn Fn(&str) -> bool,
    /// The target's provider and the gateway's sealer, for a Responses upstream whose own
    /// plaintext reasoning the decoder sealed (`None`: every gateway blob is left out).
    pub provenance: Option<crate::responses::reasoning::Provenance<'a>>,
}

/// The request for one target, in its provider's dialect.
#[derive(Debug, Clone)]
pub enum Outgoing {
    Chat(ChatRequest),
    Anthropic(MessagesRequest),
    /// Gemini's body has no stream flag: streaming is chosen by the URL.
    Gemini {
        request: GenerateContentRequest,
        stream: bool,
    },
    /// A native Responses request: the client's own, passed through.
    Responses(serde_json::Value),
}

impl Dialect {
    /// Translates the request into this dialect's, sending `upstream_model`, with the tools and
    /// names of `plan`. Every lossy decision is appended to `diagnostics`.
    pub fn build(
        self,
        source: &Source<'_>,
        plan: &ToolPlan,
        profile: &Profile,
        upstream_model: &str,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Outgoing {
        if self.sends_client_request() {
            return self.translate(
                source,
                source.canonical,
                plan,
                profile,
                upstream_model,
                diagnostics,
            );
        }
        crate::fields::report_untranslated(source.req, diagnostics);
        // Images the provider cannot take become placeholders; a body over the provider's size
        // gets its images downscaled, then its oldest images left out (`media`).
        let canonical = crate::media::without_unsupported(source.canonical, profile, diagnostics);
        let cap = profile.max_request_bytes;
        if cap == 0 || !crate::media::has_images(&canonical) {
            return self.translate(
                source,
                &canonical,
                plan,
                profile,
                upstream_model,
                diagnostics,
            );
        }
        let mut first = Vec::new();
        let out = self.translate(
            source,
            &canonical,
            plan,
            profile,
            upstream_model,
            &mut first,
        );
        let len = out.payload().len() as u64;
        let mut built_len = |c: &CanonicalRequest| {
            let out = self.translate(source, c, plan, profile, upstream_model, &mut Vec::new());
            out.payload().len() as u64
        };
        match crate::media::fit_size(&canonical, len, cap, &mut built_len, diagnostics) {
            Some(fitted) => {
                self.translate(source, &fitted, plan, profile, upstream_model, diagnostics)
            }
            None => {
                diagnostics.append(&mut first);
                out
            }
        }
    }

    /// The body of `canonical` (the source's, or one with its images fitted); a native
    /// Responses upstream's is the client's own request, passed through.
    fn translate(
        self,
        source: &Source<'_>,
        canonical: &CanonicalRequest,
        plan: &ToolPlan,
        profile: &Profile,
        upstream_model: &str,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Outgoing {
        match self {
            Self::Chat => Outgoing::Chat(crate::chat::request::build(
                canonical,
                plan,
                profile,
                upstream_model,
                diagnostics,
            )),
            Self::Anthropic => Outgoing::Anthropic(crate::anthropic::request::build(
                canonical,
                plan,
                profile,
                upstream_model,
                diagnostics,
            )),
            Self::Gemini => Outgoing::Gemini {
                request: crate::gemini::request::build(
                    canonical,
                    plan,
                    profile,
                    upstream_model,
                    diagnostics,
                ),
                stream: canonical.stream,
            },
            Self::Responses => {
                let mut body = crate::responses::request::build(
                    source.req,
                    source.raw,
                    plan,
                    profile,
                    &Passthrough {
                        upstream_model,
                        keep_reasoning: source.stored,
                        sealed_by_gateway: source.sealed_by_gateway,
                        provenance: source.provenance,
                    },
                    diagnostics,
                );
                body["stream"] = serde_json::Value::Bool(canonical.stream);
                Outgoing::Responses(body)
            }
        }
    }
}

impl Outgoing {
    /// Whether the answer is asked for as a stream.
    pub fn stream(&self) -> bool {
        match self {
            Self::Chat(chat) => chat.stream,
            Self::Anthropic(messages) => messages.stream,
            Self::Gemini { stream, .. } => *stream,
            Self::Responses(body) => body["stream"] == true,
        }
    }

    /// The body sent upstream, as JSON.
    pub fn payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_hint());
        let json = match self {
            Self::Chat(chat) => serde_json::to_writer(&mut out, chat),
            Self::Anthropic(messages) => serde_json::to_writer(&mut out, messages),
            Self::Gemini { request, .. } => serde_json::to_writer(&mut out, request),
            Self::Responses(body) => serde_json::to_writer(&mut out, body),
        };
        match json {
            Ok(()) => out,
            Err(_) => Vec::new(),
        }
    }

    /// About the size of [`Outgoing::payload`], so that its buffer is allocated once: a Chat
    /// body's texts and schemas plus room for the rest; 4 KiB for the other dialects.
    fn size_hint(&self) -> usize {
        let Self::Chat(chat) = self else {
            return 4096;
        };
        let texts: usize = chat
            .messages
            .iter()
            .map(|m| match &m.content {
                Some(serde_json::Value::String(text)) => text.len() + 64,
                Some(other) => 256 * other.as_array().map_or(1, Vec::len),
                None => 256,
            })
            .sum();
        let tools: usize = chat
            .tools
            .iter()
            .flatten()
            .map(|t| {
                t.function.as_ref().map_or(256, |f| {
                    256 + f.description.as_ref().map_or(0, String::len)
                        + f.parameters.as_ref().map_or(0, |p| p.text().len())
                })
            })
            .sum();
        (1024 + texts + tools).min(64 * 1024 * 1024)
    }

    /// Whether a usage estimate reads this body should the upstream report no usage: every
    /// dialect, one rule (an Anthropic or Gemini stream cut before its usage arrived, or a
    /// server that never sends it, still gets usage, marked as an estimate).
    pub fn estimates_usage(&self) -> bool {
        match self {
            Self::Chat(_) | Self::Anthropic(_) | Self::Gemini { .. } | Self::Responses(_) => true,
        }
    }

    /// Whether provider builtin calls can be answered by echoing them back
    /// ([`Outgoing::append_echoes`]): a Chat round trip; for other dialects such calls stay
    /// ordinary function calls.
    pub fn echoes_builtins(&self) -> bool {
        matches!(self, Self::Chat(_))
    }

    /// Appends provider builtin calls and their echoed results (Kimi's `$web_search`) to the
    /// conversation, for the next round. False, and nothing appended, when the dialect has no
    /// such exchange.
    pub fn append_echoes(&mut self, echoes: Vec<EchoCall>) -> bool {
        match self {
            Self::Chat(chat) => {
                crate::chat::echo::append_echoes(chat, echoes);
                true
            }
            Self::Anthropic(_) | Self::Gemini { .. } | Self::Responses(_) => false,
        }
    }
}
