//! Reconstruction: one explicit state machine per response, from [`UpstreamEvent`]s to
//! Responses stream events and the final response object.
//!
//! The same machine serves streamed and non-streamed requests (a non-streamed request feeds the
//! whole upstream response through it and keeps only the final object), so both paths produce
//! identical items.
//!
//! # The face a transport needs
//!
//! A transport (the SSE stream, the whole-answer path, the WebSocket transport to come) needs
//! four methods, after [`Assembler::new`] on a [`skeleton`]:
//!
//! - [`Assembler::start`]: `response.created` and `response.in_progress`, once the upstream
//!   accepted the request;
//! - [`Assembler::on_event`]: one [`UpstreamEvent`] in, the stream events it makes out;
//! - [`Assembler::finish`] (or [`Assembler::finish_unterminated`] for a stream that ended with
//!   neither a finish reason nor `[DONE]`): closes every open item and emits the one terminal
//!   event;
//! - [`Assembler::fail`]: ends the response `failed`; open items are not completed.
//!
//! Every method writes into a caller's `Vec<StreamEvent>`; the machine itself does no I/O.
//!
//! # What the gateway's round policy uses today
//!
//! The gateway's tool loops (gateway tools, echoed builtins, repair review and re-ask, the step
//! limit) reach further in, between upstream rounds of one response. These methods stay public
//! until a round driver absorbs them: [`Assembler::take_echoes`],
//! [`Assembler::take_gateway_calls`], [`Assembler::has_client_calls`],
//! [`Assembler::has_gateway_calls`], [`Assembler::review_calls`], [`Assembler::take_reask`],
//! [`Assembler::ends_cut_off`], [`Assembler::next_round`], [`Assembler::stop_incomplete`]
//! (in `rounds`); [`Assembler::hosted_start`], [`Assembler::hosted_finish`],
//! [`Assembler::gateway_item`] (in `hosted`); [`Assembler::needs_usage`],
//! [`Assembler::produced_text`] (in `usage`); and [`Assembler::item_id`],
//! [`Assembler::current`], [`Assembler::add_diagnostic`] (in `machine`).
//!
//! # Files
//!
//! `skeleton` (the response before any output, request defaults), `machine` (the struct, the
//! face, the open-item bookkeeping), `outcome` (the terminal status), `text` (message and
//! reasoning items), `calls` (tool calls as they stream in), `closing` (one closing function per
//! call item kind), `hosted` (items the gateway shows for calls it runs), `rounds` (what the
//! gateway's loops use between rounds), `usage` (usage across rounds, produced text),
//! `relayed` (items an upstream produced in the client's vocabulary, shown as they came).
//!
//! *Invariants*: `sequence_number` strictly increases from 0; there is exactly one terminal
//! event and nothing after it; an item's `output_item.done` is emitted only when the item is
//! final, so a tool call is completed only when the upstream has finished (its arguments can no
//! longer grow); the ids in events are the ids in the final response.
//!
//! *Repair* ([`AssembleOptions::repair`]): when on, every client call is checked and repaired
//! through [`ToolSchemas::restore_repaired`] when it is complete, and its arguments are held
//! until then (no `function_call_arguments.delta` before the upstream finished: a client must
//! never see text that is later changed); text and reasoning still stream live. Each fix is a
//! diagnostic. [`Assembler::review_calls`] reports the calls still invalid at the end of a round,
//! and [`Assembler::take_reask`] takes a round's calls back, unshown, for a hidden re-ask; what
//! to do with an invalid call is the caller's policy.
//!
//! [`UpstreamEvent`]: crate::events::UpstreamEvent
//! [`ToolSchemas::restore_repaired`]: crate::repair::ToolSchemas::restore_repaired

mod calls;
mod closing;
mod hosted;
mod machine;
mod outcome;
mod relayed;
mod rounds;
mod skeleton;
mod text;
mod usage;

pub use hosted::{Hosted, HostedSlot};
pub use machine::{AssembleOptions, Assembler};
pub use rounds::{EchoCall, GatewayCall, InvalidCall, Reask, RoundOutput};
pub use skeleton::{ResponseMeta, conversation_id, skeleton};

/// Error codes of failed responses produced here.
pub mod codes {
    /// The upstream ended without producing anything.
    pub const EMPTY_RESPONSE: &str = "empty_upstream_response";
    /// The final text does not satisfy `text.format`.
    pub const OUTPUT_VALIDATION_FAILED: &str = "output_validation_failed";
    /// The conversation does not fit the model's context window.
    pub const CONTEXT_LENGTH_EXCEEDED: &str = "context_length_exceeded";
    /// A tool call stayed invalid after repair, under the `fail` policy.
    pub const INVALID_TOOL_CALL: &str = "invalid_tool_call";
    /// The `incomplete_details.reason` of an answer the upstream cut off: it ended with neither a
    /// finish reason nor its dialect's end marker.
    pub const UPSTREAM_TRUNCATED: &str = "upstream_truncated";

    /// The codes OpenAI documents for `error.code` of a failed response, plus
    /// `context_length_exceeded`, which OpenAI sends for a context overflow and Codex reads.
    pub const DOCUMENTED: &[&str] = &[
        "server_error",
        "rate_limit_exceeded",
        "invalid_prompt",
        "vector_store_timeout",
        "invalid_image",
        "invalid_image_format",
        "invalid_base64_image",
        "invalid_image_url",
        "image_too_large",
        "image_too_small",
        "image_parse_error",
        "image_content_policy_violation",
        "invalid_image_mode",
        "image_file_too_large",
        "unsupported_image_media_type",
        "empty_image_file",
        "failed_to_download_image",
        "image_file_not_found",
        "context_length_exceeded",
    ];

    /// The documented code a failed response shows for the gateway's finer `code`: itself when
    /// documented; `invalid_prompt` for a request the upstream refused as it is (retrying it
    /// cannot help); `server_error` for everything else.
    pub fn public_code(code: &str) -> &'static str {
        if let Some(known) = DOCUMENTED.iter().find(|c| **c == code) {
            return known;
        }
        match code {
            "upstream_bad_request" | "upstream_request_too_large" => "invalid_prompt",
            _ => "server_error",
        }
    }

    /// The `error` of a failed response: the documented code, and the finer one beside it in
    /// `toolbridge_code` when they differ.
    pub fn response_error(
        code: &str,
        message: String,
    ) -> toolbridge_wire::responses::ResponseError {
        let public = public_code(code);
        toolbridge_wire::responses::ResponseError {
            code: public.to_owned(),
            message,
            toolbridge_code: (public != code).then(|| code.to_owned()),
        }
    }
}

#[cfg(test)]
mod state_tests;
#[cfg(test)]
mod tests;
