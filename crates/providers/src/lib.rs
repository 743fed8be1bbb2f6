//! Provider dialects and their presets.
//!
//! A dialect turns a [`toolbridge_core::canonical::CanonicalRequest`] into its own request, and
//! its own output (whole or streamed) into [`toolbridge_core::events::UpstreamEvent`]s. Each
//! dialect lives in a folder with the same shape: `request` (translation), `stream` (chunk
//! decoding), `response` (non-streamed decoding) and `errors` (upstream error bodies).
//!
//! [`dialect::Dialect`] is the face of every dialect as one closed unit: its names, its HTTP
//! shape as data, its outgoing body, its decoders and error mapping, all methods, so its users
//! never match on the dialect.
//!
//! Provider differences are data: a [`profile::Profile`] says what a provider accepts, and the
//! presets in [`profile`] are the profiles of the providers we know. This crate does no I/O.
//!
//! # The library path, with a preset
//!
//! A Codex-like request planned for the `deepseek` preset's profile, translated into a Chat
//! Completions body, and its streamed answer decoded and assembled into Responses stream events
//! and the final response:
//!
//! ```
//! use std::sync::Arc;
//!
//! use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
//! use toolbridge_core::plan::{Decision, plan};
//! use toolbridge_core::request::{Limits, normalize};
//! use toolbridge_providers::chat::{request, stream};
//! use toolbridge_providers::profile::Profile;
//! use toolbridge_wire::responses::{CreateResponse, EventKind, OutputItem, ResponseStatus};
//!
//! let req: CreateResponse = serde_json::from_value(serde_json::json!({
//!     "model": "deepseek-chat",
//!     "stream": true,
//!     "instructions": "You are a coding agent.",
//!     "input": [{"role": "user", "content": "Read the README."}],
//!     "tools": [
//!         {"type": "function", "name": "read_file", "strict": true,
//!          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
//!         {"type": "custom", "name": "apply_patch"},
//!         {"type": "local_shell"}
//!     ]
//! }))?;
//! let canonical = normalize(&req, &Limits::default())?;
//!
//! // Plan the tools for the preset's profile.
//! let profile = Profile::preset("deepseek").ok_or("no such preset")?;
//! let plan = plan(&canonical.tools, canonical.tool_choice.as_ref(), &profile.tools)?;
//! let decisions: Vec<_> = plan.entries.iter().map(|e| (e.kind.as_str(), e.decision)).collect();
//! assert_eq!(
//!     decisions,
//!     [
//!         ("function", Decision::Native),
//!         ("custom", Decision::Degraded),
//!         ("local_shell", Decision::Degraded),
//!     ]
//! );
//!
//! // Translate: every tool goes upstream as a function, without `strict` (DeepSeek lacks it).
//! let mut diagnostics = canonical.diagnostics.clone();
//! let body = request::build(&canonical, &plan, &profile, "deepseek-chat", &mut diagnostics);
//! let body = serde_json::to_value(&body)?;
//! let names: Vec<_> = body["tools"]
//!     .as_array()
//!     .ok_or("no tools")?
//!     .iter()
//!     .map(|t| t["function"]["name"].as_str().unwrap_or_default())
//!     .collect();
//! assert_eq!(names, ["read_file", "apply_patch", "local_shell"]);
//! assert_eq!(body["tools"][0]["function"].get("strict"), None);
//! assert_eq!(body["messages"][0]["role"], "system");
//! assert_eq!(body["stream"], true);
//!
//! // Decode the streamed answer into neutral events, and assemble them.
//! let meta = ResponseMeta { id: "resp_1".to_owned(), created_at: 1, stored: false };
//! let options = AssembleOptions { names: Arc::new(plan.names.clone()), ..Default::default() };
//! let mut assembler = Assembler::new(skeleton(&req, &meta), options);
//! let mut decoder = stream::ChunkDecoder::new(&profile);
//! let mut events = Vec::new();
//! assembler.start(&mut events);
//! for data in [
//!     r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Reading it."}}]}"#,
//!     r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"README.md\"}"}}]}}]}"#,
//!     r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
//!     "[DONE]",
//! ] {
//!     let mut upstream = Vec::new();
//!     let flow = decoder.on_data(&profile, data, &mut upstream, &mut diagnostics)?;
//!     for event in upstream {
//!         assembler.on_event(event, &mut events);
//!     }
//!     if flow == stream::Flow::Done {
//!         break;
//!     }
//! }
//! let response = assembler.finish(2, &mut events);
//!
//! assert_eq!(response.status, ResponseStatus::Completed);
//! assert!(matches!(events.last().map(|e| &e.kind), Some(EventKind::Completed { .. })));
//! match response.output.as_slice() {
//!     [OutputItem::Message(_), OutputItem::FunctionCall(call)] => {
//!         assert_eq!((call.name.as_str(), call.call_id.as_str()), ("read_file", "call_1"));
//!         assert_eq!(call.arguments, r#"{"path":"README.md"}"#);
//!     }
//!     other => panic!("unexpected output: {other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod anthropic;
#[cfg(test)]
mod cache_tests;
pub mod chat;
mod degraded;
pub mod dialect;
pub mod error;
pub mod fields;
mod first_turn;
pub mod gemini;
pub mod media;
mod native;
pub mod profile;
pub mod responses;
mod tool_output;

pub use error::{Error, UpstreamError};
