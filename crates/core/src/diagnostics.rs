//! Stable codes for the decisions toolbridge reports to the client.
//!
//! A diagnostic is not an error: the request went on, but something the client sent could not go
//! upstream exactly as it came. Every such decision is recorded with one of these codes, returned
//! in the response's `toolbridge_diagnostics` field and the `x-toolbridge-diagnostics` header, and
//! logged.

use toolbridge_wire::responses::Diagnostic;

/// A parameter the provider does not accept was not sent.
pub const PARAM_DROPPED: &str = "param_dropped";
/// A parameter was moved into the provider's accepted range.
pub const PARAM_CLAMPED: &str = "param_clamped";
/// A parameter was sent under another name or shape.
pub const PARAM_RENAMED: &str = "param_renamed";
/// `developer` messages were sent as `system` because the provider rejects the role.
pub const DEVELOPER_AS_SYSTEM: &str = "developer_as_system";
/// Consecutive system messages were merged into one because the provider requires it.
pub const SYSTEM_MERGED: &str = "system_messages_merged";
/// `text.format` could not go upstream natively and was degraded.
pub const OUTPUT_CONTRACT_DEGRADED: &str = "output_contract_degraded";
/// A tool went upstream in another shape (a freeform tool as a function, …).
pub const TOOL_DEGRADED: &str = "tool_degraded";
/// `tool_choice` could not be said to the provider as asked and was weakened.
pub const TOOL_CHOICE_DOWNGRADED: &str = "tool_choice_downgraded";
/// `allowed_tools` was applied by declaring only the allowed tools upstream.
pub const ALLOWED_TOOLS_FILTERED: &str = "allowed_tools_filtered";
/// The model called a tool name nobody declared; it is returned as a `function_call`.
pub const UNDECLARED_TOOL_CALLED: &str = "undeclared_tool_called";
/// A call's arguments did not fit its tool's shape; it is returned as a `function_call`.
pub const CALL_NOT_RESTORED: &str = "call_not_restored";
/// A call in the history had no output; an empty one was supplied for the provider.
pub const TOOL_OUTPUT_MISSING: &str = "tool_output_missing";
/// The conversation started with assistant output or a tool result, and the provider requires
/// a user turn first (Anthropic, Gemini): a minimal placeholder user turn was put before it.
pub const USER_TURN_ADDED: &str = "user_turn_added";
/// A repeated item (same id) in the input was sent once.
pub const DUPLICATE_ITEM: &str = "duplicate_item_dropped";
/// An `encrypted_content` blob was not made by this gateway, or was altered; it was ignored.
pub const REASONING_BLOB_IGNORED: &str = "reasoning_blob_ignored";
/// Reasoning was too large to seal into `encrypted_content`.
pub const REASONING_NOT_SEALED: &str = "reasoning_not_sealed";
/// The route's provider failed before answering and a fallback served the request.
pub const UPSTREAM_FALLBACK: &str = "upstream_fallback";
/// The store could not take the response (or the conversation's new items) in time: the answer
/// is served anyway, with `store: false` when the response itself was not kept.
pub const STORE_UNAVAILABLE: &str = "store_unavailable";
/// The upstream reported no usage; the token counts are estimates.
pub const USAGE_ESTIMATED: &str = "usage_estimated";
/// The upstream stream ended without a finish reason or `[DONE]`.
pub const UPSTREAM_UNTERMINATED: &str = "upstream_unterminated";
/// The upstream gave a finish reason toolbridge does not know; it was read as a normal stop.
pub const UNKNOWN_FINISH_REASON: &str = "unknown_finish_reason";
/// A tool could not go upstream and was left out of the request.
pub const TOOL_IGNORED: &str = "tool_ignored";
/// An input item the provider has no representation for was left out.
pub const ITEM_DROPPED: &str = "item_dropped";
/// A content part the provider cannot take (audio; an image on a text-only route) was replaced
/// by a short placeholder text.
pub const CONTENT_PART_DROPPED: &str = "content_part_dropped";
/// Inline images were downscaled and recompressed to keep the request within the provider's
/// size.
pub const IMAGE_DOWNSCALED: &str = "image_downscaled";
/// An echoed `image_generation_call` was replayed upstream as a short description.
pub const IMAGE_CALL_DESCRIBED: &str = "image_call_described";
/// The upstream stream contained a chunk toolbridge skipped.
pub const CHUNK_SKIPPED: &str = "upstream_chunk_skipped";

/// A call's arguments were not valid JSON and were repaired (fences, quotes, commas, truncation).
pub const ARGUMENTS_REPAIRED: &str = "arguments_repaired";
/// A call's argument values were coerced to the declared schema's types (the message has the
/// JSON pointers).
pub const ARGUMENTS_COERCED: &str = "arguments_coerced";
/// A call's arguments do not match the declared schema even after repair; returned as best effort.
pub const ARGUMENTS_INVALID: &str = "arguments_invalid";
/// The model called a tool by a variant of a declared name; the call was mapped to it.
pub const TOOL_NAME_MAPPED: &str = "tool_name_mapped";
/// A freeform tool's input was repaired (fences, CRLF, indentation, a missing end marker).
pub const CUSTOM_INPUT_REPAIRED: &str = "custom_input_repaired";
/// A freeform tool's input does not match its grammar even after repair.
pub const CUSTOM_INPUT_INVALID: &str = "custom_input_invalid";
/// A freeform tool's grammar (or a function's schema) cannot be checked: it is outside the
/// supported Lark subset, or does not compile. Its calls go on unchecked. (A name that matches
/// no declared tool keeps `undeclared_tool_called`.)
pub const CUSTOM_INPUT_UNCHECKED: &str = "custom_input_unchecked";
/// A call was still invalid after repair (or named no declared tool); it was not shown, and the
/// upstream was asked once more with the validation error as the call's result.
pub const TOOL_CALL_REASKED: &str = "tool_call_reasked";

/// The codes of what the repair of model output did to a response's calls, for counting them
/// (logs now, metrics later).
pub const REPAIR_CODES: &[&str] = &[
    ARGUMENTS_REPAIRED,
    ARGUMENTS_COERCED,
    ARGUMENTS_INVALID,
    TOOL_NAME_MAPPED,
    CUSTOM_INPUT_REPAIRED,
    CUSTOM_INPUT_INVALID,
    TOOL_CALL_REASKED,
];

/// Builds a diagnostic.
pub fn diag(code: &str, param: Option<&str>, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        code: code.to_owned(),
        param: param.map(str::to_owned),
        message: message.into(),
    }
}
/// Reasoning sealed through another provider was left out of a request to a native Responses
/// upstream, which cannot open it.
pub const REASONING_NOT_REPLAYABLE: &str = "reasoning_not_replayable";
/// A tool output's image could not go inside the tool result for this provider; it was sent in
/// a user turn right after the results.
pub const TOOL_OUTPUT_MEDIA_MOVED: &str = "tool_output_media_moved";
/// A tool output's part (a file the provider cannot take, an image by id) could not go upstream;
/// the result names it in its text instead.
pub const TOOL_OUTPUT_PART_DROPPED: &str = "tool_output_part_dropped";
