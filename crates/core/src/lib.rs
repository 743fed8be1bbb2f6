//! Pure planning, translation and stream reconstruction: the heart of toolbridge.
//!
//! Everything here is a function of values. The gateway parses a Responses request into wire
//! types; [`request::normalize`] turns it into a provider-neutral [`canonical::CanonicalRequest`]
//! (validating it and recording every lossy decision as a diagnostic); a provider dialect turns
//! that into its own request. On the way back the provider turns its output into
//! [`events::UpstreamEvent`]s, and one [`assemble::Assembler`] per response turns those into
//! Responses stream events and the final response object, for streamed and non-streamed
//! requests alike.
//!
//! This crate does no I/O, reads no clock and no environment, and knows no HTTP framework: ids
//! and timestamps come in as arguments.
//!
//! # The library path
//!
//! Plan a Codex-like request's tools for what a provider accepts, then assemble a streamed
//! answer, given as neutral events, into Responses stream events and the final response. (The
//! provider presets and the dialects that translate a planned request into a provider's body,
//! and decode its stream into these events, are in `toolbridge-providers`, whose crate docs
//! show the whole path with a preset.)
//!
//! ```
//! use std::sync::Arc;
//!
//! use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
//! use toolbridge_core::events::{FinishReason, ToolCallDelta, UpstreamEvent};
//! use toolbridge_core::plan::{Decision, ToolCapabilities, plan};
//! use toolbridge_core::request::{Limits, normalize};
//! use toolbridge_wire::responses::{CreateResponse, EventKind, OutputItem, ResponseStatus};
//!
//! // What Codex sends, cut down: a function, a freeform tool and the local shell.
//! let req: CreateResponse = serde_json::from_value(serde_json::json!({
//!     "model": "m",
//!     "stream": true,
//!     "input": [{"role": "user", "content": "Read the README."}],
//!     "tools": [
//!         {"type": "function", "name": "read_file",
//!          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
//!         {"type": "custom", "name": "apply_patch"},
//!         {"type": "local_shell"}
//!     ]
//! }))?;
//! let canonical = normalize(&req, &Limits::default())?;
//!
//! // A provider that takes functions only (a generic Chat Completions server): the function
//! // goes as declared, the other two are degraded to functions.
//! let caps = ToolCapabilities::default();
//! let plan = plan(&canonical.tools, canonical.tool_choice.as_ref(), &caps)?;
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
//! // The answer, as a dialect decodes it: some text, then a call of `read_file`.
//! let meta = ResponseMeta { id: "resp_1".to_owned(), created_at: 1, stored: false };
//! let options = AssembleOptions { names: Arc::new(plan.names.clone()), ..Default::default() };
//! let mut assembler = Assembler::new(skeleton(&req, &meta), options);
//! let mut events = Vec::new();
//! assembler.start(&mut events);
//! for event in [
//!     UpstreamEvent::Text("Reading it.".to_owned()),
//!     UpstreamEvent::ToolCall(ToolCallDelta {
//!         index: Some(0),
//!         id: Some("call_1".to_owned()),
//!         name: Some("read_file".to_owned()),
//!         arguments: r#"{"path":"README.md"}"#.to_owned(),
//!      item_id: None, }),
//!     UpstreamEvent::Finish(FinishReason::ToolCalls),
//! ] {
//!     assembler.on_event(event, &mut events);
//! }
//! let response = assembler.finish(2, &mut events);
//!
//! assert_eq!(response.status, ResponseStatus::Completed);
//! assert!(matches!(events.first().map(|e| &e.kind), Some(EventKind::Created { .. })));
//! assert!(matches!(events.last().map(|e| &e.kind), Some(EventKind::Completed { .. })));
//! match response.output.as_slice() {
//!     [OutputItem::Message(message), OutputItem::FunctionCall(call)] => {
//!         assert_eq!(message.status, "completed");
//!         assert_eq!((call.name.as_str(), call.call_id.as_str()), ("read_file", "call_1"));
//!         assert_eq!(call.arguments, r#"{"path":"README.md"}"#);
//!     }
//!     other => panic!("unexpected output: {other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod assemble;
pub mod canonical;
pub mod contract;
pub mod diagnostics;
pub mod error;
pub mod events;
pub mod plan;
pub mod reasoning;
pub mod repair;
pub mod request;
pub mod restore;

pub use error::Error;
